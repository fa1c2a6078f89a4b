/**
 * Agents' model caches in the control plane (issue #25 item 5): a
 * heartbeat's report is kept and weighed by every placement
 * (`insufficient_disk`, holders first), its evictions become
 * `model_evicted` events, and a heartbeat without one (an older agent)
 * leaves the node unfiltered.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { liveExplanation } from "./live_explanation.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const GIB = 2 ** 30;
const facts = fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]);

function report(
  roomGiB: number,
  holds = false,
  evicted: ModelCacheReport["evicted"] = [],
): ModelCacheReport {
  return {
    room_bytes: roomGiB * GIB,
    revisions: holds
      ? [{
        repo: QWEN.model,
        commit: COMMIT,
        bytes: 15e9,
        state: "complete",
        bytes_done: 15e9,
        last_used: 1,
        pinned: false,
      }]
      : [],
    omitted: 0,
    evicted,
  };
}

async function cluster() {
  const t = await testControl({
    modelFacts: { facts: () => Promise.resolve(facts) },
    commits: { resolveCommit: () => Promise.resolve(COMMIT) },
  });
  await registerNodes(t.cp, ["n1", "n2", "n3"]);
  return t;
}

Deno.test("a node without room is passed over, a holder preferred; the explanation says both", async () => {
  const { cp } = await cluster();
  await cp.nodes.heartbeat({ node_id: "n1", generation: 0, shards: [], model_cache: report(2) });
  await cp.nodes.heartbeat({ node_id: "n2", generation: 0, shards: [], model_cache: report(100) });
  await cp.nodes.heartbeat({
    node_id: "n3",
    generation: 0,
    shards: [],
    model_cache: report(0, true),
  });
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const [r] = cp.replicas();
  assertEquals(r.shards.map((s) => s.node), ["n3"]);
  const live = liveExplanation(cp.state, r.id).live!;
  assertStringIncludes(live.summary, `n3 holds ${QWEN.model}@4b1c2a9`);
  assertEquals(live.profiles[0].counts, { insufficient_disk: 1 });
  assertStringIncludes(
    live.profiles[0].nodes!.find((n) => n.node === "n1")!.message,
    "room for 2.0 GiB under the high watermark",
  );
});

Deno.test("no node with room: unschedulable with insufficient_disk; an older agent's node is not filtered", async () => {
  const { cp } = await cluster();
  for (const n of ["n1", "n2", "n3"]) {
    await cp.nodes.heartbeat({ node_id: n, generation: 0, shards: [], model_cache: report(1) });
  }
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].state, "pending");
  assertStringIncludes(
    cp.replicas()[0].explanation?.summary ?? "",
    "3 too little model cache room",
  );
  // n2's agent is replaced by one that reports no cache: unknown room is not refused.
  cp.state.modelCaches.delete("n2");
  await cp.nodes.heartbeat({ node_id: "n2", generation: 0, shards: [] });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].shards.map((s) => s.node), ["n2"]);
});

Deno.test("an eviction the agent reports is a model_evicted event", async () => {
  const { cp } = await cluster();
  const evicted = [{
    repo: "acme/old",
    commit: COMMIT,
    bytes: 3 * GIB,
    at: 5,
    reason: "disk 95% used",
  }];
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: report(10, false, evicted),
  });
  const e = (await cp.events.list()).filter((e) => e.kind === "model_evicted");
  assertEquals(e.length, 1);
  assertEquals(e[0].subject, "node/n1");
  assertOk(e[0].message.includes(`acme/old@${COMMIT}`) && e[0].message.includes("3.0 GiB freed"));
  assertEquals(cp.state.modelCaches.get("n1")!.room_bytes, 10 * GIB);
});
