/**
 * The models listing's cost (review of issue #25 follow-up, ops item 1): a
 * finished pull keeps a part per node for a day and the dashboard asks for
 * the list every 2 s, so a fleet-wide pull must cost a lookup per part
 * that still shows (requested or failed), not a scan of the hosts per part.
 * Work is counted through the parts' `node` reads, never timed.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { registration } from "../tests/registration.ts";
import type { CachedRevisionReport, ModelCacheReport } from "../protocol/model_cache_report.ts";
import type { PullNode } from "./model_pull_record.ts";
import { modelList } from "./model_views.ts";
import { ControlState } from "./state.ts";
import { MemoryStore } from "./store/memory_store.ts";
import type { StoredNode } from "./store/store.ts";

const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const NODES = 10_000;
const T0 = 1_700_000_000_000;

/** A node's cache report holding MODEL@COMMIT (1000 bytes) in `state`, `bytesDone` of them on disk. */
function holding(state: CachedRevisionReport["state"], bytesDone: number): ModelCacheReport {
  return {
    room_bytes: 0,
    revisions: [{
      repo: MODEL,
      commit: COMMIT,
      bytes: 1000,
      state,
      bytes_done: bytesDone,
      last_used: null,
      pinned: false,
    }],
    omitted: 0,
    evicted: [],
  };
}

/** A part whose `node` reads are counted; past `budget` reads it throws, so a scan fails fast. */
function countedPart(part: PullNode, reads: { n: number; budget: number }): PullNode {
  return new Proxy(part, {
    get(target, key, receiver) {
      if (key === "node" && ++reads.n > reads.budget) {
        throw new Error(`more than ${reads.budget} reads of a part's node: a scan per part`);
      }
      return Reflect.get(target, key, receiver);
    },
  });
}

Deno.test("models list: a fleet-wide pull costs a lookup per part still shown, not a scan per part", () => {
  const state = new ControlState({ store: new MemoryStore(), clock: new FakeClock(T0) });
  const reg = registration("n0");
  const ids = Array.from({ length: NODES }, (_, i) => `n${i}`);
  for (const id of ids) {
    const node: StoredNode = {
      id,
      registration: reg,
      token_hash: "",
      intent: "none",
      label_overrides: {},
      fabric_overrides: {},
      generation: 0,
      updated_at: T0,
    };
    state.nodes.set(id, node);
  }
  // Every node but the last 20 holds it; n9980..n9989 are still asked (n9980 reports nothing
  // yet), n9990..n9999 failed (n9995.. with a partial copy left, n9999 with no kind: a record
  // from before kinds).
  for (const id of ids.slice(0, NODES - 10)) {
    const i = Number(id.slice(1));
    if (i === NODES - 20) continue;
    const partial = i >= NODES - 20 && i < NODES - 10;
    state.modelCaches.set(id, partial ? holding("downloading", 10) : holding("complete", 1000));
  }
  for (const id of ids.slice(NODES - 5)) {
    state.modelCaches.set(id, holding("partial", 10));
  }
  const reads = { n: 0, budget: 0 };
  const shown = 20;
  // Each part still shown may read its node a few times; the done ones need not at all.
  reads.budget = 4 * shown;
  const nodes = ids.map((id, i) => {
    const state = i < NODES - 20 ? "done" : i < NODES - 10 ? "requested" : "failed";
    const part: PullNode = {
      node: id,
      state,
      requested_at: T0,
      finished_at: state === "requested" ? null : T0 + 1,
      reason: state === "failed" ? "hub answered 404" : null,
      ...(state === "failed" && i !== NODES - 1 ? { kind: "revision_not_found" } : {}),
    };
    return countedPart(part, reads);
  });
  state.modelPulls.set(`${MODEL}@${COMMIT}`, {
    id: `${MODEL}@${COMMIT}`,
    model: MODEL,
    commit: COMMIT,
    nodes,
    created_at: T0,
    updated_at: T0 + 1,
    finished_at: T0 + 1,
  });

  const [v] = modelList(state);
  assertOk(reads.n <= reads.budget, `${reads.n} reads`);
  assertEquals(v.hosts.length, NODES);
  const counts = new Map<string, number>();
  for (const h of v.hosts) counts.set(h.state, (counts.get(h.state) ?? 0) + 1);
  assertEquals(Object.fromEntries(counts), {
    complete: NODES - 20,
    downloading: 9,
    requested: 1,
    failed: 10,
  });
  // A download under way is newer than the pull's failure; a partial copy is what it left.
  const byNode = new Map(v.hosts.map((h) => [h.node, h]));
  assertEquals(byNode.get("n9985")?.state, "downloading");
  assertEquals(byNode.get("n9980")?.state, "requested");
  assertEquals(byNode.get("n9990")?.failure?.kind, "revision_not_found");
  assertEquals(byNode.get("n9997")?.bytes_done, 10);
  assertEquals(byNode.get("n9999")?.failure, {
    kind: "fetch_failed",
    message: "hub answered 404",
    at: T0 + 1,
  });
});
