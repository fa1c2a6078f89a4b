/** Table tests for the pieces of grouped explanations that place_test.ts cannot reach. */
import { assertEquals } from "../tests/assert.ts";
import { formatCount } from "./groups.ts";

Deno.test("formatCount: thousands separators as people read them", () => {
  const cases: [number, string][] = [
    [0, "0"],
    [7, "7"],
    [999, "999"],
    [1_000, "1,000"],
    [8_213, "8,213"],
    [123_456, "123,456"],
    [1_234_567, "1,234,567"],
    [-1_234, "-1,234"],
    [56.25, "56.25"],
    [1_234.5, "1,234.5"],
  ];
  for (const [n, text] of cases) assertEquals(formatCount(n), text, String(n));
});
