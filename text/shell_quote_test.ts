import { assertEquals } from "../tests/assert.ts";
import { shellQuote } from "./shell_quote.ts";

Deno.test("shellQuote: plain words stay, everything else is single-quoted", () => {
  const cases: [string, string][] = [
    ["10.0.0.1:29500", "10.0.0.1:29500"],
    ["--port=8000", "--port=8000"],
    ["org/model-7B_v1.5", "org/model-7B_v1.5"],
    ["", "''"],
    ["a b", "'a b'"],
    ["it's", `'it'\\''s'`],
    ["$(x)", "'$(x)'"],
    ["*", "'*'"],
  ];
  for (const [input, want] of cases) assertEquals(shellQuote(input), want, input);
});
