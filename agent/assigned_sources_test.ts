/**
 * The assigned sources (issue #25 item 3): peers in the order the control
 * plane gave, the origin last when assigned, the origin alone for a
 * revision with no assignment or one of another commit.
 */
import { assertEquals } from "../tests/assert.ts";
import { MemoryByteSource } from "../tests/memory_byte_source.ts";
import { AssignedSources } from "./assigned_sources.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const origin = new MemoryByteSource("https://hub.example", new Map(), [], "hub");
const refuse = () => Promise.reject(new Error("not called"));

Deno.test("assigned sources: peers in order, then the origin; the origin alone otherwise", () => {
  const a = new AssignedSources(refuse);
  assertEquals(a.sourcesFor("acme/m", COMMIT, origin).map((s) => s.name), ["https://hub.example"]);
  a.update([{
    model: "acme/m",
    commit: COMMIT,
    peers: [{ node_id: "n2", url: "https://n2:7400" }, { node_id: "n1", url: "https://n1:7400" }],
    origin: true,
  }, { model: "acme/other", peers: [{ node_id: "n3", url: "https://n3:7400" }], origin: false }]);
  const got = a.sourcesFor("acme/m", COMMIT, origin);
  assertEquals(got.map((s) => [s.kind, s.name]), [
    ["peer", "peer n2"],
    ["peer", "peer n1"],
    ["hub", "https://hub.example"],
  ]);
  // The same peer objects across calls: one source order per peer for the cache.
  assertEquals(a.sourcesFor("acme/m", COMMIT, origin)[0] === got[0], true);
  assertEquals(a.sourcesFor("acme/m", "f".repeat(40), origin).map((s) => s.name), [
    "https://hub.example",
  ]);
  // No commit in the assignment: any commit of the model; origin: false leaves it out.
  assertEquals(a.sourcesFor("acme/other", COMMIT, origin).map((s) => s.name), ["peer n3"]);
  a.update(undefined);
  assertEquals(a.sourcesFor("acme/m", COMMIT, origin).map((s) => s.name), ["https://hub.example"]);
});
