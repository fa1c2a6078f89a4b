import { assertEquals, assertThrows } from "../tests/assert.ts";
import { decodeDocuments, DocumentError } from "./documents.ts";

Deno.test("decodeDocuments: JSON by extension, else YAML with several documents and lists", () => {
  const json = JSON.stringify([{ name: "a" }, { name: "b" }]);
  const cases: [string, string, unknown][] = [
    ["name: d\n", "d.yaml", [{ source: "d.yaml", doc: { name: "d" } }]],
    ['{"name": "j"}', "j.json", [{ source: "j.json", doc: { name: "j" } }]],
    // JSON text under a YAML name (or on standard input) reads the same.
    ['{"name": "j"}', "j.yaml", [{ source: "j.yaml", doc: { name: "j" } }]],
    [json, "all.json", [
      { source: "all.json (item 1)", doc: { name: "a" } },
      { source: "all.json (item 2)", doc: { name: "b" } },
    ]],
    [`${json}\n---\nname: c\n`, "standard input", [
      { source: "standard input (document 1) (item 1)", doc: { name: "a" } },
      { source: "standard input (document 1) (item 2)", doc: { name: "b" } },
      { source: "standard input (document 2)", doc: { name: "c" } },
    ]],
    ["name: a\n---\n---\nname: b\n", "two.yml", [
      { source: "two.yml (document 1)", doc: { name: "a" } },
      { source: "two.yml (document 3)", doc: { name: "b" } },
    ]],
    ["", "empty.yaml", []],
  ];
  for (const [text, source, want] of cases) {
    assertEquals(decodeDocuments(text, source), want, `${source}: ${text}`);
  }
});

Deno.test("decodeDocuments: bad text names the source, the document and the first line", () => {
  const cases: [string, string, string][] = [
    ['{"name": ', "d.json", "d.json is not valid JSON: "],
    ["name: [\n", "d.yaml", "d.yaml is not valid YAML or JSON: "],
    ["name: a\n---\nname: [\n", "d.yaml", "d.yaml (document 2) is not valid YAML or JSON: "],
  ];
  for (const [text, source, prefix] of cases) {
    const e = assertThrows(() => decodeDocuments(text, source), DocumentError) as DocumentError;
    assertEquals(e.message.startsWith(prefix), true, e.message);
    assertEquals(e.message.includes("\n"), false, e.message);
    assertEquals(`${e.source} is ${e.reason}`, e.message);
  }
});
