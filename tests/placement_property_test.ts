/**
 * Property tests for placement (design §7, §1.1, §1.2): random clusters and
 * deployments, and on every placement produced the hard constraints, the
 * profile order (checked against an independent brute force), determinism
 * and the explanation. Nothing here calls placement's internals: the checker
 * re-derives eligibility from the input snapshot.
 */
import fc from "fast-check";
import { assertEquals, assertOk } from "./assert.ts";
import { CLASS_CC } from "./cluster_builders.ts";
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { Allocation, ClusterNode, NodeState } from "../inventory/types.ts";
import {
  applyPlacement,
  indexCluster,
  place,
  type PlacementResult,
  placeReplica,
  type ProfileAttempt,
  REASONS,
  type ShardPlacement,
} from "../placement/mod.ts";

// ---------------------------------------------------------------------------
// Arbitraries

const CLASSES = ["h100-80g", "a100-80g", "l40s-45g"] as const;
const FABRICS = ["ib-a", "ib-b", "roce-c"] as const;
const HCAS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] as const;
const TOPOLOGIES = ["none", "pairs", "quads", "all", "random"] as const;
/** Existing replicas: their deployment ("dep" is the deployment under test). */
const OLD_REPLICAS: { id: string; deployment: string | null }[] = [
  { id: "old-0", deployment: "dep" },
  { id: "old-1", deployment: "other" },
  { id: "old-2", deployment: null },
  { id: "old-3", deployment: "dep" },
];

/** true with probability yes / (yes + no). */
function chance(yes: number, no: number): fc.Arbitrary<boolean> {
  return fc.oneof(
    { arbitrary: fc.constant(true), weight: yes },
    { arbitrary: fc.constant(false), weight: no },
  );
}

const stateArb: fc.Arbitrary<NodeState> = fc.oneof(
  { arbitrary: fc.constant<NodeState>("ready"), weight: 12 },
  {
    arbitrary: fc.constantFrom<NodeState>("cordoned", "draining", "unreachable", "lost"),
    weight: 3,
  },
);

const gpuSpecArb = fc.record({
  second: chance(1, 2), // of the node's second class (when the node is mixed)
  ccNull: chance(1, 25),
  classNull: chance(1, 40),
  unhealthy: chance(1, 12),
  /** -1: not allocated; else an index into OLD_REPLICAS. */
  allocated: fc.oneof(
    { arbitrary: fc.constant(-1), weight: 6 },
    { arbitrary: fc.integer({ min: 0, max: OLD_REPLICAS.length - 1 }), weight: 1 },
  ),
});

const rateArb: fc.Arbitrary<number | null> = fc.oneof(
  { arbitrary: fc.constantFrom(100, 200, 400), weight: 12 },
  { arbitrary: fc.constant(null), weight: 1 },
);

const nodeSpecArb = fc.record({
  state: stateArb,
  zone: fc.constantFrom("a", "b", null),
  classes: fc.tuple(fc.constantFrom(...CLASSES), fc.constantFrom(...CLASSES)),
  mixed: chance(1, 3),
  gpus: fc.oneof(
    { arbitrary: fc.array(gpuSpecArb, { minLength: 8, maxLength: 8 }), weight: 3 },
    { arbitrary: fc.array(gpuSpecArb, { minLength: 0, maxLength: 8 }), weight: 2 },
  ),
  topology: fc.constantFrom(...TOPOLOGIES),
  links: fc.array(fc.tuple(fc.nat(7), fc.nat(7)), { maxLength: 8 }),
  fabrics: fc.subarray([...FABRICS], { maxLength: 2 }),
  hcaOrder: fc.shuffledSubarray([...HCAS], { minLength: HCAS.length, maxLength: HCAS.length }),
  hcaCounts: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 })),
  /** Per fabric: the slowest active port's rate; null when unreadable. */
  rates: fc.tuple(rateArb, rateArb),
  /** The engines the node reports; none reported means unknown (any engine). */
  engines: fc.oneof(
    { arbitrary: fc.constant<string[]>([]), weight: 3 },
    { arbitrary: fc.constant<string[]>(["vllm"]), weight: 3 },
    { arbitrary: fc.constant<string[]>(["sglang"]), weight: 1 },
    { arbitrary: fc.constant<string[]>(["sglang", "vllm"]), weight: 2 },
  ),
});
type NodeSpec = typeof nodeSpecArb extends fc.Arbitrary<infer T> ? T : never;

function nvlinkGroups(spec: NodeSpec, count: number): number[][] {
  const all = Array.from({ length: count }, (_, i) => i);
  const chunks = (size: number) =>
    Array.from({ length: Math.ceil(count / size) }, (_, i) => all.slice(i * size, i * size + size));
  switch (spec.topology) {
    case "none":
      return [];
    case "pairs":
      return chunks(2);
    case "quads":
      return chunks(4);
    case "all":
      return [all];
    case "random":
      return spec.links.filter(([a, b]) => a !== b && a < count && b < count);
  }
}

function buildNode(id: string, spec: NodeSpec): ClusterNode {
  const count = spec.gpus.length;
  const peers = Array.from({ length: count }, () => new Set<number>());
  for (const group of nvlinkGroups(spec, count)) {
    for (const a of group) for (const b of group) if (a !== b) peers[a].add(b);
  }
  const gpus: Gpu[] = spec.gpus.map((g, index) => {
    const cls = g.classNull ? null : spec.mixed && g.second ? spec.classes[1] : spec.classes[0];
    return {
      index,
      uuid: `GPU-${id}-${index}`,
      name: cls,
      class: cls,
      memory_total_mb: null,
      memory_used_mb: null,
      compute_capability: g.ccNull || cls === null ? null : CLASS_CC[cls],
      numa_node: null,
      pci_bus_id: null,
      driver_version: null,
      cuda_version: null,
      nvlink_peers: [...peers[index]].sort((a, b) => a - b),
      health: {
        ecc_errors: g.unhealthy ? 2 : 0,
        temperature_c: null,
        problems: g.unhealthy ? ["uncorrected ECC errors: 2"] : [],
      },
    };
  });
  const allocations: Allocation[] = [];
  OLD_REPLICAS.forEach((r, k) => {
    const held = spec.gpus.flatMap((g, i) => g.allocated === k ? [i] : []);
    if (held.length > 0) {
      allocations.push({
        replica_id: r.id,
        shard_id: `${r.id}/${id}`,
        deployment: r.deployment,
        gpu_indices: held,
      });
    }
  });
  let next = 0;
  const fabrics: FabricAttachment[] = spec.fabrics.map((name, k) => {
    const hcas = spec.hcaOrder.slice(next, next + spec.hcaCounts[k]).sort();
    next += spec.hcaCounts[k];
    const roce = name.startsWith("roce");
    return {
      fabric: name,
      hcas,
      ports: hcas.map((hca) => ({
        hca,
        port: 1,
        link_layer: roce ? "roce" : "infiniband",
        rate_gbps: spec.rates[k],
        roce_v2_gid_index: roce ? 3 : null,
      })),
      rate_gbps: spec.rates[k],
    };
  });
  return {
    id,
    hostname: `host-${id}`,
    mgmt_addr: "192.0.2.1",
    mgmt_interface: "eth0",
    state: spec.state,
    labels: spec.zone === null ? {} : { zone: spec.zone },
    gpus,
    fabrics,
    allocations,
    engine_versions: Object.fromEntries(spec.engines.map((e) => [e, "1.0.0"])),
  };
}

const clusterArb: fc.Arbitrary<ClusterNode[]> = fc.array(nodeSpecArb, {
  minLength: 1,
  maxLength: 30,
  size: "max",
}).map((specs) => specs.map((s, i) => buildNode(`n${i + 1}`, s)));

const profileSpecArb = fc.record({
  cls: fc.oneof(
    { arbitrary: fc.constantFrom(...CLASSES), weight: 12 },
    { arbitrary: fc.constant("b200-180g"), weight: 1 }, // a class no node has
  ),
  nodes: fc.oneof(
    { arbitrary: fc.constant(1), weight: 4 },
    { arbitrary: fc.constant(2), weight: 3 },
    { arbitrary: fc.constant(3), weight: 2 },
  ),
  gpn: fc.constantFrom(1, 2, 4, 8),
  pipeline: fc.boolean(),
  fp8: chance(1, 3),
  zoneA: chance(1, 3),
  sglang: chance(1, 3),
});

const deploymentArb: fc.Arbitrary<Deployment> = fc.record({
  profiles: fc.array(profileSpecArb, { minLength: 1, maxLength: 3 }),
  spread: fc.boolean(),
}).map(({ profiles, spread }) => ({
  name: "dep",
  model: "org/model",
  served_model_name: "dep",
  replicas: 1,
  placement: spread ? "spread" : "pack",
  profiles: profiles.map((s, i): Profile => ({
    name: `p${i + 1}`,
    engine: s.sglang ? "sglang" : "vllm",
    gpu_class: s.cls,
    tensor_parallel: s.pipeline ? s.gpn : s.nodes * s.gpn,
    pipeline_parallel: s.pipeline ? s.nodes : 1,
    nodes: s.nodes,
    gpus_per_node: s.gpn,
    quantization: s.fp8 ? "fp8" : "none",
    engine_args: [],
    engine_options: {},
    env: {},
    node_selector: s.zoneA ? { zone: "a" } : {},
  })),
}));

/** A permutation of the nodes, from random sort keys. */
const shuffleKeysArb = fc.array(fc.integer(), { minLength: 30, maxLength: 30 });

function shuffled<T>(list: readonly T[], keys: number[]): T[] {
  return list.map((x, i) => ({ x, k: keys[i % keys.length], i }))
    .sort((a, b) => a.k - b.k || b.i - a.i).map((e) => e.x);
}

// ---------------------------------------------------------------------------
// The independent checker

/** What the checker knows: the input snapshot plus earlier placements of the sequence. */
interface State {
  nodes: ClusterNode[];
  byId: Map<string, ClusterNode>;
  /** Node id → GPU indices allocated (input allocations and earlier placements). */
  taken: Map<string, Set<number>>;
  /** Nodes holding a replica of the deployment under test. */
  present: Set<string>;
}

function initialState(nodes: ClusterNode[], deployment: string): State {
  const taken = new Map<string, Set<number>>();
  const present = new Set<string>();
  for (const n of nodes) {
    taken.set(n.id, new Set(n.allocations.flatMap((a) => a.gpu_indices)));
    if (n.allocations.some((a) => a.deployment === deployment)) present.add(n.id);
  }
  return { nodes, byId: new Map(nodes.map((n) => [n.id, n])), taken, present };
}

function recordPlacement(state: State, shards: ShardPlacement[]): void {
  for (const s of shards) {
    for (const i of s.gpu_indices) state.taken.get(s.node)!.add(i);
    state.present.add(s.node);
  }
}

/** Natural order of the generated ids n1..n30. */
function idNumber(id: string): number {
  return Number(id.slice(1));
}

function ccAtLeast89(cc: string | null): boolean {
  if (cc === null) return false;
  const m = /^(\d+)\.(\d+)$/.exec(cc);
  if (m === null) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > 8 || (major === 8 && minor >= 9);
}

function classGpus(n: ClusterNode, cls: string): Gpu[] {
  return n.gpus.filter((g) => g.class === cls);
}

/** Healthy, unallocated GPU indices of the class on the node, ascending. */
function freeIndices(state: State, n: ClusterNode, cls: string): number[] {
  const taken = state.taken.get(n.id)!;
  return classGpus(n, cls)
    .filter((g) => g.health.problems.length === 0 && !taken.has(g.index))
    .map((g) => g.index).sort((a, b) => a - b);
}

/** The first filter (in the documented order) rejecting the node, or null when it passes all. */
function nodeReason(state: State, n: ClusterNode, p: Profile): string | null {
  const own = classGpus(n, p.gpu_class);
  if (own.length === 0) return "no_gpu_class";
  if (own.length < p.gpus_per_node) return "node_too_small";
  if (n.state !== "ready") return `node_${n.state}`;
  for (const [k, v] of Object.entries(p.node_selector)) {
    if (!Object.hasOwn(n.labels, k) || n.labels[k] !== v) return "selector_mismatch";
  }
  if (p.quantization === "fp8" && !own.every((g) => ccAtLeast89(g.compute_capability))) {
    return "compute_capability";
  }
  const engines = Object.keys(n.engine_versions ?? {});
  if (engines.length > 0 && !engines.includes(p.engine)) return "engine_missing";
  if (freeIndices(state, n, p.gpu_class).length < p.gpus_per_node) return "insufficient_gpus";
  return null;
}

function eligibleNodes(state: State, p: Profile): ClusterNode[] {
  return state.nodes.filter((n) => nodeReason(state, n, p) === null);
}

/** Fabric name → eligible nodes attached to it. */
function fabricMembers(state: State, p: Profile): Map<string, ClusterNode[]> {
  const members = new Map<string, ClusterNode[]>();
  for (const n of eligibleNodes(state, p)) {
    for (const f of new Set(n.fabrics.map((a) => a.fabric))) {
      members.set(f, [...(members.get(f) ?? []), n]);
    }
  }
  return members;
}

/** Brute force: could a replica of this profile be placed on the state at all? */
function profileFits(state: State, p: Profile): boolean {
  if (p.nodes === 1) return eligibleNodes(state, p).length > 0;
  for (const list of fabricMembers(state, p).values()) if (list.length >= p.nodes) return true;
  return false;
}

/** The reason a non-fitting profile should give for a node. */
function expectedRejection(state: State, n: ClusterNode, p: Profile): string {
  const r = nodeReason(state, n, p);
  if (r !== null) return r;
  if (p.nodes === 1) throw new Error(`node ${n.id} fits single-node profile ${p.name}`);
  return n.fabrics.length === 0 ? "no_fabric" : "fabric_too_small";
}

function fmt(x: unknown): string {
  return JSON.stringify(x);
}

/** Property 10: the explanation of a profile that did not fit. */
function checkNotFitting(state: State, p: Profile, a: ProfileAttempt, detail: boolean): void {
  const total = state.nodes.length;
  assertEquals(a.fits, false);
  const sum = Object.values(a.counts).reduce((s, c) => s + (c ?? 0), 0);
  assertEquals(sum, total, `profile ${p.name}: counts ${fmt(a.counts)} must sum to ${total}`);
  for (const c of Object.values(a.counts)) assertOk((c ?? 0) > 0, `zero count in ${fmt(a.counts)}`);
  assertOk(
    a.summary.startsWith(`0/${total} nodes fit`),
    `profile ${p.name}: summary ${fmt(a.summary)} must start with "0/${total} nodes fit"`,
  );
  if (!detail) return;
  checkGroups(p, a);
  const rejections = a.nodes;
  assertOk(rejections !== undefined, "detail asked for, no nodes");
  assertEquals(
    rejections.map((r) => r.node).sort(),
    state.nodes.map((n) => n.id).sort(),
    `profile ${p.name}: one entry per node`,
  );
  const tally: Record<string, number> = {};
  for (const r of rejections) {
    tally[r.reason] = (tally[r.reason] ?? 0) + 1;
    assertOk(r.message.length > 0, `empty message for ${r.node}`);
    assertEquals(
      r.reason,
      expectedRejection(state, state.byId.get(r.node)!, p),
      `profile ${p.name}, node ${r.node}`,
    );
  }
  assertEquals(tally, a.counts, `profile ${p.name}: per-node reasons agree with counts`);
}

/**
 * Groups agree with the per-node list: one group per reason, in filter
 * order, its count the reason's count and its examples the first nodes
 * (in node order) with that reason.
 */
function checkGroups(p: Profile, a: ProfileAttempt): void {
  assertOk(a.groups !== undefined && a.nodes !== undefined, "full detail has groups and nodes");
  const reasons = [...new Set(a.nodes.map((r) => r.reason))];
  const order = REASONS.map((r) => r.code);
  reasons.sort((x, y) => order.indexOf(x) - order.indexOf(y));
  assertEquals(a.groups.map((g) => g.reason), reasons, `profile ${p.name}: one group per reason`);
  for (const g of a.groups) {
    const mine = a.nodes.filter((r) => r.reason === g.reason).map((r) => r.node);
    assertEquals(g.count, mine.length, `profile ${p.name}: count of group ${g.reason}`);
    assertEquals(
      g.examples,
      mine.sort((x, y) => idNumber(x) - idNumber(y)).slice(0, 3),
      `profile ${p.name}: examples of group ${g.reason}`,
    );
    assertOk(g.message.length > 0, `empty message for group ${g.reason}`);
  }
}

/** For a profile that fitted: detail lists exactly the nodes some filter rejected. */
function checkFitting(state: State, p: Profile, a: ProfileAttempt, detail: boolean): void {
  assertEquals(a.fits, true);
  if (!detail) return;
  checkGroups(p, a);
  const expected = state.nodes.flatMap((n) => {
    const r = nodeReason(state, n, p);
    return r === null ? [] : [{ node: n.id, reason: r }];
  }).sort((x, y) => idNumber(x.node) - idNumber(y.node));
  const got = (a.nodes ?? []).map((r) => ({ node: r.node, reason: r.reason }))
    .sort((x, y) => idNumber(x.node) - idNumber(y.node));
  assertEquals(got, expected, `profile ${p.name}: rejected nodes of a fitting profile`);
}

/** Independent NVLink domains among the class's GPUs (links outside them ignored). */
function domainsOf(own: Gpu[]): number[][] {
  const present = new Set(own.map((g) => g.index));
  const adj = new Map<number, Set<number>>(own.map((g) => [g.index, new Set<number>()]));
  for (const g of own) {
    for (const p of g.nvlink_peers) {
      if (!present.has(p) || p === g.index) continue;
      adj.get(g.index)!.add(p);
      adj.get(p)!.add(g.index);
    }
  }
  const seen = new Set<number>();
  const out: number[][] = [];
  for (const start of [...present].sort((a, b) => a - b)) {
    if (seen.has(start)) continue;
    const comp: number[] = [];
    const stack = [start];
    seen.add(start);
    while (stack.length > 0) {
      const x = stack.pop()!;
      comp.push(x);
      for (const y of adj.get(x)!) {
        if (seen.has(y)) continue;
        seen.add(y);
        stack.push(y);
      }
    }
    out.push(comp.sort((a, b) => a - b));
  }
  return out;
}

/** GPU choice inside a node (design §7): one NVLink domain when one suffices, else lowest free. */
function checkGpuChoice(state: State, n: ClusterNode, p: Profile, chosen: number[]): void {
  const own = classGpus(n, p.gpu_class);
  const free = freeIndices(state, n, p.gpu_class);
  const where = `node ${n.id}, GPUs ${fmt(chosen)}, free ${fmt(free)}`;
  if (!own.some((g) => g.nvlink_peers.length > 0)) {
    assertEquals(
      chosen,
      free.slice(0, p.gpus_per_node),
      `unknown topology → lowest free; ${where}`,
    );
    return;
  }
  const domains = domainsOf(own).map((d) => d.filter((i) => free.includes(i)));
  const sufficing = domains.filter((d) => d.length >= p.gpus_per_node);
  if (sufficing.length === 0) {
    assertEquals(chosen, free.slice(0, p.gpus_per_node), `no domain suffices → lowest; ${where}`);
    return;
  }
  const home = sufficing.find((d) => chosen.every((i) => d.includes(i)));
  assertOk(home !== undefined, `GPUs must stay inside one sufficing NVLink domain; ${where}`);
  assertEquals(chosen, home.slice(0, p.gpus_per_node), `lowest free of the domain; ${where}`);
  const smallest = Math.min(...sufficing.map((d) => d.length));
  assertEquals(home.length, smallest, `the smallest sufficing domain; ${where}`);
}

/** Which nodes the documented policy picks (pack/spread, emptiest-first, fabric choice). */
function checkNodeChoice(state: State, dep: Deployment, p: Profile, shards: ShardPlacement[]) {
  const spread = dep.placement === "spread";
  const has = (n: ClusterNode) => spread && state.present.has(n.id) ? 1 : 0;
  const free = (n: ClusterNode) => freeIndices(state, n, p.gpu_class).length;
  if (p.nodes === 1) {
    const best = [...eligibleNodes(state, p)].sort((a, b) =>
      has(a) - has(b) || free(a) - free(b) || idNumber(a.id) - idNumber(b.id)
    )[0];
    assertEquals(shards[0].node, best.id, `single-node choice (${dep.placement})`);
    return;
  }
  const options = fittingFabrics(state, dep, p);
  assertOk(options.length > 0);
  // Most bandwidth per node (unknown lowest), then most free GPUs, then name.
  const best =
    [...options].sort((a, b) =>
      (b.gbps ?? -1) - (a.gbps ?? -1) || b.free - a.free || (a.fabric < b.fabric ? -1 : 1)
    )[0];
  assertEquals(shards[0].fabric, best.fabric, "the fabric with most bandwidth, then emptiest");
  assertEquals(shards.map((s) => s.node).sort(), best.nodes, "the emptiest nodes of that fabric");
}

/**
 * Every fabric with enough eligible nodes for the profile, with the nodes it
 * would use (emptiest first; `spread` first avoids the deployment) and the
 * per-node bandwidth a collective would see on them: the minimum over them
 * of active HCAs × slowest port rate, null when a rate is unknown.
 */
function fittingFabrics(state: State, dep: Deployment, p: Profile) {
  const spread = dep.placement === "spread";
  const has = (n: ClusterNode) => spread && state.present.has(n.id) ? 1 : 0;
  const free = (n: ClusterNode) => freeIndices(state, n, p.gpu_class).length;
  const out: { fabric: string; nodes: string[]; free: number; gbps: number | null }[] = [];
  for (const [fabric, list] of fabricMembers(state, p)) {
    if (list.length < p.nodes) continue;
    const top = [...list].sort((a, b) =>
      has(a) - has(b) || free(b) - free(a) || idNumber(a.id) - idNumber(b.id)
    ).slice(0, p.nodes);
    const perNode = top.map((n) => {
      const att = n.fabrics.find((f) => f.fabric === fabric)!;
      return att.rate_gbps === null ? null : att.rate_gbps * att.hcas.length;
    });
    out.push({
      fabric,
      nodes: top.map((n) => n.id).sort(),
      free: top.reduce((s, n) => s + free(n), 0),
      gbps: perNode.includes(null) ? null : Math.min(...(perNode as number[])),
    });
  }
  return out;
}

/** Properties 1-7 on the shards of a placed replica. */
function checkShards(
  state: State,
  dep: Deployment,
  p: Profile,
  replicaId: string,
  shards: ShardPlacement[],
): void {
  // 7. counts, ranks, distinct nodes
  assertEquals(shards.length, p.nodes, "one shard per node of the profile");
  assertEquals(shards.map((s) => s.rank), shards.map((_, i) => i), "ranks 0..n-1");
  assertEquals(shards.map((s) => s.shard_id), shards.map((_, i) => `${replicaId}/${i}`));
  assertEquals(new Set(shards.map((s) => s.node)).size, shards.length, "distinct nodes");
  // 1. one fabric for a multi-node replica
  const fabric = shards[0].fabric;
  if (p.nodes > 1) {
    assertOk(fabric !== null, "a multi-node replica has a fabric");
    for (const s of shards) assertEquals(s.fabric, fabric, "every shard on the same fabric");
  }
  for (const s of shards) {
    const n = state.byId.get(s.node);
    assertOk(n !== undefined, `unknown node ${s.node}`);
    // 6. ready, selector, fp8, engine
    assertEquals(n.state, "ready", `node ${n.id} must be ready`);
    const engines = Object.keys(n.engine_versions ?? {});
    assertOk(
      engines.length === 0 || engines.includes(p.engine),
      `engine ${p.engine} on node ${n.id}, which reports ${fmt(engines)}`,
    );
    for (const [k, v] of Object.entries(p.node_selector)) {
      assertEquals(n.labels[k], v, `node ${n.id} must match selector ${k}=${v}`);
    }
    const own = classGpus(n, p.gpu_class);
    if (p.quantization === "fp8") {
      assertOk(
        own.every((g) => ccAtLeast89(g.compute_capability)),
        `fp8 on node ${n.id} whose ${p.gpu_class} GPUs report ${
          fmt(own.map((g) => g.compute_capability))
        }`,
      );
    }
    // 2. HCAs of exactly that fabric
    if (p.nodes === 1) {
      assertEquals(s.fabric, null, "single-node replicas have no fabric");
      assertEquals(s.hcas, []);
      assertEquals(s.hca_ports, []);
    } else {
      const att = n.fabrics.find((f) => f.fabric === fabric);
      assertOk(att !== undefined, `node ${n.id} is not on fabric ${fabric}`);
      assertEquals(s.hcas, att.hcas, `node ${n.id}: the HCAs of ${fabric} and only those`);
      assertEquals(s.hca_ports, att.ports, `node ${n.id}: the ports of ${fabric}`);
    }
    // 3, 4, 5, 7. class, health, allocation, no reuse, count
    assertEquals(s.gpu_class, p.gpu_class);
    assertEquals(s.gpu_indices.length, p.gpus_per_node, `node ${n.id}: gpus_per_node GPUs`);
    assertEquals(new Set(s.gpu_indices).size, s.gpu_indices.length, "no GPU twice in a shard");
    const taken = state.taken.get(n.id)!;
    for (const i of s.gpu_indices) {
      const g = n.gpus.find((x) => x.index === i);
      assertOk(g !== undefined, `node ${n.id} has no GPU ${i}`);
      assertEquals(g.class, p.gpu_class, `node ${n.id} GPU ${i} is of another class`);
      assertEquals(g.health.problems, [], `node ${n.id} GPU ${i} is unhealthy`);
      assertOk(!taken.has(i), `node ${n.id} GPU ${i} is already allocated`);
    }
    checkGpuChoice(state, n, p, s.gpu_indices);
  }
  checkNodeChoice(state, dep, p, shards);
}

/** Every property of one result, against the state it was placed on. */
function checkResult(
  state: State,
  dep: Deployment,
  replicaId: string,
  result: PlacementResult,
  detail: boolean,
): void {
  assertEquals(result.replica_id, replicaId);
  assertEquals(result.deployment, dep.name);
  const attempts = result.explanation.profiles;
  const fits = dep.profiles.map((p) => profileFits(state, p));
  if (result.status === "placed") {
    const used = dep.profiles.findIndex((p) => p.name === result.profile);
    assertOk(used >= 0, `unknown profile ${result.profile}`);
    // 8. no higher-priority profile would have fit; the chosen one does
    for (let j = 0; j < used; j++) {
      assertOk(!fits[j], `profile ${dep.profiles[j].name} fits but ${result.profile} was used`);
    }
    assertOk(fits[used], `profile ${result.profile} was used but cannot fit`);
    const p = dep.profiles[used];
    assertEquals(result.engine, p.engine);
    assertEquals(
      attempts.map((a) => a.profile),
      dep.profiles.slice(0, used + 1).map((q) => q.name),
    );
    for (let j = 0; j < used; j++) {
      checkNotFitting(state, dep.profiles[j], attempts[j], detail);
      assertOk(
        result.explanation.summary.includes(
          `profile "${dep.profiles[j].name}": ${attempts[j].summary}`,
        ),
        `summary ${fmt(result.explanation.summary)} must say why ${
          dep.profiles[j].name
        } did not fit`,
      );
    }
    checkFitting(state, p, attempts[used], detail);
    checkShards(state, dep, p, replicaId, result.shards);
  } else {
    for (const [j, p] of dep.profiles.entries()) {
      assertOk(!fits[j], `unschedulable, but profile ${p.name} fits`);
    }
    assertEquals(attempts.map((a) => a.profile), dep.profiles.map((q) => q.name));
    for (const [j, p] of dep.profiles.entries()) checkNotFitting(state, p, attempts[j], detail);
  }
}

/** The nodes with a placement written in as allocations (what applyPlacement stands for). */
function withAllocations(nodes: ClusterNode[], dep: string, r: PlacementResult): ClusterNode[] {
  if (r.status !== "placed") return nodes;
  return nodes.map((n) => {
    const mine = r.shards.filter((s) => s.node === n.id);
    if (mine.length === 0) return n;
    return {
      ...n,
      allocations: [
        ...n.allocations,
        ...mine.map((s) => ({
          replica_id: r.replica_id,
          shard_id: s.shard_id,
          deployment: dep,
          gpu_indices: s.gpu_indices,
        })),
      ],
    };
  });
}

// ---------------------------------------------------------------------------
// Properties

Deno.test("placeReplica: every placement keeps the hard constraints and is explained", () => {
  let placed = 0;
  let multi = 0;
  let fallback = 0;
  let unschedulable = 0;
  fc.assert(
    fc.property(clusterArb, deploymentArb, shuffleKeysArb, (nodes, dep, keys) => {
      const before = structuredClone(nodes);
      const result = placeReplica(nodes, dep, "r-1", { detail: "full" });
      assertEquals(nodes, before, "placement must not change its input");
      checkResult(initialState(nodes, dep.name), dep, "r-1", result, true);
      // 9. determinism: same input, same answer; node order does not matter
      assertEquals(placeReplica(nodes, dep, "r-1", { detail: "full" }), result, "same input");
      assertEquals(
        placeReplica(shuffled(nodes, keys), dep, "r-1", { detail: "full" }),
        result,
        "shuffled input",
      );
      // without detail: the same decision, counts and fabrics, no per-node list
      const plain = placeReplica(nodes, dep, "r-1");
      assertEquals(plain.status, result.status);
      const strip = (r: PlacementResult, keep: "groups" | "none") =>
        r.explanation.profiles.map(({ nodes: _n, groups, ...a }) =>
          keep === "groups" ? { ...a, groups } : a
        );
      for (const a of plain.explanation.profiles) {
        assertEquals([a.nodes, a.groups], [undefined, undefined]);
      }
      assertEquals(strip(plain, "none"), strip(result, "none"));
      // grouped: the same groups as full, without the per-node list
      const grouped = placeReplica(nodes, dep, "r-1", { detail: "grouped" });
      for (const a of grouped.explanation.profiles) assertEquals(a.nodes, undefined);
      assertEquals(strip(grouped, "groups"), strip(result, "groups"));
      if (result.status === "placed") {
        placed++;
        assertEquals(plain.status === "placed" && plain.shards, result.shards);
        if (result.shards.length > 1) multi++;
        if (result.profile !== dep.profiles[0].name) fallback++;
      } else unschedulable++;
    }),
    { numRuns: 500 },
  );
  // The generators must exercise every branch, or the properties prove little.
  assertOk(
    placed > 50 && multi > 10 && fallback > 10 && unschedulable > 50,
    fmt({
      placed,
      multi,
      fallback,
      unschedulable,
    }),
  );
});

Deno.test("place: a sequence of replicas never reuses a GPU and each step is explained", () => {
  let steps = 0;
  let placedAfterFirst = 0;
  fc.assert(
    fc.property(
      clusterArb,
      deploymentArb,
      fc.integer({ min: 2, max: 6 }),
      (nodes, dep, replicas) => {
        const index = indexCluster(nodes);
        const state = initialState(nodes, dep.name);
        let snapshot = nodes;
        for (let r = 1; r <= replicas; r++) {
          const id = `r-${r}`;
          const result = place(index, dep, id, { detail: "full" });
          checkResult(state, dep, id, result, true);
          assertEquals(
            place(index, dep, id, { detail: "full" }),
            result,
            "place() changes nothing",
          );
          // applyPlacement ≡ writing the earlier placements into the snapshot
          assertEquals(
            placeReplica(snapshot, dep, id, { detail: "full" }),
            result,
            "index ≡ snapshot",
          );
          steps++;
          if (result.status !== "placed") break;
          if (r > 1) placedAfterFirst++;
          applyPlacement(index, dep.name, result.shards);
          recordPlacement(state, result.shards);
          snapshot = withAllocations(snapshot, dep.name, result);
        }
      },
    ),
    { numRuns: 250 },
  );
  assertOk(steps > 400 && placedAfterFirst > 50, fmt({ steps, placedAfterFirst }));
});

/** A deployment of one multi-node profile: 2 or 3 nodes of one class. */
const multiNodeDeploymentArb: fc.Arbitrary<Deployment> = fc.record({
  cls: fc.constantFrom(...CLASSES),
  nodes: fc.constantFrom(2, 3),
  gpn: fc.constantFrom(1, 2, 4, 8),
  spread: fc.boolean(),
}).map(({ cls, nodes, gpn, spread }) => ({
  name: "dep",
  model: "org/model",
  served_model_name: "dep",
  replicas: 1,
  placement: spread ? "spread" : "pack",
  profiles: [{
    name: "multi",
    engine: "vllm",
    gpu_class: cls,
    tensor_parallel: gpn,
    pipeline_parallel: nodes,
    nodes,
    gpus_per_node: gpn,
    quantization: "none",
    engine_args: [],
    engine_options: {},
    env: {},
    node_selector: {},
  }],
}));

Deno.test("place: no fitting fabric has more per-node bandwidth than the chosen one", () => {
  let contested = 0;
  let slowerPassedOver = 0;
  fc.assert(
    fc.property(clusterArb, multiNodeDeploymentArb, (nodes, dep) => {
      const result = placeReplica(nodes, dep, "r-1");
      const p = dep.profiles[0];
      const options = fittingFabrics(initialState(nodes, dep.name), dep, p);
      if (result.status !== "placed") {
        assertEquals(options, [], "unschedulable, but a fabric has enough eligible nodes");
        return;
      }
      const chosen = options.find((o) => o.fabric === result.shards[0].fabric);
      assertOk(chosen !== undefined, `fabric ${result.shards[0].fabric} cannot fit the replica`);
      for (const o of options) {
        assertOk(
          (o.gbps ?? -1) <= (chosen.gbps ?? -1),
          `fabric ${o.fabric} gives ${o.gbps} Gb/s per node, more than chosen ${chosen.fabric}'s ${chosen.gbps}`,
        );
      }
      // The explanation reports the same figures, and names what it passed over.
      const reported = result.explanation.profiles[0].fabrics ?? [];
      assertEquals(
        reported.filter((f) => f.bandwidth !== null).map((
          f,
        ) => [f.fabric, f.bandwidth!.per_node_gbps])
          .sort(),
        options.map((o) => [o.fabric, o.gbps]).sort(),
      );
      assertEquals(reported[0].fabric, chosen.fabric);
      assertOk(reported[0].chosen && reported.slice(1).every((f) => !f.chosen));
      for (const f of reported.slice(1, 4)) {
        assertOk(
          result.explanation.summary.includes(`fabric ${f.fabric} passed over: ${f.why}`),
          `summary ${fmt(result.explanation.summary)} must say why ${f.fabric} was passed over`,
        );
      }
      if (options.length > 1) contested++;
      if (options.some((o) => (o.gbps ?? -1) < (chosen.gbps ?? -1))) slowerPassedOver++;
    }),
    { numRuns: 400 },
  );
  assertOk(contested > 30 && slowerPassedOver > 15, fmt({ contested, slowerPassedOver }));
});
