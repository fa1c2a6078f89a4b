/**
 * The model cache in placement (issue #25 item 5): `insufficient_disk` when
 * a node's reported room cannot take the model's files, and the preference
 * for nodes that hold the revision, after the hard constraints and before
 * bin packing. Table tests, then properties on random clusters.
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { alloc, deployment, fabric, gpus, node, profile } from "../tests/cluster_builders.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Deployment } from "../deployment/schema.ts";
import {
  explanationLines,
  indexCluster,
  place,
  type Placed,
  type PlacementResult,
  type Unschedulable,
} from "./mod.ts";
import type { NodeModelCache } from "./cluster_index.ts";

const GIB = 2 ** 30;
const REPO = "meta-llama/Llama-3.1-8B-Instruct";
const COMMIT = "abc1234def5678901234567890abcdef12345678";
const REV = `${REPO}@${COMMIT}`;
const FACTS = fixtureFacts("llama-3.1-8b-instruct");
const one = profile({ name: "one", tensor_parallel: 1, gpus_per_node: 1 });

function dep(o: { model?: string; placement?: "pack" | "spread" } = {}): Deployment {
  return { ...deployment([one], { placement: o.placement }), model: o.model ?? REPO };
}

function cache(
  roomGiB: number | null,
  o: { holds?: boolean; partialGiB?: number } = {},
): NodeModelCache {
  return {
    roomBytes: roomGiB === null ? null : roomGiB * GIB,
    holds: new Set(o.holds ? [REV] : []),
    partial: new Map(o.partialGiB === undefined ? [] : [[REV, o.partialGiB * GIB]]),
  };
}

function placeOn(
  nodes: ClusterNode[],
  caches: Record<string, NodeModelCache>,
  d: Deployment = dep(),
  o: { facts?: boolean; commit?: boolean } = {},
): PlacementResult {
  const index = indexCluster(nodes, {
    caches: new Map(Object.entries(caches)),
    ...(o.commit === false ? {} : { commits: new Map([[d.name, COMMIT]]) }),
  });
  return place(index, d, "r-1", { model: o.facts === false ? null : FACTS, detail: "full" });
}

function placed(r: PlacementResult): Placed {
  assertOk(r.status === "placed", `expected a placement, got: ${r.explanation.summary}`);
  return r;
}

function unschedulable(r: PlacementResult): Unschedulable {
  assertOk(r.status === "unschedulable", `expected unschedulable, got: ${r.explanation.summary}`);
  return r;
}

const nodesOf = (r: Placed) => r.shards.map((s) => s.node);

Deno.test("insufficient_disk: a node whose cache has too little room is refused, with the numbers", () => {
  const weights = FACTS.weight_bytes / GIB; // 14.96 GiB
  const r = unschedulable(placeOn([node("n1"), node("n2")], { n1: cache(5), n2: cache(9.25) }));
  const a = r.explanation.profiles[0];
  assertEquals(a.counts, { insufficient_disk: 2 });
  assertEquals(a.summary, "0/2 nodes fit: 2 too little model cache room");
  assertEquals(a.nodes![0], {
    node: "n1",
    reason: "insufficient_disk",
    message: `needs ${weights.toFixed(1)} GiB for ${REPO}@abc1234 in its model cache, which has ` +
      "room for 5.0 GiB under the high watermark after evicting all it may",
  });
  assertEquals(
    a.groups![0].message,
    `needs ${weights.toFixed(1)} GiB for ${REPO}@abc1234 in their model caches, which have ` +
      "room for 5.0–9.3 GiB under the high watermark after evicting all they may",
  );
  assertStringIncludes(
    explanationLines(r.explanation).join("\n"),
    "2 nodes: insufficient_disk — needs 15.0 GiB",
  );
});

Deno.test("insufficient_disk counts the revision's files (what is downloaded), not the weights the index claims", () => {
  // A synthetic revision as llmgw dev's hub serves it: the index claims the real 16 GB, the files are 64 MiB.
  const claimed = { ...FACTS, download_bytes: 64 * 2 ** 20 };
  const index = indexCluster([node("n1")], {
    caches: new Map([["n1", cache(1)]]),
    commits: new Map([[dep().name, COMMIT]]),
  });
  assertEquals(placed(place(index, dep(), "r-1", { model: claimed })).shards[0].node, "n1");
  // The same room refuses the real files.
  const real = { ...FACTS, download_bytes: FACTS.weight_bytes + 9_085_657 };
  const r = unschedulable(place(index, dep(), "r-1", { model: real, detail: "full" }));
  assertStringIncludes(r.explanation.profiles[0].nodes![0].message, "needs 15.0 GiB");
});

Deno.test("insufficient_disk: a holder, a partial download, an older agent and unknowns pass", () => {
  const nodes = ["n1", "n2", "n3", "n4", "n5"].map((id) => node(id));
  const caches = {
    n1: cache(1), // refused
    n2: cache(0, { holds: true }), // holds it: nothing to fetch
    n3: cache(1, { partialGiB: 14.5 }), // 0.46 GiB left to fetch
    n4: cache(null), // could not read its disk
    // n5 reports no cache (an older agent)
  };
  const a = placed(placeOn(nodes, caches)).explanation.profiles[0];
  assertEquals(a.counts, { insufficient_disk: 1 });
  assertEquals(a.nodes!.map((n) => n.node), ["n1"]);
  // Without facts the size is unknown, for a local path nothing is copied: nothing refused.
  assertEquals(
    placed(placeOn([node("n1")], { n1: cache(0) }, dep(), { facts: false })).shards[0].node,
    "n1",
  );
  assertEquals(
    placed(placeOn([node("n1")], { n1: cache(0) }, dep({ model: "/models/llama" }))).shards[0].node,
    "n1",
  );
  // Without a commit the size still counts, but no node is a holder.
  unschedulable(placeOn([node("n1")], { n1: cache(1, { holds: true }) }, dep(), { commit: false }));
});

Deno.test("holders first: before bin packing, after spread; the explanation says so", () => {
  // Bin packing alone would take n1 (fewer free GPUs); n2 holds the revision.
  const nodes = [
    node("n1", { allocations: [alloc("old", [0, 1, 2, 3])] }),
    node("n2"),
    node("n3"),
  ];
  const r = placed(placeOn(nodes, { n2: cache(100, { holds: true }), n3: cache(100) }));
  assertEquals(nodesOf(r), ["n2"]);
  assertEquals(
    r.explanation.summary,
    `placed with profile "one": fits on n2 (of 3 nodes); n2 holds ${REPO}@abc1234`,
  );
  // Nobody holds it: bin packing as before, and nothing said.
  const plain = placed(placeOn(nodes, { n2: cache(100), n3: cache(100) }));
  assertEquals(nodesOf(plain), ["n1"]);
  assertEquals(plain.explanation.summary.includes("holds"), false);
  // spread first: a holder already running the deployment loses to a node without it.
  const spread = dep({ placement: "spread" });
  const withDep = [node("n1"), node("n2", { allocations: [alloc("dep-r0", [0], "dep")] })];
  assertEquals(nodesOf(placed(placeOn(withDep, { n2: cache(100, { holds: true }) }, spread))), [
    "n1",
  ]);
});

Deno.test("holders never beat a hard constraint", () => {
  const holder = cache(100, { holds: true });
  for (
    const [why, n1] of [
      ["cordoned", node("n1", { state: "cordoned" })],
      ["no free GPU", node("n1", { allocations: [alloc("old", [0, 1, 2, 3, 4, 5, 6, 7])] })],
      ["another class", node("n1", { gpus: gpus(8, { cls: "a100-80g" }) })],
    ] as const
  ) {
    assertEquals(nodesOf(placed(placeOn([n1, node("n2")], { n1: holder }))), ["n2"], why);
  }
});

Deno.test("multi-node: holders first within the fabric; the fabric still chosen by bandwidth", () => {
  const two = profile({ name: "two", nodes: 2, gpus_per_node: 8 });
  const d = { ...deployment([two]), model: REPO };
  const ib = (id: string) => node(id, { fabrics: [fabric("ib", ["mlx5_0"])] });
  const r = placed(placeOn([ib("n1"), ib("n2"), ib("n3")], { n3: cache(100, { holds: true }) }, d));
  assertEquals(nodesOf(r), ["n1", "n3"]);
  assertStringIncludes(r.explanation.summary, `n3 holds ${REPO}@abc1234`);
});

// ---------------------------------------------------------------------------
// Properties

interface Case {
  nodes: { free: number; state: "ready" | "cordoned"; holds: boolean; room: number | null }[];
  spread: boolean;
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  nodes: fc.array(
    fc.record({
      free: fc.integer({ min: 0, max: 8 }),
      state: fc.constantFrom("ready" as const, "ready" as const, "cordoned" as const),
      holds: fc.boolean(),
      room: fc.option(fc.constantFrom(0, 10, 20, 100), { nil: null }),
    }),
    { minLength: 1, maxLength: 12 },
  ),
  spread: fc.boolean(),
});

function build(c: Case) {
  const nodes = c.nodes.map((n, i) =>
    node(`n${i}`, {
      state: n.state,
      allocations: n.free === 8 ? [] : [alloc(`old-${i}`, [...Array(8 - n.free).keys()])],
    })
  );
  const caches = Object.fromEntries(
    c.nodes.map((n, i) => [`n${i}`, cache(n.room, { holds: n.holds })]),
  );
  return { nodes, caches };
}

/** Eligible by the hard constraints alone, re-derived from the input. */
function eligible(n: Case["nodes"][number]): boolean {
  const fits = n.holds || n.room === null || n.room * GIB >= FACTS.weight_bytes;
  return n.state === "ready" && n.free >= 1 && fits;
}

Deno.test("property: the chosen node meets every hard constraint; a holder wins whenever one is eligible", () => {
  fc.assert(
    fc.property(caseArb, (c) => {
      const { nodes, caches } = build(c);
      const r = placeOn(nodes, caches, dep({ placement: c.spread ? "spread" : "pack" }));
      const ok = c.nodes.map(eligible);
      if (r.status === "unschedulable") return ok.every((e) => !e);
      const chosen = c.nodes[Number(r.shards[0].node.slice(1))];
      // spread only weighs the deployment's presence, and none is here: holders decide.
      return eligible(chosen) && (chosen.holds || !c.nodes.some((n, i) => ok[i] && n.holds));
    }),
    { numRuns: 300 },
  );
});

Deno.test("property: among holders (or among non-holders) bin packing decides as before", () => {
  fc.assert(
    fc.property(caseArb, (c) => {
      const { nodes, caches } = build(c);
      const r = placeOn(nodes, caches);
      if (r.status === "unschedulable") return true;
      const chosenAt = Number(r.shards[0].node.slice(1));
      const chosen = c.nodes[chosenAt];
      // No eligible node of the same holding has fewer free GPUs, nor as few and an earlier id.
      return c.nodes.every((n, i) =>
        !eligible(n) || n.holds !== chosen.holds || n.free > chosen.free ||
        (n.free === chosen.free && i >= chosenAt)
      );
    }),
    { numRuns: 300 },
  );
});

Deno.test("disk_full_backoff: a node held back for the revision is left out with the control plane's words; others are tried", () => {
  const why = "ran out of disk fetching x just now; retried after 2023-11-14T22:13:50.000Z";
  const held = { ...cache(100), backoff: new Map([[REV, why]]) };
  const r = placed(placeOn([node("n1"), node("n2")], { n1: held, n2: cache(100) }));
  assertEquals(nodesOf(r), ["n2"]);
  const a = r.explanation.profiles[0];
  assertEquals(a.counts, { disk_full_backoff: 1 });
  assertEquals(a.nodes, [{ node: "n1", reason: "disk_full_backoff", message: why }]);
  assertEquals(a.groups![0].message, `n1 ${why}`);
  // Another revision of the model, or the model whose commit is not known, is not held back.
  const other = { ...cache(100), backoff: new Map([[`${REPO}@${"f".repeat(40)}`, why]]) };
  assertEquals(nodesOf(placed(placeOn([node("n1")], { n1: other }))), ["n1"]);
  assertEquals(nodesOf(placed(placeOn([node("n1")], { n1: held }, dep(), { commit: false }))), [
    "n1",
  ]);
  // Alone, it waits with the reason rather than going back there.
  const u = unschedulable(placeOn([node("n1")], { n1: held }));
  assertEquals(
    u.explanation.profiles[0].summary,
    "0/1 nodes fit: 1 out of disk for this model lately",
  );
});
