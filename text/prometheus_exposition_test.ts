import { assertEquals } from "../tests/assert.ts";
import { Exposition } from "./prometheus_exposition.ts";

Deno.test("Exposition: HELP and TYPE, then samples, prefixed and escaped", () => {
  const out = new Exposition("llmgw_x_");
  out.family("things", "gauge", "Things by kind.\nSecond line \\ here.");
  out.sample("things", { kind: 'a"b' }, 2);
  out.sample("things", {}, 0.5);
  assertEquals(
    out.text(),
    [
      "# HELP llmgw_x_things Things by kind.\\nSecond line \\\\ here.",
      "# TYPE llmgw_x_things gauge",
      'llmgw_x_things{kind="a\\"b"} 2',
      "llmgw_x_things 0.5",
      "",
    ].join("\n"),
  );
});
