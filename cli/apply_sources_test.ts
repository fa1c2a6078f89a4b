import { assertEquals } from "../tests/assert.ts";
import { decodeDocuments } from "./apply_sources.ts";

Deno.test("apply sources: a list (get deployments -o json) stands for each of its items", () => {
  const json = JSON.stringify([{ name: "a" }, { name: "b" }]);
  assertEquals(decodeDocuments(json, "all.json"), [
    { source: "all.json (item 1)", doc: { name: "a" } },
    { source: "all.json (item 2)", doc: { name: "b" } },
  ]);
  // From standard input (read as YAML), and beside other documents.
  assertEquals(decodeDocuments(`${json}\n---\nname: c\n`, "standard input"), [
    { source: "standard input (document 1) (item 1)", doc: { name: "a" } },
    { source: "standard input (document 1) (item 2)", doc: { name: "b" } },
    { source: "standard input (document 2)", doc: { name: "c" } },
  ]);
  assertEquals(decodeDocuments("name: d\n", "d.yaml"), [{ source: "d.yaml", doc: { name: "d" } }]);
});
