import { assertEquals } from "../tests/assert.ts";
import { escapeLabelValue } from "./prometheus_label.ts";

Deno.test("escapeLabelValue: backslash, double quote and line feed escaped, nothing else", () => {
  const cases: [string, string][] = [
    ["qwen/Qwen3-8B", "qwen/Qwen3-8B"],
    ['a"b', 'a\\"b'],
    ["a\\b", "a\\\\b"],
    ["a\nb", "a\\nb"],
    ['\\"\n', '\\\\\\"\\n'],
    ["tab\there ünï", "tab\there ünï"],
    ["", ""],
  ];
  for (const [raw, want] of cases) assertEquals(escapeLabelValue(raw), want, JSON.stringify(raw));
});
