/** The cluster file's model caches (inventory/cluster_file.ts, issue #25 item 5). */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { ClusterFileError, parseCluster, parseClusterFile } from "./cluster_file.ts";

const COMMIT = "4b1c2a9e0f3d5c7b8a6e4d2c0b9a8f7e6d5c4b3a";
const GIB = 2 ** 30;

/** A cluster file of one node with `cache` as its `model_cache` (left out when undefined). */
function file(cache?: unknown): string {
  return JSON.stringify({
    nodes: [{
      id: "n1",
      gpus: [{ index: 0, class: "l4-22g" }],
      ...(cache === undefined ? {} : { model_cache: cache }),
    }],
  });
}

const revision = (over: Record<string, unknown> = {}) => ({
  repo: "acme/llm",
  commit: COMMIT,
  bytes: 15 * GIB,
  state: "complete",
  bytes_done: 15 * GIB,
  last_used: null,
  pinned: false,
  ...over,
});

Deno.test("cluster file: a node's model cache is the heartbeat's, with omitted and evicted optional", () => {
  const none = parseCluster(file(), "c.json");
  assertEquals(none.caches.size, 0);
  assertEquals(none.nodes.map((n) => n.id), ["n1"]);
  // The nodes are the same with or without caches: placement's node has no cache field.
  const cache = { room_bytes: 9 * GIB, revisions: [revision()] };
  const parsed = parseCluster(file(cache), "c.json");
  assertEquals(parsed.nodes, none.nodes);
  assertEquals(parseClusterFile(file(cache), "c.json"), none.nodes);
  assertEquals(parsed.caches.get("n1"), { ...cache, omitted: 0, evicted: [] });
  // A heartbeat's whole `model_cache`, pasted as it is, is taken as it is.
  const heartbeat = {
    room_bytes: null,
    revisions: [revision({ state: "downloading", bytes_done: GIB, last_used: 1 })],
    omitted: 3,
    evicted: [{ repo: "acme/old", commit: COMMIT, bytes: GIB, at: 5, reason: "over 90 %" }],
    engine_caches_evicted: [],
  };
  assertEquals(parseCluster(file(heartbeat), "c.json").caches.get("n1"), heartbeat);
});

Deno.test("cluster file: a bad model cache is refused with the path of each bad field", () => {
  const cases: [unknown, string][] = [
    [{ revisions: [] }, "nodes[0].model_cache.room_bytes"],
    [{ room_bytes: -1, revisions: [] }, "nodes[0].model_cache.room_bytes"],
    [{ room_bytes: 1.5, revisions: [] }, "nodes[0].model_cache.room_bytes"],
    [{ room_bytes: 0 }, "nodes[0].model_cache.revisions"],
    [
      { room_bytes: 0, revisions: [revision({ commit: "main" })] },
      "nodes[0].model_cache.revisions[0].commit: must be a commit of 40 hex digits",
    ],
    [
      { room_bytes: 0, revisions: [revision({ state: "held" })] },
      "nodes[0].model_cache.revisions[0].state",
    ],
    [
      { room_bytes: 0, revisions: [revision({ repo: "" })] },
      "nodes[0].model_cache.revisions[0].repo",
    ],
    [
      { room_bytes: 0, revisions: [revision(), revision({ state: "partial" })] },
      `nodes[0].model_cache.revisions[1]: revision acme/llm@${COMMIT} appears twice`,
    ],
    ["full", "nodes[0].model_cache"],
  ];
  for (const [cache, message] of cases) {
    try {
      parseCluster(file(cache), "c.json");
      throw new Error(`${JSON.stringify(cache)} must be refused`);
    } catch (e) {
      assertOk(e instanceof ClusterFileError, String(e));
      assertStringIncludes(e.message, "Cannot use cluster file c.json");
      assertStringIncludes(e.message, message, JSON.stringify(cache));
    }
  }
});
