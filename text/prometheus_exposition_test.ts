import { assertEquals } from "../tests/assert.ts";
import { Exposition, labelText } from "./prometheus_exposition.ts";

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

Deno.test("Exposition: a label set built once by labelText gives the same sample", () => {
  const kept = labelText({ model: 'org/m"1', replica: "r\\0\n" });
  assertEquals(kept, 'model="org/m\\"1",replica="r\\\\0\\n"');
  const once = new Exposition("llmgw_gateway_");
  once.sampleText("requests_total", `${kept},outcome="ok"`, 3);
  once.sampleText("held_requests", "", 0);
  const each = new Exposition("llmgw_gateway_");
  each.sample("requests_total", { model: 'org/m"1', replica: "r\\0\n", outcome: "ok" }, 3);
  each.sample("held_requests", {}, 0);
  assertEquals(once.text(), each.text());
  assertEquals(labelText({}), "");
});
