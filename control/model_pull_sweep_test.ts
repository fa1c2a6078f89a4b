/**
 * The pulls' sweep (control/model_pull_sweep.ts) over a store that refuses
 * some records for good (review of issue #25 follow-up, ops item 5): the
 * other pulls are still cancelled and pruned in the same sweep, and the
 * refusals make one warning naming them.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import type { ModelPull } from "./model_pull_record.ts";
import { FINISHED_PULL_TTL_MS, NODE_REMOVED_REASON, sweepPulls } from "./model_pull_sweep.ts";
import { ControlState } from "./state.ts";
import { MemoryStore } from "./store/memory_store.ts";

const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const T0 = 1_700_000_000_000;

/** A memory store that refuses, every time, the writes of the pulls it names. */
class RefusingStore extends MemoryStore {
  readonly refused = new Set<string>();
  override putModelPull(p: ModelPull): Promise<void> {
    return this.refused.has(p.id)
      ? Promise.reject(new Error(`row of ${p.id} too large`))
      : super.putModelPull(p);
  }
  override deleteModelPull(id: string): Promise<boolean> {
    return this.refused.has(id)
      ? Promise.reject(new Error(`row of ${id} is referenced`))
      : super.deleteModelPull(id);
  }
}

/** A pull of `commit` (one hex digit, repeated) with one part on `node`. */
function pull(digit: string, node: string, finished: boolean): ModelPull {
  const commit = digit.repeat(40);
  return {
    id: `${MODEL}@${commit}`,
    model: MODEL,
    commit,
    nodes: [{
      node,
      state: finished ? "done" : "requested",
      requested_at: T0,
      finished_at: finished ? T0 : null,
      reason: null,
    }],
    created_at: T0,
    updated_at: T0,
    finished_at: finished ? T0 : null,
  };
}

Deno.test("sweep: a record the store refuses is skipped, the rest are swept, one warning names the refused", async () => {
  const store = new RefusingStore();
  const state = new ControlState({ store, clock: new FakeClock(T0) });
  const warnings: [string, string][] = [];
  state.warn = (msg, detail) => warnings.push([msg, detail]);
  // Parts of removed nodes (no node is known): "a" and "c" refused, "b" and "d" not; then old
  // finished pulls: "e" refused, "f" not.
  const pulls = [
    pull("a", "gone1", false),
    pull("b", "gone2", false),
    pull("c", "gone3", false),
    pull("d", "gone4", false),
    pull("e", "n1", true),
    pull("f", "n1", true),
  ];
  for (const p of pulls) {
    await store.putModelPull(p);
    state.modelPulls.set(p.id, p);
  }
  for (const d of ["a", "c", "e"]) store.refused.add(`${MODEL}@${d.repeat(40)}`);

  await sweepPulls(state, T0 + FINISHED_PULL_TTL_MS + 1);

  const part = (d: string) => state.modelPulls.get(`${MODEL}@${d.repeat(40)}`)?.nodes[0];
  assertEquals([part("a")?.state, part("c")?.state], ["requested", "requested"]);
  // Cancelled after the refused "a": the sweep went on.
  assertEquals([part("b")?.state, part("b")?.reason], ["cancelled", NODE_REMOVED_REASON]);
  assertEquals([part("d")?.state, part("d")?.reason], ["cancelled", NODE_REMOVED_REASON]);
  // "e" refused its delete; "f" after it is gone, in memory and in the store.
  assertOk(part("e") !== undefined);
  assertEquals(part("f"), undefined);
  const stored = (await store.listModelPulls()).map((p) => p.commit[0]).sort();
  assertEquals(stored, ["a", "b", "c", "d", "e"]);
  assertEquals(warnings.length, 1, JSON.stringify(warnings));
  const [msg, detail] = warnings[0];
  assertStringIncludes(msg, "the store refused 3 model pull writes of the sweep");
  assertStringIncludes(msg, `cancel model pull ${MODEL}@${"a".repeat(40)} on removed node gone1`);
  assertStringIncludes(msg, `cancel model pull ${MODEL}@${"c".repeat(40)} on removed node gone3`);
  assertStringIncludes(msg, `delete finished model pull ${MODEL}@${"e".repeat(40)}`);
  assertStringIncludes(msg, "the next sweep tries again");
  assertStringIncludes(detail, "too large");
  assertStringIncludes(detail, "is referenced");

  // The next sweep, with nothing refused, finishes what was left and says nothing.
  store.refused.clear();
  await sweepPulls(state, T0 + 2 * FINISHED_PULL_TTL_MS + 2);
  assertEquals(warnings.length, 1);
  assertEquals([part("a")?.state, part("c")?.state], ["cancelled", "cancelled"]);
  assertEquals([...state.modelPulls.values()].map((p) => p.commit[0]).sort(), ["a", "c"]);
});
