/**
 * Validation against the cluster's hardware (design §6.2): the warnings for
 * a profile no node could ever hold and for replicas that need more GPUs
 * than the whole cluster has (issue #23 item 5).
 */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { deployment, gpus, node, profile } from "../tests/cluster_builders.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Deployment } from "./schema.ts";
import { classFacts, validateDeployment } from "./validate.ts";

const l40s = (n: number) => gpus(n, { cls: "l40s-45g", cc: "8.9" });

function warnings(dep: Deployment, nodes: ClusterNode[]): [string, string][] {
  const r = validateDeployment(dep, { classes: classFacts(nodes) });
  assertEquals(r.errors, []);
  return r.warnings.map((w) => [w.path.join("."), w.message]);
}

function withReplicas(dep: Deployment, replicas: number): Deployment {
  return { ...dep, replicas };
}

Deno.test("classFacts: per class, the most GPUs on one node and the total", () => {
  const facts = classFacts([
    node("n1", { gpus: l40s(4) }),
    node("n2", { gpus: [...l40s(2), ...gpus(2, { first: 2 })] }),
    node("n3", { state: "cordoned", gpus: gpus(8) }),
  ]);
  assertEquals(
    facts.sizes,
    new Map([["l40s-45g", { most: 4, total: 6 }], ["h100-80g", { most: 8, total: 10 }]]),
  );
});

Deno.test("never fits: TP 8 on 4-GPU L40S nodes warns with what to change", () => {
  const tp8 = deployment([profile({ name: "tp8", gpu_class: "l40s-45g", gpus_per_node: 8 })]);
  assertEquals(warnings(tp8, [node("n1", { gpus: l40s(4) }), node("n2", { gpus: l40s(4) })]), [[
    "profiles.0.gpus_per_node",
    'profile "tp8": a shard needs 8 l40s-45g GPUs on one node, but no node has more than 4, so this profile can never be placed: use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel',
  ]]);
});

Deno.test("never fits: TP 16 on 8-GPU nodes", () => {
  const tp16 = deployment([profile({ name: "tp16", gpus_per_node: 16 })]);
  assertEquals(warnings(tp16, [node("n1"), node("n2")]), [[
    "profiles.0.gpus_per_node",
    'profile "tp16": a shard needs 16 h100-80g GPUs on one node, but no node has more than 8, so this profile can never be placed: use nodes: 2 (8 GPUs per node) or a smaller tensor_parallel',
  ]]);
  // Split over two nodes, it fits: no warning.
  const two = deployment([profile({ name: "2x8", nodes: 2, gpus_per_node: 8 })]);
  assertEquals(warnings(two, [node("n1"), node("n2")]), []);
});

Deno.test("more replicas than the cluster's GPUs can hold: warned on replicas", () => {
  const tp4 = deployment([profile({ name: "tp4", gpus_per_node: 4 })]);
  const nodes = [node("n1"), node("n2", { gpus: gpus(2) })]; // 10 h100s: two 4-GPU replicas
  assertEquals(warnings(withReplicas(tp4, 2), nodes), []);
  assertEquals(warnings(withReplicas(tp4, 3), nodes), [[
    "replicas",
    "3 replicas need 12 h100-80g GPUs (4 each), but the cluster has 10 in all: at most 2 can ever run",
  ]]);
});

Deno.test("more replicas than the cluster holds, over several classes and fallback profiles", () => {
  const dep = withReplicas(
    deployment([
      profile({ name: "h100", gpus_per_node: 8 }),
      profile({ name: "l40s", gpu_class: "l40s-45g", gpus_per_node: 4 }),
      profile({ name: "l40s-tp2", gpu_class: "l40s-45g", gpus_per_node: 2 }),
    ]),
    5,
  );
  const nodes = [node("n1"), node("n2", { gpus: l40s(4) })]; // 1 × 8 + 2 × 2
  assertEquals(warnings(withReplicas(dep, 3), nodes), []);
  assertEquals(warnings(dep, nodes), [[
    "replicas",
    "5 replicas need more GPUs than the cluster has: at most 3 can ever run (h100-80g: 8 GPUs in all, 8 per replica; l40s-45g: 4 GPUs in all, 2 per replica)",
  ]]);
});

Deno.test("a profile that can never be placed adds nothing to what the fleet can hold", () => {
  const dep = withReplicas(
    deployment([
      profile({ name: "tp16", gpus_per_node: 16 }),
      profile({ name: "tp8", gpus_per_node: 8 }),
    ]),
    2,
  );
  const got = warnings(dep, [node("n1")]);
  assertEquals(got.map(([path]) => path), ["profiles.0.gpus_per_node", "replicas"]);
  assertEquals(
    got[1][1],
    "2 replicas need 16 h100-80g GPUs (8 each), but the cluster has 8 in all: at most 1 can ever run",
  );
  // Nothing can be placed at all: said per profile, not again on replicas.
  const none = withReplicas(deployment([profile({ name: "tp16", gpus_per_node: 16 })]), 4);
  assertEquals(warnings(none, [node("n1")]).map(([path]) => path), ["profiles.0.gpus_per_node"]);
});

Deno.test("an absent class warns once, as before; without cluster facts nothing is said", () => {
  const dep = withReplicas(deployment([profile({ name: "b200", gpu_class: "b200-180g" })]), 9);
  assertEquals(warnings(dep, [node("n1")]), [[
    "profiles.0.gpu_class",
    'profile "b200": no node in the cluster has b200-180g GPUs',
  ]]);
  assertEquals(validateDeployment(dep).warnings, []);
});

Deno.test("a profile env that sets an engine's keep-alive under llmgw's clients' idle time is refused, naming the field", () => {
  const dep = (env: Record<string, string>) =>
    deployment([profile({ name: "p", env }), profile({ name: "q", engine: "sglang", env })]);
  const errors = (env: Record<string, string>) =>
    validateDeployment(dep(env)).errors.map((e) => [e.path.join("."), e.message]);
  assertEquals(errors({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "5", SGLANG_TIMEOUT_KEEP_ALIVE: "75" }), []);
  const low = errors({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "2" });
  assertEquals(low.map(([path]) => path), [
    "profiles.0.env.VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
    "profiles.1.env.VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
  ]);
  assertStringIncludes(low[0][1], 'profile "p": env VLLM_HTTP_TIMEOUT_KEEP_ALIVE is 2 s');
  assertStringIncludes(low[0][1], "at least 5");
  const bad = errors({ SGLANG_TIMEOUT_KEEP_ALIVE: "soon" });
  assertEquals(bad.length, 2);
  assertStringIncludes(
    bad[1][1],
    'profile "q": env SGLANG_TIMEOUT_KEEP_ALIVE must be a whole number',
  );
});
