import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { cutAtWord, displayWidth, renderTable } from "./table.ts";

Deno.test("displayWidth: ASCII 1, CJK and emoji 2, combining marks 0", () => {
  assertEquals(displayWidth("abc"), 3);
  assertEquals(displayWidth("节点"), 4);
  assertEquals(displayWidth("🚀"), 2);
  assertEquals(displayWidth("e\u0301"), 1);
});

Deno.test("renderTable: columns line up by display width with wide names", () => {
  const table = renderTable(["NODE", "STATE"], [["节点-一", "ready"], ["n1", "cordoned"]]);
  const lines = table.split("\n");
  const at = lines.map((l) => displayWidth(l.slice(0, l.search(/ (ready|cordoned|STATE)$/) + 1)));
  assertEquals(new Set(at).size, 1, table);
});

Deno.test("renderTable: every row's columns start at the same display column (property)", () => {
  const cell = fc.string({ unit: fc.constantFrom("a", "Z", "节", "🚀", "é", " "), maxLength: 12 })
    .map((s) => s.trim() || "x");
  fc.assert(fc.property(fc.array(fc.tuple(cell, cell), { minLength: 1, maxLength: 6 }), (rows) => {
    const lines = renderTable(["A", "B"], rows.map(([a, b]) => [a, b])).split("\n");
    const starts = lines.map((l, i) => {
      const first = i === 0 ? "A" : rows[i - 1][0];
      return displayWidth(l.slice(0, first.length)) +
        (l.slice(first.length).length - l.slice(first.length).trimStart().length);
    });
    return new Set(starts).size === 1;
  }));
});

Deno.test("cutAtWord: short text whole, long text at a word, other lines marked", () => {
  assertEquals(cutAtWord("short", 80), "short");
  assertEquals(cutAtWord("one two three four", 10), "one two…");
  assertEquals(cutAtWord("first line\nsecond line", 80), "first line …");
  assertEquals(cutAtWord("x".repeat(20), 10), `${"x".repeat(9)}…`);
  assertOk(displayWidth(cutAtWord("节点".repeat(20), 11)) <= 11);
});
