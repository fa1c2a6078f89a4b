/**
 * Table tests for the filters that say a profile can never run on a node
 * (issue #23 items 1 and 5): `engine_missing` (the node does not report the
 * profile's engine) and `node_too_small` (the node has fewer GPUs of the
 * class than one shard needs, so waiting for capacity cannot help).
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { alloc, deployment, gpu, gpus, node, profile } from "../tests/cluster_builders.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Deployment } from "../deployment/schema.ts";
import {
  explanationLines,
  indexCluster,
  place,
  type PlacementResult,
  placeReplica,
  type ProfileAttempt,
} from "./mod.ts";

function attemptOf(nodes: ClusterNode[], dep: Deployment, i = 0): ProfileAttempt {
  return placeReplica(nodes, dep, "r-1", { detail: "full" }).explanation.profiles[i];
}

function rejections(a: ProfileAttempt): Record<string, [string, string]> {
  return Object.fromEntries((a.nodes ?? []).map((r) => [r.node, [r.reason, r.message]]));
}

function nodeOf(r: PlacementResult): string {
  assertOk(r.status === "placed", `expected a placement, got: ${r.explanation.summary}`);
  return r.shards[0].node;
}

const VLLM_ONLY = { vllm: "0.11.1" };
const SGLANG_ONLY = { sglang: "0.5.3" };
const BOTH = { vllm: "0.11.1", sglang: "0.5.3" };

// ---------------------------------------------------------------------------
// engine_missing

Deno.test("engine_missing: an SGLang profile is never placed on a node that reports vLLM only", () => {
  const sglang = deployment([profile({ name: "sg", engine: "sglang", gpus_per_node: 1 })]);
  // n1 is the bin-packing favourite (fewest free GPUs): it must still be passed over.
  const nodes = [
    node("n1", { gpus: gpus(2), engine_versions: VLLM_ONLY }),
    node("n2", { engine_versions: BOTH }),
  ];
  assertEquals(nodeOf(placeReplica(nodes, sglang, "r-1")), "n2");
  const index = indexCluster([node("n1", { engine_versions: VLLM_ONLY })]);
  for (let i = 0; i < 8; i++) {
    const r = place(index, sglang, `r-${i}`, { detail: "full" });
    assertEquals(r.status, "unschedulable", `replica ${i} placed on a node without sglang`);
  }
  const a = attemptOf([node("n1", { engine_versions: VLLM_ONLY })], sglang);
  assertEquals(a.counts, { engine_missing: 1 });
  assertEquals(a.summary, "0/1 nodes fit: 1 without sglang");
  assertEquals(rejections(a), {
    n1: ["engine_missing", "needs engine sglang; node has vllm 0.11.1"],
  });
});

Deno.test("engine_missing: each engine goes only where it is reported", () => {
  const nodes = [
    node("n1", { engine_versions: VLLM_ONLY }),
    node("n2", { engine_versions: SGLANG_ONLY }),
  ];
  const on = (engine: string) =>
    nodeOf(placeReplica(nodes, deployment([profile({ name: "p", engine })]), "r"));
  assertEquals(on("vllm"), "n1");
  assertEquals(on("sglang"), "n2");
});

Deno.test("engine_missing: a node that reports no engine is unknown and takes any engine", () => {
  // An older agent, or a cluster file without engine_versions: it keeps working.
  const sglang = deployment([profile({ name: "sg", engine: "sglang" })]);
  assertEquals(nodeOf(placeReplica([node("n1")], sglang, "r-1")), "n1");
  assertEquals(nodeOf(placeReplica([node("n1", { engine_versions: {} })], sglang, "r-1")), "n1");
});

Deno.test("engine_missing: a lower profile with an engine the nodes have is used, and the summary says why", () => {
  const dep = deployment([
    profile({ name: "sg", engine: "sglang" }),
    profile({ name: "vl", engine: "vllm" }),
  ]);
  const r = placeReplica([node("n1", { engine_versions: VLLM_ONLY })], dep, "r-1");
  assertOk(r.status === "placed");
  assertEquals(r.profile, "vl");
  assertEquals(
    r.explanation.summary,
    'placed with profile "vl" (choice 2 of 2): fits on n1 (of 1 nodes); profile "sg": 0/1 nodes fit: 1 without sglang',
  );
});

Deno.test("engine_missing: the group names what the nodes have, most common first", () => {
  const nodes = [
    node("n1", { engine_versions: VLLM_ONLY }),
    node("n2", { engine_versions: { vllm: "0.10.2" } }),
    node("n3", { engine_versions: VLLM_ONLY }),
    node("n4", { engine_versions: { sglang: "0.5.3", "my-engine": "2" } }),
  ];
  const a = attemptOf(nodes, deployment([profile({ name: "p", engine: "trtllm" })]));
  assertEquals(a.groups, [{
    reason: "engine_missing",
    count: 4,
    message:
      "needs engine trtllm; they have vllm 0.11.1 (2), my-engine 2 + sglang 0.5.3 (1), vllm 0.10.2 (1)",
    examples: ["n1", "n2", "n3"],
  }]);
  assertEquals(rejections(a).n4, [
    "engine_missing",
    "needs engine trtllm; node has my-engine 2, sglang 0.5.3",
  ]);
});

Deno.test("engine_missing comes after the node's state: a cordoned node says cordoned", () => {
  const a = attemptOf(
    [node("n1", { state: "cordoned", engine_versions: VLLM_ONLY })],
    deployment([profile({ name: "sg", engine: "sglang" })]),
  );
  assertEquals(a.counts, { node_cordoned: 1 });
});

// ---------------------------------------------------------------------------
// node_too_small

const l40s = (n: number) => gpus(n, { cls: "l40s-45g" });

Deno.test("node_too_small: TP 8 on 4-GPU L40S nodes can never fit, and says what to change", () => {
  const dep = deployment([profile({ name: "tp8", gpu_class: "l40s-45g", gpus_per_node: 8 })]);
  const a = attemptOf([node("n1", { gpus: l40s(4) }), node("n2", { gpus: l40s(4) })], dep);
  assertEquals(a.counts, { node_too_small: 2 });
  assertEquals(a.summary, "0/2 nodes fit: 2 too small (fewer than 8 l40s-45g GPUs in all)");
  assertEquals(rejections(a).n1, [
    "node_too_small",
    "node has only 4 l40s-45g GPUs; a shard needs 8 on one node, so this profile can never fit: use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel",
  ]);
});

Deno.test("node_too_small: TP 16 on 8-GPU nodes suggests nodes: 2", () => {
  const dep = deployment([profile({ name: "tp16", gpus_per_node: 16 })]);
  const a = attemptOf([node("n1"), node("n2", { gpus: gpus(2) })], dep);
  assertEquals(a.groups, [{
    reason: "node_too_small",
    count: 2,
    message:
      "they have only 2–8 h100-80g GPUs; a shard needs 16 on one node, so this profile can never fit: use nodes: 2 (8 GPUs per node) or a smaller tensor_parallel",
    examples: ["n1", "n2"],
  }]);
  const lines = explanationLines(
    placeReplica([node("n1")], dep, "r-1", { detail: "grouped" }).explanation,
  );
  assertEquals(
    lines[2],
    "    1 node: node_too_small — they have only 8 h100-80g GPUs; a shard needs 16 on one node, so this profile can never fit: use nodes: 2 (8 GPUs per node) or a smaller tensor_parallel (n1)",
  );
});

Deno.test("node_too_small: TP 3 on 2-GPU nodes can only be split into 3 nodes of 1", () => {
  const dep = deployment([profile({ name: "tp3", gpus_per_node: 3 })]);
  const a = attemptOf([node("n1", { gpus: gpus(2) })], dep);
  assertEquals(
    rejections(a).n1[1],
    "node has only 2 h100-80g GPUs; a shard needs 3 on one node, so this profile can never fit: use nodes: 3 (1 GPU per node) or a smaller tensor_parallel",
  );
});

Deno.test("node_too_small vs insufficient_gpus: allocated and unhealthy GPUs still count toward the size", () => {
  const sick = gpus(8);
  sick[3] = gpu(3, { problems: ["uncorrected ECC errors: 1"] });
  const a = attemptOf([
    node("n1", { allocations: [alloc("old", [0, 1, 2, 3])] }), // busy: may free up
    node("n2", { gpus: sick }), // sick: may be repaired
    node("n3", { gpus: gpus(7) }), // never
    node("n4", { state: "cordoned", gpus: gpus(4) }), // never, cordoned or not
  ], deployment([profile({ name: "p" })]));
  assertEquals(a.counts, { node_too_small: 2, insufficient_gpus: 2 });
  assertEquals(rejections(a).n1[0], "insufficient_gpus");
  assertEquals(rejections(a).n2[0], "insufficient_gpus");
  assertEquals(rejections(a).n4[0], "node_too_small");
});

Deno.test("node_too_small: a multi-node profile is judged per shard", () => {
  // 2 nodes × 4 GPUs fits 4-GPU nodes; TP 8 on one node does not.
  const l = (p: Partial<Parameters<typeof profile>[0]>) =>
    profile({ name: "p", gpu_class: "l40s-45g", ...p });
  const two = deployment([l({ nodes: 2, gpus_per_node: 4, tensor_parallel: 8 })]);
  const a = attemptOf([node("n1", { gpus: l40s(4) })], two);
  assertEquals(a.counts, { no_fabric: 1 });
});
