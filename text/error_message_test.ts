import { assertEquals } from "../tests/assert.ts";
import { errorMessage } from "./error_message.ts";

Deno.test("errorMessage: an Error's message, anything else in words", () => {
  class Refused extends Error {}
  const cases: [unknown, string][] = [
    [new Error("disk full"), "disk full"],
    [new Refused("no"), "no"],
    [new TypeError(""), ""],
    ["a thrown string", "a thrown string"],
    [42, "42"],
    [null, "null"],
    [undefined, "undefined"],
    [{ toString: () => "custom" }, "custom"],
  ];
  for (const [thrown, want] of cases) assertEquals(errorMessage(thrown), want);
});
