/**
 * Table tests for placement (design §7): each reason code with its message, the
 * documented choice orders, NVLink domains, profile fallback and fabrics.
 * tests/placement_property_test.ts covers the cases nobody thought of.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import {
  alloc,
  deployment,
  fabric,
  gpu,
  gpus,
  node,
  profile,
  withDomains,
} from "../tests/cluster_builders.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import type { Deployment } from "../deployment/schema.ts";
import {
  applyPlacement,
  explanationLines,
  indexCluster,
  place,
  type Placed,
  type PlacementResult,
  placeReplica,
  type ProfileAttempt,
  type Unschedulable,
} from "./mod.ts";

function placed(r: PlacementResult): Placed {
  assertOk(r.status === "placed", `expected a placement, got: ${r.explanation.summary}`);
  return r;
}

function unschedulable(r: PlacementResult): Unschedulable {
  assertOk(r.status === "unschedulable", `expected unschedulable, got ${JSON.stringify(r)}`);
  return r;
}

/** node → [reason, message] of an attempt's detail. */
function rejections(a: ProfileAttempt): Record<string, [string, string]> {
  return Object.fromEntries((a.nodes ?? []).map((r) => [r.node, [r.reason, r.message]]));
}

/** The only attempt of a one-profile deployment that did not fit. */
function onlyAttempt(nodes: ClusterNode[], dep: Deployment): ProfileAttempt {
  const r = unschedulable(placeReplica(nodes, dep, "r-1", { detail: "full" }));
  assertEquals(r.explanation.profiles.length, 1);
  return r.explanation.profiles[0];
}

const h100x8 = profile({ name: "h100x8" });

// ---------------------------------------------------------------------------
// Reason codes

Deno.test("no_gpu_class: nodes without the class say what they have", () => {
  const a = onlyAttempt([
    node("n1", { gpus: gpus(8, { cls: "a100-80g" }) }),
    node("n2", { gpus: [] }),
    node("n3", { gpus: [...gpus(2, { cls: "l40s-45g" }), gpu(2, { cls: null })] }),
  ], deployment([h100x8]));
  assertEquals(a.counts, { no_gpu_class: 3 });
  assertEquals(a.summary, "0/3 nodes fit: 3 no h100-80g GPUs");
  assertEquals(rejections(a), {
    n1: ["no_gpu_class", "no h100-80g GPUs (node has a100-80g×8)"],
    n2: ["no_gpu_class", "no h100-80g GPUs (node has no GPUs)"],
    n3: ["no_gpu_class", "no h100-80g GPUs (node has l40s-45g×2)"],
  });
});

Deno.test("node states: each non-ready state has its own reason", () => {
  const a = onlyAttempt([
    node("n1", { state: "cordoned" }),
    node("n2", { state: "draining" }),
    node("n3", { state: "unreachable" }),
    node("n4", { state: "lost" }),
  ], deployment([h100x8]));
  assertEquals(a.counts, {
    node_cordoned: 1,
    node_draining: 1,
    node_unreachable: 1,
    node_lost: 1,
  });
  assertEquals(a.summary, "0/4 nodes fit: 1 cordoned, 1 draining, 1 unreachable, 1 lost");
  assertEquals(rejections(a), {
    n1: ["node_cordoned", "node is cordoned"],
    n2: ["node_draining", "node is draining"],
    n3: ["node_unreachable", "node is unreachable"],
    n4: ["node_lost", "node is lost"],
  });
});

Deno.test("selector_mismatch: a different value and a missing label", () => {
  const p = profile({ name: "p", node_selector: { zone: "a" } });
  const a = onlyAttempt([
    node("n1", { labels: { zone: "b" } }),
    node("n2", { labels: { rack: "r1" } }),
  ], deployment([p]));
  assertEquals(a.counts, { selector_mismatch: 2 });
  assertEquals(a.summary, "0/2 nodes fit: 2 not matching the node selector");
  assertEquals(rejections(a), {
    n1: ["selector_mismatch", "label zone=a required, node has zone=b"],
    n2: ["selector_mismatch", "label zone=a required, node has no zone label"],
  });
  const r = placed(
    placeReplica([node("n1", { labels: { zone: "a", rack: "r1" } })], deployment([p]), "r-1"),
  );
  assertEquals(r.shards[0].node, "n1");
});

Deno.test("compute_capability: fp8 refused on A100 (8.0) and on unknown capability", () => {
  const fp8 = (cls: string) => profile({ name: "p", gpu_class: cls, quantization: "fp8" });
  const a100 = onlyAttempt(
    [node("n1", { gpus: gpus(8, { cls: "a100-80g" }) })],
    deployment([fp8("a100-80g")]),
  );
  assertEquals(a100.counts, { compute_capability: 1 });
  assertEquals(a100.summary, "0/1 nodes fit: 1 compute capability too low for fp8");
  assertEquals(rejections(a100), {
    n1: ["compute_capability", "fp8 needs compute capability ≥ 8.9; a100-80g GPUs here report 8.0"],
  });
  // One H100 with an unknown capability makes the whole class on that node unfit for fp8.
  const mixed = [...gpus(7), gpu(7, { cc: null })];
  const unknown = onlyAttempt([node("n1", { gpus: mixed })], deployment([fp8("h100-80g")]));
  assertEquals(rejections(unknown), {
    n1: [
      "compute_capability",
      "fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report 9.0, unknown",
    ],
  });
  // Without fp8 the same nodes are fine.
  placed(placeReplica([node("n1", { gpus: mixed })], deployment([h100x8]), "r-1"));
});

Deno.test("compute_capability: 8.9 (L40S) and 9.0 (H100) are enough for fp8", () => {
  for (const cls of ["l40s-45g", "h100-80g"]) {
    const p = profile({ name: "p", gpu_class: cls, quantization: "fp8", gpus_per_node: 4 });
    const r = placed(
      placeReplica([node("n1", { gpus: gpus(4, { cls }) })], deployment([p]), "r-1"),
    );
    assertEquals(r.shards[0].gpu_indices, [0, 1, 2, 3]);
  }
});

Deno.test("insufficient_gpus: the message counts free, allocated and unhealthy GPUs", () => {
  const list = gpus(8);
  list[3] = gpu(3, { problems: ["uncorrected ECC errors: 3"] });
  const a = onlyAttempt([
    node("n1", { gpus: list, allocations: [alloc("old", [0, 1], "other")] }),
  ], deployment([h100x8]));
  assertEquals(a.counts, { insufficient_gpus: 1 });
  assertEquals(a.summary, "0/1 nodes fit: 1 insufficient free h100-80g GPUs");
  assertEquals(rejections(a), {
    n1: [
      "insufficient_gpus",
      "needs 8 free h100-80g GPUs, has 5 free, 2 allocated, 1 unhealthy (GPU 3: uncorrected ECC errors: 3) of 8",
    ],
  });
});

Deno.test("GPUs of other classes do not count", () => {
  const list = [...gpus(4), ...gpus(4, { first: 4, cls: "a100-80g" })];
  const a = onlyAttempt([node("n1", { gpus: list })], deployment([h100x8]));
  assertEquals(rejections(a), {
    n1: [
      "node_too_small",
      "node has only 4 h100-80g GPUs; a shard needs 8 on one node, so this profile can never fit: use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel",
    ],
  });
});

Deno.test("no_fabric and fabric_too_small for a multi-node profile", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 8 });
  const a = onlyAttempt([
    node("n1"),
    node("n2", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n3", { state: "cordoned", fabrics: [fabric("ib-a", ["mlx5_0"])] }),
  ], deployment([p]));
  assertEquals(a.counts, { node_cordoned: 1, no_fabric: 1, fabric_too_small: 1 });
  assertEquals(
    a.summary,
    "0/3 nodes fit: 1 cordoned, 1 on no fabric, 1 on fabrics with too few eligible nodes",
  );
  assertEquals(rejections(a), {
    n1: ["no_fabric", "a 2-node replica needs nodes on a fabric; this node is on none"],
    n2: ["fabric_too_small", "needs 2 eligible nodes on one fabric: ib-a has 1"],
    n3: ["node_cordoned", "node is cordoned"],
  });
});

Deno.test("a node is reported under the first filter that rejects it", () => {
  const six = alloc("old", [0, 1, 2, 3, 4, 5]);
  const p = profile({ name: "p", quantization: "fp8", node_selector: { zone: "a" } });
  const a = onlyAttempt([
    node("n1", { state: "cordoned", gpus: gpus(8, { cls: "a100-80g" }) }), // class first
    node("n2", { state: "draining", labels: { zone: "b" } }), // state before selector
    node("n3", { labels: { zone: "b" }, gpus: gpus(8, { cc: "8.0" }) }), // selector before cc
    node("n4", { labels: { zone: "a" }, gpus: gpus(8, { cc: "8.0" }), allocations: [six] }), // cc before count
    node("n5", { state: "cordoned", gpus: gpus(4) }), // size before state
    node("n6", { labels: { zone: "a" }, engine_versions: { sglang: "0.5.3" } }), // engine before count
  ], deployment([p]));
  assertEquals(a.counts, {
    no_gpu_class: 1,
    node_too_small: 1,
    node_draining: 1,
    selector_mismatch: 1,
    compute_capability: 1,
    engine_missing: 1,
  });
  assertEquals(Object.keys(a.counts), [
    "no_gpu_class",
    "node_too_small",
    "node_draining",
    "selector_mismatch",
    "compute_capability",
    "engine_missing",
  ]);
});

/** A node with 2 free of its 8 h100-80g GPUs. */
const twoFree = () => node("n2", { allocations: [alloc("old", [0, 1, 2, 3, 4, 5])] });

Deno.test("detail is optional; without it the counts and summary are the same", () => {
  const nodes = [node("n1", { state: "cordoned" }), twoFree()];
  const withDetail = onlyAttempt(nodes, deployment([h100x8]));
  const plain = unschedulable(placeReplica(nodes, deployment([h100x8]), "r-1"));
  assertEquals(plain.explanation.profiles[0].nodes, undefined);
  assertEquals(plain.explanation.profiles[0].counts, withDetail.counts);
  assertEquals(plain.explanation.profiles[0].summary, withDetail.summary);
  assertEquals(
    plain.explanation.summary,
    'no profile fits: profile "h100x8": 0/2 nodes fit: 1 cordoned, 1 insufficient free h100-80g GPUs',
  );
});

// ---------------------------------------------------------------------------
// Which node: bin packing, ties, emptiest first, spread

Deno.test("bin packing: a partly used node is chosen before an empty one", () => {
  const p = profile({ name: "p", gpus_per_node: 2 });
  const nodes = [
    node("n1"),
    node("n2", { allocations: [alloc("old", [0, 1, 2, 3], "other")] }),
    node("n3", { allocations: [alloc("old", [0, 1, 2, 3, 4, 5, 6], "other")] }), // 1 free: too few
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.gpu_indices]), [["n2", [4, 5]]]);
  assertEquals(r.explanation.summary, 'placed with profile "p": fits on n2 (of 3 nodes)');
});

Deno.test("bin packing: ties break on node id in natural order (n2 before n10)", () => {
  const p = profile({ name: "p", gpus_per_node: 4 });
  const nodes = [node("n10"), node("n11"), node("n2"), node("n20")];
  assertEquals(placed(placeReplica(nodes, deployment([p]), "r-1")).shards[0].node, "n2");
  assertEquals(
    placed(placeReplica([node("node-10"), node("node-9")], deployment([p]), "r-1")).shards[0].node,
    "node-9",
  );
});

Deno.test("multi-node: the emptiest nodes of the fabric, ranks in node order", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 4 });
  const ib = (hca: string) => [fabric("ib-a", [hca])];
  const nodes = [
    node("n1", { fabrics: ib("mlx5_0"), allocations: [alloc("o", [0, 1, 2, 3], "other")] }),
    node("n2", { fabrics: ib("mlx5_0") }),
    node("n3", { fabrics: ib("mlx5_1"), allocations: [alloc("o", [0, 1], "other")] }),
    node("n10", { fabrics: ib("mlx5_2") }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(
    r.shards.map((s) => [s.rank, s.shard_id, s.node, s.gpu_indices, s.fabric, s.hcas]),
    [
      [0, "r-1/0", "n2", [0, 1, 2, 3], "ib-a", ["mlx5_0"]],
      [1, "r-1/1", "n10", [0, 1, 2, 3], "ib-a", ["mlx5_2"]],
    ],
  );
  assertEquals(
    r.explanation.summary,
    'placed with profile "p": fits on n2, n10 over fabric ib-a (of 4 nodes)',
  );
});

Deno.test("multi-node, equal bandwidth: the fabric whose nodes are emptiest wins, then the name", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 4 });
  const used = [alloc("o", [0, 1], "other")];
  const nodes = [
    node("n1", { fabrics: [fabric("ib-a", ["mlx5_0"])], allocations: used }),
    node("n2", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n3", { fabrics: [fabric("ib-b", ["mlx5_0"])] }),
    node("n4", { fabrics: [fabric("ib-b", ["mlx5_0"])] }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.fabric]), [["n3", "ib-b"], ["n4", "ib-b"]]);
  const tie = nodes.map((n) => ({ ...n, allocations: [] }));
  const t = placed(placeReplica(tie, deployment([p]), "r-1"));
  assertEquals(t.shards.map((s) => [s.node, s.fabric]), [["n1", "ib-a"], ["n2", "ib-a"]]);
});

Deno.test("spread prefers nodes without the deployment; pack does not", () => {
  const p = profile({ name: "p", gpus_per_node: 2 });
  const nodes = [
    node("n1", { allocations: [alloc("old", [0, 1], "dep")] }), // partly used, by dep
    node("n2"),
  ];
  assertEquals(
    placed(placeReplica(nodes, deployment([p], { placement: "pack" }), "r-1")).shards[0].node,
    "n1",
  );
  assertEquals(
    placed(placeReplica(nodes, deployment([p], { placement: "spread" }), "r-1")).shards[0].node,
    "n2",
  );
  // Another deployment's allocation does not count as "this deployment is here".
  const other = [node("n1", { allocations: [alloc("old", [0, 1], "other")] }), node("n2")];
  assertEquals(
    placed(placeReplica(other, deployment([p], { placement: "spread" }), "r-1")).shards[0].node,
    "n1",
  );
  // When every node holds the deployment, spread still places (packing among them).
  const all = [
    node("n1", { allocations: [alloc("a", [0], "dep")] }),
    node("n2", { allocations: [alloc("b", [0, 1, 2], "dep")] }),
  ];
  assertEquals(
    placed(placeReplica(all, deployment([p], { placement: "spread" }), "r-1")).shards[0].node,
    "n2",
  );
});

Deno.test("spread across a sequence: replicas land on distinct nodes while they can", () => {
  const p = profile({ name: "p", gpus_per_node: 2 });
  const dep = deployment([p], { placement: "spread" });
  const index = indexCluster([node("n1"), node("n2"), node("n3")]);
  const seen: string[] = [];
  for (let i = 1; i <= 4; i++) {
    const r = placed(place(index, dep, `r-${i}`));
    seen.push(r.shards[0].node);
    applyPlacement(index, dep.name, r.shards);
  }
  assertEquals(seen.slice(0, 3).sort(), ["n1", "n2", "n3"]);
  // the same sequence with pack fills one node first
  const packIndex = indexCluster([node("n1"), node("n2"), node("n3")]);
  const packed: string[] = [];
  for (let i = 1; i <= 4; i++) {
    const r = placed(place(packIndex, deployment([p]), `r-${i}`));
    packed.push(r.shards[0].node);
    applyPlacement(packIndex, "dep", r.shards);
  }
  assertEquals(packed, ["n1", "n1", "n1", "n1"]);
});

Deno.test("spread for multi-node prefers fabric nodes without the deployment", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 2 });
  const ib = [fabric("ib-a", ["mlx5_0"])];
  const nodes = [
    node("n1", { fabrics: ib }),
    node("n2", { fabrics: ib, allocations: [alloc("old", [0], "dep")] }),
    node("n3", { fabrics: ib, allocations: [alloc("old2", [0, 1, 2], "other")] }),
  ];
  const spread = placed(placeReplica(nodes, deployment([p], { placement: "spread" }), "r-1"));
  assertEquals(spread.shards.map((s) => s.node), ["n1", "n3"]);
  const pack = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(pack.shards.map((s) => s.node), ["n1", "n2"]);
});

// ---------------------------------------------------------------------------
// GPUs inside a node: NVLink domains

Deno.test("NVLink: the smallest domain that fits is used, big domains stay whole", () => {
  // pair {0,1}, quad {2,3,4,5}, pair {6,7}
  const list = withDomains(gpus(8), [[0, 1], [2, 3, 4, 5], [6, 7]]);
  const on = (gpn: number, nodes = [node("n1", { gpus: list })]) =>
    placed(placeReplica(nodes, deployment([profile({ name: "p", gpus_per_node: gpn })]), "r-1"))
      .shards[0].gpu_indices;
  assertEquals(on(2), [0, 1]);
  assertEquals(on(4), [2, 3, 4, 5]);
  assertEquals(on(1), [0]);
  // quad {0..3} whole, quad {4..7} with 4 taken: two GPUs come from the broken quad
  const quads = withDomains(gpus(8), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  const broken = [node("n1", { gpus: quads, allocations: [alloc("o", [4], "other")] })];
  assertEquals(on(2, broken), [5, 6]);
  assertEquals(on(3, broken), [5, 6, 7]);
  assertEquals(on(4, broken), [0, 1, 2, 3]);
});

Deno.test("NVLink: lowest free indices when topology is unknown or fragmented", () => {
  const p = profile({ name: "p", gpus_per_node: 2 });
  // unknown topology: no GPU lists peers
  const flat = [node("n1", { gpus: gpus(8), allocations: [alloc("o", [0, 2], "other")] })];
  assertEquals(placed(placeReplica(flat, deployment([p]), "r-1")).shards[0].gpu_indices, [1, 3]);
  // fragmented: every pair has one GPU taken, so no domain has 2 free
  const pairs = withDomains(gpus(8), [[0, 1], [2, 3], [4, 5], [6, 7]]);
  const frag = [node("n1", { gpus: pairs, allocations: [alloc("o", [0, 2, 4, 6], "other")] })];
  assertEquals(placed(placeReplica(frag, deployment([p]), "r-1")).shards[0].gpu_indices, [1, 3]);
  // unhealthy GPUs fragment domains too
  const sick = withDomains(gpus(4), [[0, 1], [2, 3]]);
  sick[1].health.problems = ["uncorrected ECC errors: 1"];
  sick[2].health.problems = ["held by a foreign process"];
  const r = placed(placeReplica([node("n1", { gpus: sick })], deployment([p]), "r-1"));
  assertEquals(r.shards[0].gpu_indices, [0, 3]);
});

Deno.test("NVLink: a domain of another class does not count", () => {
  // GPUs 0-3 a100 all linked, 4-7 h100 in pairs; the h100 profile sees only the h100 pairs
  const list = withDomains(
    [...gpus(4, { cls: "a100-80g" }), ...gpus(4, { first: 4 })],
    [[0, 1, 2, 3], [4, 5], [6, 7]],
  );
  const p = profile({ name: "p", gpus_per_node: 2 });
  const r = placed(placeReplica([node("n1", { gpus: list })], deployment([p]), "r-1"));
  assertEquals([r.shards[0].gpu_class, r.shards[0].gpu_indices], ["h100-80g", [4, 5]]);
});

// ---------------------------------------------------------------------------
// Profiles and fabrics

Deno.test("fallback: a lower profile is used and the summary says why the higher did not fit", () => {
  const dep = deployment([
    profile({ name: "h100-tp8", quantization: "fp8" }),
    profile({ name: "a100-2x8", gpu_class: "a100-80g", nodes: 2, gpus_per_node: 8 }),
    profile({ name: "a100-tp8", gpu_class: "a100-80g" }),
  ]);
  const nodes = [
    node("n1", { gpus: gpus(8, { cls: "a100-80g" }) }),
    node("n2", { gpus: gpus(8, { cc: "8.0" }) }), // odd H100s reporting 8.0
  ];
  const r = placed(placeReplica(nodes, dep, "r-1", { detail: "full" }));
  assertEquals(r.profile, "a100-tp8");
  assertEquals(r.shards.map((s) => [s.node, s.gpu_class]), [["n1", "a100-80g"]]);
  assertEquals(r.explanation.profiles.map((a) => [a.profile, a.fits]), [
    ["h100-tp8", false],
    ["a100-2x8", false],
    ["a100-tp8", true],
  ]);
  assertEquals(
    r.explanation.summary,
    'placed with profile "a100-tp8" (choice 3 of 3): fits on n1 (of 2 nodes); ' +
      'profile "h100-tp8": 0/2 nodes fit: 1 no h100-80g GPUs, 1 compute capability too low for fp8; ' +
      'profile "a100-2x8": 0/2 nodes fit: 1 no a100-80g GPUs, 1 on no fabric',
  );
  // Grouped lines by default, one line per node with detail.
  assertStringIncludes(
    explanationLines(r.explanation).join("\n"),
    "    1 node: compute_capability — fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report 8.0 (n2)",
  );
  assertStringIncludes(
    explanationLines(r.explanation, { detail: true }).join("\n"),
    "    n2: compute_capability: fp8 needs compute capability",
  );
});

Deno.test("the first profile that fits wins even when a later one would pack better", () => {
  const dep = deployment([
    profile({ name: "big", gpus_per_node: 8 }),
    profile({ name: "small", gpus_per_node: 1 }),
  ]);
  const r = placed(placeReplica([node("n1")], dep, "r-1"));
  assertEquals(r.profile, "big");
  assertEquals(r.explanation.profiles.length, 1);
  assertEquals(r.explanation.summary, 'placed with profile "big": fits on n1 (of 1 nodes)');
});

Deno.test("two fabrics, neither big enough alone: unschedulable with fabric_too_small", () => {
  const p = profile({
    name: "p",
    nodes: 3,
    gpus_per_node: 8,
    tensor_parallel: 8,
    pipeline_parallel: 3,
  });
  const nodes = [
    node("n1", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n2", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n3", { fabrics: [fabric("ib-b", ["mlx5_1"])] }),
    node("n4", { fabrics: [fabric("ib-b", ["mlx5_1"])] }),
  ];
  const a = onlyAttempt(nodes, deployment([p]));
  assertEquals(a.counts, { fabric_too_small: 4 });
  assertEquals(a.summary, "0/4 nodes fit: 4 on fabrics with too few eligible nodes");
  assertEquals(rejections(a).n1, [
    "fabric_too_small",
    "needs 3 eligible nodes on one fabric: ib-a has 2",
  ]);
  assertEquals(rejections(a).n4, [
    "fabric_too_small",
    "needs 3 eligible nodes on one fabric: ib-b has 2",
  ]);
  // Only eligible nodes count towards a fabric's size.
  const withCordoned = [
    ...nodes,
    node("n5", { state: "cordoned", fabrics: [fabric("ib-a", ["mlx5_0"])] }),
  ];
  const b = onlyAttempt(withCordoned, deployment([p]));
  assertEquals(b.counts, { node_cordoned: 1, fabric_too_small: 4 });
  // One more ready node on ib-a makes it fit, on ib-a only.
  const grown = [...nodes, node("n5", { fabrics: [fabric("ib-a", ["mlx5_0"])] })];
  const r = placed(placeReplica(grown, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.fabric]), [["n1", "ib-a"], ["n2", "ib-a"], [
    "n5",
    "ib-a",
  ]]);
});

Deno.test("nodes on two fabrics: each shard gets only the chosen fabric's HCAs", () => {
  const both = () => [fabric("ib-a", ["mlx5_0", "mlx5_1"]), fabric("roce-c", ["mlx5_2"], 200)];
  const nodes = [
    node("n1", { fabrics: both() }),
    node("n2", { fabrics: both() }),
    node("n3", { fabrics: [fabric("roce-c", ["mlx5_3"], 100)] }),
  ];
  // 2 nodes: both fabrics can; ib-a's 2 × 400 Gb/s beats roce-c's 1 × 200 Gb/s
  const two = placed(placeReplica(nodes, deployment([profile({ name: "p", nodes: 2 })]), "r-1"));
  assertEquals(two.shards.map((s) => [s.node, s.fabric, s.hcas, s.hca_ports.map((p) => p.hca)]), [
    ["n1", "ib-a", ["mlx5_0", "mlx5_1"], ["mlx5_0", "mlx5_1"]],
    ["n2", "ib-a", ["mlx5_0", "mlx5_1"], ["mlx5_0", "mlx5_1"]],
  ]);
  // 3 nodes: only roce-c has three; n1 and n2 get mlx5_2 only, n3 its own mlx5_3
  const three = placed(placeReplica(nodes, deployment([profile({ name: "p", nodes: 3 })]), "r-1"));
  assertEquals(three.shards.map((s) => [s.node, s.fabric, s.hcas]), [
    ["n1", "roce-c", ["mlx5_2"]],
    ["n2", "roce-c", ["mlx5_2"]],
    ["n3", "roce-c", ["mlx5_3"]],
  ]);
  assertEquals(three.shards[0].hca_ports, [{
    hca: "mlx5_2",
    port: 1,
    link_layer: "roce",
    rate_gbps: 200,
    roce_v2_gid_index: 3,
  }]);
  // single-node replicas carry no fabric at all
  const one = placed(placeReplica(nodes, deployment([h100x8]), "r-1"));
  assertEquals([one.shards[0].fabric, one.shards[0].hcas, one.shards[0].hca_ports], [null, [], []]);
});

Deno.test("placement is deterministic and does not change its input", () => {
  const nodes = [
    node("n3", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n1", { fabrics: [fabric("ib-a", ["mlx5_0"])], allocations: [alloc("o", [7], "dep")] }),
    node("n2", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
  ];
  const before = structuredClone(nodes);
  const dep = deployment([profile({ name: "p", nodes: 2, gpus_per_node: 4 })]);
  const r = placeReplica(nodes, dep, "r-1", { detail: "full" });
  assertEquals(nodes, before);
  assertEquals(placeReplica([...nodes].reverse(), dep, "r-1", { detail: "full" }), r);
  assertEquals(placed(r).shards.map((s) => s.node), ["n2", "n3"]);
});

Deno.test("a fabric listed twice on a node never yields two shards on that node", () => {
  const nodes = [
    node("n1", { fabrics: [fabric("ib-a", ["mlx5_0"]), fabric("ib-a", ["mlx5_1"])] }),
  ];
  const r = placeReplica(
    nodes,
    deployment([profile({ name: "p", nodes: 2, gpus_per_node: 4 })]),
    "r-1",
  );
  assertEquals(r.status, "unschedulable");
  assertEquals(r.explanation.profiles[0].counts, { fabric_too_small: 1 });
});

// ---------------------------------------------------------------------------
// Fabric choice by bandwidth (design §5.2: a collective runs at its slowest link)

/** `count` adapter names from mlx5_<first>. */
function hcaNames(first: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `mlx5_${first + i}`);
}

Deno.test("fabric by bandwidth: a 2-node replica lands on the fast fabric, not the emptier one", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 4 });
  const used = [alloc("o", [0, 1], "other")];
  const nodes = [
    // first by name and emptier, but 1 × 100 Gb/s
    node("n1", { fabrics: [fabric("a-slow", ["mlx5_0"], 100)] }),
    node("n2", { fabrics: [fabric("a-slow", ["mlx5_0"], 100)] }),
    node("n3", { fabrics: [fabric("b-fast", ["mlx5_0"], 400)], allocations: used }),
    node("n4", { fabrics: [fabric("b-fast", ["mlx5_0"], 400)], allocations: used }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.fabric]), [["n3", "b-fast"], ["n4", "b-fast"]]);
  assertEquals(
    r.explanation.summary,
    'placed with profile "p": fits on n3, n4 over fabric b-fast (of 4 nodes); ' +
      "fabric a-slow passed over: 1 × 100 Gb/s = 100 Gb/s per node < b-fast 1 × 400 Gb/s = 400 Gb/s",
  );
  assertEquals(r.explanation.profiles[0].fabrics, [
    {
      fabric: "b-fast",
      eligible_nodes: 2,
      chosen: true,
      bandwidth: { per_node_gbps: 400, node: "n3", hcas: 1, rate_gbps: 400 },
      free_gpus: 12,
      why: "1 × 400 Gb/s = 400 Gb/s per node, 12 free h100-80g GPUs on its nodes",
    },
    {
      fabric: "a-slow",
      eligible_nodes: 2,
      chosen: false,
      bandwidth: { per_node_gbps: 100, node: "n1", hcas: 1, rate_gbps: 100 },
      free_gpus: 16,
      why: "1 × 100 Gb/s = 100 Gb/s per node < b-fast 1 × 400 Gb/s = 400 Gb/s",
    },
  ]);
});

Deno.test("fabric by bandwidth: TP16 over front-end Ethernet, IB and RoCE goes to IB (issue #12)", () => {
  const tp16 = profile({ name: "tp16", nodes: 2, gpus_per_node: 8, tensor_parallel: 16 });
  const fe = (first: number) => fabric("eth-fe", hcaNames(first, 4), 100);
  const nodes = [
    node("n1", { fabrics: [fe(8), fabric("ib-a", hcaNames(0, 8), 400)] }),
    node("n2", { fabrics: [fe(8), fabric("ib-a", hcaNames(0, 8), 400)] }),
    node("n3", { fabrics: [fe(6), fabric("roce-b", hcaNames(0, 6), 400)] }),
    node("n4", { fabrics: [fe(6), fabric("roce-b", hcaNames(0, 6), 400)] }),
    node("n5", { fabrics: [fe(0)] }),
    node("n6", { fabrics: [fe(0)] }),
  ];
  const r = placed(placeReplica(nodes, deployment([tp16]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.fabric, s.hcas.length]), [
    ["n1", "ib-a", 8],
    ["n2", "ib-a", 8],
  ]);
  assertEquals(
    r.explanation.summary,
    'placed with profile "tp16": fits on n1, n2 over fabric ib-a (of 6 nodes); ' +
      "fabric roce-b passed over: 6 × 400 Gb/s = 2,400 Gb/s per node < ib-a 8 × 400 Gb/s = 3,200 Gb/s; " +
      "fabric eth-fe passed over: 4 × 100 Gb/s = 400 Gb/s per node < ib-a 8 × 400 Gb/s = 3,200 Gb/s",
  );
  assertEquals(
    r.explanation.profiles[0].fabrics?.map((f) => [f.fabric, f.chosen, f.bandwidth?.per_node_gbps]),
    [["ib-a", true, 3200], ["roce-b", false, 2400], ["eth-fe", false, 400]],
  );
});

Deno.test("fabric by bandwidth: a fabric's figure is its slowest chosen node's", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 8 });
  const nodes = [
    node("n1", { fabrics: [fabric("ib-a", hcaNames(0, 4), 400)] }), // 1,600 Gb/s
    node("n2", { fabrics: [fabric("ib-a", hcaNames(0, 1), 400)] }), // 400 Gb/s: ib-a's figure
    node("n3", { fabrics: [fabric("ib-b", hcaNames(0, 2), 400)] }), // 800 Gb/s
    node("n4", { fabrics: [fabric("ib-b", hcaNames(0, 2), 400)] }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => s.fabric), ["ib-b", "ib-b"]);
  const ibA = r.explanation.profiles[0].fabrics?.find((f) => f.fabric === "ib-a");
  assertEquals(ibA?.bandwidth, { per_node_gbps: 400, node: "n2", hcas: 1, rate_gbps: 400 });
  assertEquals(ibA?.why, "1 × 400 Gb/s = 400 Gb/s per node < ib-b 2 × 400 Gb/s = 800 Gb/s");
});

Deno.test("fabric by bandwidth: unknown rates rank last; too-small fabrics are named", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 8 });
  const unknown = { ...fabric("a-unknown", ["mlx5_0", "mlx5_1"]), rate_gbps: null };
  const nodes = [
    node("n1", { fabrics: [unknown] }),
    node("n2", { fabrics: [unknown] }),
    node("n3", { fabrics: [fabric("b-known", ["mlx5_0"], 100)] }),
    node("n4", { fabrics: [fabric("b-known", ["mlx5_0"], 100)] }),
    node("n5", { fabrics: [fabric("c-alone", hcaNames(0, 8), 400)] }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => s.fabric), ["b-known", "b-known"]);
  assertEquals(
    r.explanation.summary,
    'placed with profile "p": fits on n3, n4 over fabric b-known (of 5 nodes); ' +
      "fabric a-unknown passed over: unknown bandwidth (node n1 reports no port rate) per node " +
      "< b-known 1 × 100 Gb/s = 100 Gb/s; fabric c-alone passed over: only 1 eligible node, needs 2",
  );
  // Unschedulable: each fabric says how many eligible nodes it has.
  const three = profile({ name: "p", nodes: 3, gpus_per_node: 8, pipeline_parallel: 3 });
  const u = unschedulable(placeReplica(nodes, deployment([three]), "r-1"));
  assertEquals(u.explanation.profiles[0].fabrics?.map((f) => [f.fabric, f.chosen, f.why]), [
    ["a-unknown", false, "only 2 eligible nodes, needs 3"],
    ["b-known", false, "only 2 eligible nodes, needs 3"],
    ["c-alone", false, "only 1 eligible node, needs 3"],
  ]);
});

Deno.test("fabric by bandwidth: equal bandwidth and free GPUs fall back to the name, and say so", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 4 });
  const used = [alloc("o", [0], "other")];
  const nodes = [
    node("n1", { fabrics: [fabric("ib-b", ["mlx5_0"])] }),
    node("n2", { fabrics: [fabric("ib-b", ["mlx5_0"])] }),
    node("n3", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n4", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n5", { fabrics: [fabric("ib-c", ["mlx5_0"])], allocations: used }),
    node("n6", { fabrics: [fabric("ib-c", ["mlx5_0"])] }),
  ];
  const r = placed(placeReplica(nodes, deployment([p]), "r-1"));
  assertEquals(r.shards.map((s) => [s.node, s.fabric]), [["n3", "ib-a"], ["n4", "ib-a"]]);
  assertEquals(
    r.explanation.profiles[0].fabrics?.map((f) => [f.fabric, f.why]),
    [
      ["ib-a", "1 × 400 Gb/s = 400 Gb/s per node, 16 free h100-80g GPUs on its nodes"],
      [
        "ib-b",
        "same 400 Gb/s per node as ib-a, as many free GPUs (16), and ib-a comes first by name",
      ],
      [
        "ib-c",
        "same 400 Gb/s per node as ib-a, but 15 free h100-80g GPUs on the nodes it would use < 16",
      ],
    ],
  );
});

// ---------------------------------------------------------------------------
// Grouped explanations (design §1.2 at scale)

Deno.test("detail levels: false, grouped, full", () => {
  const nodes = [node("n1", { state: "cordoned" }), twoFree()];
  const dep = deployment([h100x8]);
  const at = (detail: false | "grouped" | "full") =>
    unschedulable(placeReplica(nodes, dep, "r-1", { detail })).explanation.profiles[0];
  assertEquals([at(false).groups, at(false).nodes], [undefined, undefined]);
  assertEquals(at("grouped").nodes, undefined);
  assertEquals(at("grouped").groups, [
    { reason: "node_cordoned", count: 1, message: "cordoned", examples: ["n1"] },
    {
      reason: "insufficient_gpus",
      count: 1,
      message: "needs 8 free h100-80g GPUs, has 2 free; 1 with GPUs allocated",
      examples: ["n2"],
    },
  ]);
  assertEquals(at("full").groups, at("grouped").groups);
  assertEquals(at("full").nodes?.map((r) => r.node), ["n1", "n2"]);
});

Deno.test("groups: one per reason, with what the nodes have in common", () => {
  const p = profile({ name: "p", quantization: "fp8", node_selector: { zone: "a" } });
  const sick = gpus(8);
  sick[5] = gpu(5, { problems: ["uncorrected ECC errors: 1"] });
  const nodes = [
    node("n1", { gpus: gpus(8, { cls: "a100-80g" }) }),
    node("n2", { gpus: [] }),
    node("n3", { gpus: gpus(4, { cls: "l40s-45g" }) }),
    node("n4", { state: "draining" }),
    node("n5", { labels: { zone: "b" } }),
    node("n6", { labels: { zone: "b" } }),
    node("n7", {}),
    node("n8", { labels: { zone: "a" }, gpus: gpus(8, { cc: "8.0" }) }),
    node("n9", { labels: { zone: "a" }, gpus: [...gpus(7), gpu(7, { cc: null })] }),
    node("n10", { labels: { zone: "a" }, allocations: [alloc("o", [0, 1, 2, 3], "other")] }),
    node("n11", { labels: { zone: "a" }, gpus: sick, allocations: [alloc("o", [0], "other")] }),
  ];
  const a = unschedulable(placeReplica(nodes, deployment([p]), "r-1", { detail: "grouped" }))
    .explanation.profiles[0];
  assertEquals(a.groups, [
    {
      reason: "no_gpu_class",
      count: 3,
      message: "no h100-80g GPUs (they have a100-80g, l40s-45g; 1 has no GPUs)",
      examples: ["n1", "n2", "n3"],
    },
    { reason: "node_draining", count: 1, message: "draining", examples: ["n4"] },
    {
      reason: "selector_mismatch",
      count: 3,
      message: "label zone=a required; they have zone=b (2), no zone label (1)",
      examples: ["n5", "n6", "n7"],
    },
    {
      reason: "compute_capability",
      count: 2,
      message: "fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report 8.0, 9.0, unknown",
      examples: ["n8", "n9"],
    },
    {
      reason: "insufficient_gpus",
      count: 2,
      message:
        "needs 8 free h100-80g GPUs, has 4–6 free; 2 with GPUs allocated, 1 with unhealthy GPUs",
      examples: ["n10", "n11"],
    },
  ]);
  for (const g of a.groups!) assertEquals(g.count, a.counts[g.reason]);
});

Deno.test("groups: thousands of nodes make one line each, with separators", () => {
  const nodes = Array.from(
    { length: 2_500 },
    (_, i) => node(`n${i + 1}`, { allocations: [alloc("o", [0, 1, 2, 3], "other")] }),
  );
  const r = unschedulable(placeReplica(nodes, deployment([h100x8]), "r-1", { detail: "grouped" }));
  assertEquals(explanationLines(r.explanation), [
    'no profile fits: profile "h100x8": 0/2500 nodes fit: 2500 insufficient free h100-80g GPUs',
    "  profile h100x8: does not fit: 0/2500 nodes fit: 2500 insufficient free h100-80g GPUs",
    "    2,500 nodes: insufficient_gpus — needs 8 free h100-80g GPUs, has 4 free; 2,500 with GPUs allocated (e.g. n1, n2, n3)",
  ]);
});

Deno.test("groups: an unschedulable multi-node profile groups no_fabric and fabric_too_small", () => {
  const p = profile({ name: "p", nodes: 2, gpus_per_node: 8 });
  const nodes = [
    node("n1"),
    node("n2"),
    node("n3", { fabrics: [fabric("ib-a", ["mlx5_0"])] }),
    node("n4", { fabrics: [fabric("ib-b", ["mlx5_0"])] }),
  ];
  const a = unschedulable(placeReplica(nodes, deployment([p]), "r-1", { detail: "grouped" }))
    .explanation.profiles[0];
  assertEquals(a.groups, [
    {
      reason: "no_fabric",
      count: 2,
      message: "a 2-node replica needs nodes on a fabric; these are on none",
      examples: ["n1", "n2"],
    },
    {
      reason: "fabric_too_small",
      count: 2,
      message: "needs 2 eligible nodes on one fabric: ib-a has 1, ib-b has 1",
      examples: ["n3", "n4"],
    },
  ]);
  // With detail, the per-node list replaces the groups and the fabrics are listed.
  const full = unschedulable(placeReplica(nodes, deployment([p]), "r-1", { detail: "full" }));
  assertEquals(explanationLines(full.explanation, { detail: true }).slice(2), [
    "    n1: no_fabric: a 2-node replica needs nodes on a fabric; this node is on none",
    "    n2: no_fabric: a 2-node replica needs nodes on a fabric; this node is on none",
    "    n3: fabric_too_small: needs 2 eligible nodes on one fabric: ib-a has 1",
    "    n4: fabric_too_small: needs 2 eligible nodes on one fabric: ib-b has 1",
    "    fabric ib-a: not chosen: only 1 eligible node, needs 2",
    "    fabric ib-b: not chosen: only 1 eligible node, needs 2",
  ]);
});

Deno.test("groups are copies: changing one result does not change the next", () => {
  const index = indexCluster([node("n1", { state: "cordoned" })]);
  const first = place(index, deployment([h100x8]), "r-1", { detail: "grouped" });
  first.explanation.profiles[0].groups![0].examples.push("bogus");
  first.explanation.profiles[0].groups![0].count = 99;
  const second = place(index, deployment([h100x8]), "r-1", { detail: "grouped" });
  assertEquals(second.explanation.profiles[0].groups, [
    { reason: "node_cordoned", count: 1, message: "cordoned", examples: ["n1"] },
  ]);
});

// ---------------------------------------------------------------------------
// The model's facts (issue #25 item 6)

Deno.test("insufficient_gpu_memory: a GPU too small for the model is refused, with the numbers", () => {
  const facts = fixtureFacts("llama-3.1-405b-instruct-fp8", [410e9]);
  // The dev sample's shape: TP 8 × PP 2 on 8-GPU nodes; per GPU 410e9 ÷ 16 B of
  // weights (23.9 GiB) + 63 layers × 131,072 tokens × 512 B (3.9 GiB) = 27.8 GiB.
  const tp8pp2 = profile({
    name: "l40s-2x8",
    gpu_class: "l40s-45g",
    tensor_parallel: 8,
    pipeline_parallel: 2,
    nodes: 2,
    gpus_per_node: 8,
  });
  const l40s = [
    node("n1", { gpus: gpus(8, { cls: "l40s-45g" }), fabrics: [fabric("ib", ["mlx5_0"])] }),
    node("n2", { gpus: gpus(8, { cls: "l40s-45g" }), fabrics: [fabric("ib", ["mlx5_0"])] }),
  ];
  // 27.8 GiB fits 45 GiB × 0.9.
  placed(placeReplica(l40s, deployment([tp8pp2]), "r-1", { model: facts }));
  // One node, TP 8 alone: 47.7 GiB of weights + 7.9 GiB of KV cache does not.
  const tp8 = profile({ name: "l40s-tp8", gpu_class: "l40s-45g", tensor_parallel: 8 });
  const r = unschedulable(
    placeReplica(l40s, deployment([tp8]), "r-1", { model: facts, detail: "full" }),
  );
  const a = r.explanation.profiles[0];
  assertEquals(a.counts, { insufficient_gpu_memory: 2 });
  assertEquals(a.summary, "0/2 nodes fit: 2 too little memory per l40s-45g GPU for the model");
  const message =
    "needs 55.6 GiB per GPU (weights 47.7 + KV cache for one 131072-token sequence 7.9) " +
    "but an l40s-45g GPU offers 40.5 GiB (45.0 GiB × 0.90)";
  assertEquals(rejections(a).n1, ["insufficient_gpu_memory", message]);
  const grouped = unschedulable(
    placeReplica(l40s, deployment([tp8]), "r-1", { model: facts, detail: "grouped" }),
  );
  assertEquals(grouped.explanation.profiles[0].groups![0].message, message);
  // Without facts nothing is refused for memory: unknown is not "too small".
  placed(placeReplica(l40s, deployment([tp8]), "r-1"));
});

Deno.test("insufficient_gpu_memory reads the GPUs' own memory when they report it", () => {
  const facts = fixtureFacts("llama-3.1-8b-instruct");
  // 30.96 GiB per GPU at TP 1: a 45 GiB L40S holds it; one that reports 32 GiB does not.
  const small = gpus(1, { cls: "l40s-45g" }).map((g) => ({ ...g, memory_total_mb: 32 * 1024 }));
  const p = profile({ name: "one", gpu_class: "l40s-45g", tensor_parallel: 1, gpus_per_node: 1 });
  const a = unschedulable(
    placeReplica([node("n1", { gpus: small })], deployment([p]), "r-1", {
      model: facts,
      detail: "full",
    }),
  ).explanation.profiles[0];
  assertStringIncludes(rejections(a).n1[1], "offers 28.8 GiB (32.0 GiB × 0.90)");
  // --max-model-len 8192 shrinks the cache to 1 GiB: it fits.
  const short = { ...p, engine_args: ["--max-model-len", "8192"] };
  placed(placeReplica([node("n1", { gpus: small })], deployment([short]), "r-1", { model: facts }));
});

Deno.test("tensor_parallel_heads: a TP that does not divide the heads fits nowhere; the next profile is tried", () => {
  const facts = fixtureFacts("qwen2.5-7b-instruct", [15e9]);
  const tp8 = profile({ name: "tp8" });
  const tp4 = profile({ name: "tp4", gpus_per_node: 4 });
  const r = placed(
    placeReplica([node("n1")], deployment([tp8, tp4]), "r-1", { model: facts, detail: "full" }),
  );
  assertEquals(r.profile, "tp4");
  const a = r.explanation.profiles[0];
  assertEquals(a.counts, { tensor_parallel_heads: 1 });
  assertEquals(rejections(a).n1, [
    "tensor_parallel_heads",
    "Total number of attention heads (28) must be divisible by tensor parallel size (8): " +
    "the engine refuses to start (tensor_parallel 1, 2, 4, 7, 14, 28 would divide them)",
  ]);
  // A plugin's memory and heads are unknown: nothing refused.
  const plugin = profile({ name: "tp8", engine: "trtllm" });
  placed(placeReplica([node("n1")], deployment([plugin]), "r-1", { model: facts }));
});

Deno.test("the model's filters come right after node size, before node state", () => {
  const facts = fixtureFacts("qwen2.5-7b-instruct", [15e9]);
  const a = unschedulable(
    placeReplica([node("n1", { state: "cordoned" })], deployment([profile({ name: "tp8" })]), "r", {
      model: facts,
    }),
  ).explanation.profiles[0];
  assertEquals(a.counts, { tensor_parallel_heads: 1 });
});

Deno.test("the index carries known facts by model: place reads them unless its options say otherwise", () => {
  const facts = fixtureFacts("qwen2.5-7b-instruct", [15e9]);
  const dep = { ...deployment([profile({ name: "tp8" })]), revision: "v2" }; // model "org/model"
  const index = indexCluster([node("n1"), node("n2")], {
    models: new Map([["org/model@v2", facts]]),
  });
  assertEquals(unschedulable(place(index, dep, "r")).explanation.profiles[0].counts, {
    tensor_parallel_heads: 2,
  });
  // avoid copies the index: the facts come along.
  assertEquals(
    unschedulable(place(index, dep, "r", { avoid: new Set(["n2"]) })).explanation.profiles[0]
      .counts,
    { tensor_parallel_heads: 1 },
  );
  // options.model null: unknown, nothing refused; another revision's facts are not these.
  placed(place(index, dep, "r", { model: null }));
  placed(place(index, { ...dep, revision: "main" }, "r"));
});
