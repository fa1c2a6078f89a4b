import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { gpus, node } from "../tests/cluster_builders.ts";
import { registration } from "../tests/registration.ts";
import { explanationLines } from "../placement/place.ts";
import { NotFoundError } from "./errors.ts";
import { liveExplanation, PER_NODE_DETAIL_MAX_NODES, withoutReplica } from "./live_explanation.ts";

Deno.test("withoutReplica: only the replica's own allocations are dropped", () => {
  const n = node("n1", { gpus: gpus(4) });
  n.allocations = [
    { replica_id: "a-r0", shard_id: "s0", gpu_indices: [0, 1] },
    { replica_id: "b-r0", shard_id: "s1", gpu_indices: [2] },
  ];
  const [out] = withoutReplica([n], "a-r0");
  assertEquals(out.allocations.map((a) => a.replica_id), ["b-r0"]);
  assertEquals(n.allocations.length, 2, "the input is not changed");
});

Deno.test("liveExplanation: a placed replica is explained as if placed now, every node named on a small fleet", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  await cp.nodes.setIntent("n2", "cordoned");
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const id = cp.replicas()[0].id;
  const got = liveExplanation(cp.state, id);
  assertEquals(got.replica.id, id);
  assertEquals(got.detail, "full");
  assertEquals(got.nodes, 2);
  // Its own GPUs count as free, so it still fits where it is; n2 is named with its reason.
  assertOk(got.live !== null && got.live.profiles[0].fits, JSON.stringify(got.live));
  const lines = explanationLines(got.live!, { detail: true }).join("\n");
  assertOk(/n2: node_cordoned/.test(lines), lines);
});

Deno.test("liveExplanation: past the per-node limit, rejections are grouped", async () => {
  const { cp } = await testControl();
  const ids = Array.from({ length: PER_NODE_DETAIL_MAX_NODES + 1 }, (_, i) => `n${i}`);
  await registerNodes(cp, ids);
  for (const id of ids.slice(1)) await cp.nodes.setIntent(id, "cordoned");
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const got = liveExplanation(cp.state, cp.replicas()[0].id);
  assertEquals(got.detail, "grouped");
  const attempt = got.live!.profiles[0];
  assertEquals(attempt.nodes, undefined);
  assertEquals(attempt.groups?.find((g) => g.reason === "node_cordoned")?.count, ids.length - 1);
});

Deno.test("an SGLang replica is never placed on a node that reports vLLM only, and explain says why (issue #23)", async () => {
  const { cp } = await testControl();
  const vllmOnly = { engine_versions: { vllm: "0.11.1" } };
  await cp.nodes.register(registration("n1", undefined, vllmOnly), null);
  await cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], engine: "sglang" }],
  });
  await cp.reconcile();
  await cp.reconcile();
  const [replica] = cp.replicas();
  assertEquals(replica.shards, [], "no shard was placed on n1");
  const got = liveExplanation(cp.state, replica.id);
  const attempt = got.live!.profiles[0];
  assertEquals(attempt.counts, { engine_missing: 1 });
  assertEquals(attempt.nodes, [{
    node: "n1",
    reason: "engine_missing",
    message: "needs engine sglang; node has vllm 0.11.1",
  }]);
  // A node whose agent reports no engine is unknown: the replica goes there.
  await cp.nodes.register(registration("n2"), null);
  await cp.reconcile();
  await cp.reconcile();
  assertEquals(cp.replicas()[0].shards.map((s) => s.node), ["n2"]);
});

Deno.test("liveExplanation: an unknown replica is a NotFoundError", async () => {
  const { cp } = await testControl();
  await assertRejects(
    () => Promise.resolve().then(() => liveExplanation(cp.state, "nope")),
    NotFoundError,
  );
});
