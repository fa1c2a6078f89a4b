/**
 * Model-based property test of the inventory store (design §4, §15): random
 * sequences of registrations, heartbeats, operator actions, clock advances
 * and allocations run against the store and against a small Map-based model
 * of design §4, and after every command the two must agree. Refused commands
 * must leave the store exactly as it was.
 */
import fc from "fast-check";
import { assertEquals, assertOk } from "./assert.ts";
import type { Gpu } from "../discovery/types.ts";
import {
  type AllocatedGpuProblem,
  type Allocation,
  AllocationError,
  InventoryStore,
  type LivenessThresholds,
  NodeReportError,
  type NodeState,
  UnknownNodeError,
} from "../inventory/mod.ts";

const THRESHOLDS: LivenessThresholds = {
  heartbeat_interval_ms: 10,
  unreachable_after_ms: 30,
  lost_after_ms: 100,
};

/** n3 is never registered by most runs' early commands; n10 checks natural order. */
const NODE_IDS = ["n1", "n2", "n3", "n10"];
const NODE_ORDER = new Map(NODE_IDS.map((id, i) => [id, i]));
const REPLICAS = ["r-1", "r-2", "r-3"];
const SHARDS = ["0", "1", "2"];
const MAX_GPU = 5;

// ---------------------------------------------------------------- commands

type GpuSpec = { index: number; bad: boolean };

type Command =
  | { op: "upsert"; node: string; gpus: GpuSpec[]; label: string }
  | { op: "heartbeat"; node: string; gpus: GpuSpec[] | null }
  | { op: "cordon" | "uncordon" | "drain" | "removeNode"; node: string }
  | { op: "advance"; ms: number }
  | {
    op: "allocate";
    node: string;
    replica: string;
    shard: string;
    indices: number[];
  }
  | { op: "releaseShard"; replica: string; shard: string }
  | { op: "releaseReplica"; replica: string };

const nodeArb = fc.constantFrom(...NODE_IDS);
/** Each of GPUs 0…MAX_GPU present with probability 4/5, one in four of those unhealthy. */
const wellFormedGpusArb: fc.Arbitrary<GpuSpec[]> = fc.array(
  fc.constantFrom("healthy", "healthy", "healthy", "unhealthy", "absent"),
  { minLength: MAX_GPU + 1, maxLength: MAX_GPU + 1 },
).map((states) =>
  states.flatMap((state, index) =>
    state === "absent" ? [] : [{ index, bad: state === "unhealthy" }]
  )
);
/** Mostly well-formed GPU lists; sometimes none, sometimes one index twice (must be refused). */
const gpusArb: fc.Arbitrary<GpuSpec[]> = fc.oneof(
  { weight: 8, arbitrary: wellFormedGpusArb },
  { weight: 1, arbitrary: fc.constant<GpuSpec[]>([]) },
  {
    weight: 1,
    arbitrary: wellFormedGpusArb.filter((gpus) => gpus.length > 0).chain((gpus) =>
      fc.constantFrom(...gpus).map((twice) => [...gpus, { ...twice, bad: !twice.bad }])
    ),
  },
);

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("upsert" as const),
      node: nodeArb,
      gpus: gpusArb,
      label: fc.constantFrom("a", "b"),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("heartbeat" as const),
      node: nodeArb,
      gpus: fc.option(gpusArb, { nil: null }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constantFrom("cordon" as const, "uncordon" as const, "drain" as const),
      node: nodeArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("removeNode" as const), node: nodeArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("advance" as const),
      // Mostly forward, sometimes a clock step back.
      ms: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 0, max: 60 }) }, {
        weight: 1,
        arbitrary: fc.integer({ min: -40, max: -1 }),
      }),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant("allocate" as const),
      node: nodeArb,
      // Now and then an empty replica id, which must be refused.
      replica: fc.oneof({ weight: 15, arbitrary: fc.constantFrom(...REPLICAS) }, {
        weight: 1,
        arbitrary: fc.constant(""),
      }),
      shard: fc.constantFrom(...SHARDS),
      // Mostly distinct indices; sometimes none or one twice, which must be refused.
      indices: fc.oneof(
        {
          weight: 8,
          arbitrary: fc.uniqueArray(fc.integer({ min: 0, max: MAX_GPU }), {
            minLength: 1,
            maxLength: 3,
          }),
        },
        { weight: 1, arbitrary: fc.array(fc.integer({ min: 0, max: MAX_GPU }), { maxLength: 3 }) },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("releaseShard" as const),
      replica: fc.constantFrom(...REPLICAS),
      shard: fc.constantFrom(...SHARDS),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("releaseReplica" as const),
      replica: fc.constantFrom(...REPLICAS),
    }),
  },
);

/**
 * A run: most nodes registered first (so that allocations have somewhere to
 * go; n3 is left to the random commands), then up to 80 random commands.
 */
const runArb: fc.Arbitrary<Command[]> = fc.tuple(
  fc.tuple(gpusArb, gpusArb, gpusArb),
  fc.array(commandArb, { minLength: 1, maxLength: 80, size: "max" }),
).map(([[g1, g2, g10], rest]) => [
  { op: "upsert" as const, node: "n1", gpus: g1, label: "a" },
  { op: "upsert" as const, node: "n2", gpus: g2, label: "a" },
  { op: "upsert" as const, node: "n10", gpus: g10, label: "a" },
  ...rest,
]);

function makeGpu(spec: GpuSpec): Gpu {
  return {
    index: spec.index,
    uuid: `GPU-${spec.index}`,
    name: "NVIDIA A100-SXM4-80GB",
    class: "a100-80g",
    memory_total_mb: 81920,
    memory_used_mb: 0,
    compute_capability: "8.0",
    numa_node: null,
    pci_bus_id: null,
    driver_version: null,
    cuda_version: null,
    nvlink_peers: [],
    health: {
      ecc_errors: spec.bad ? 1 : 0,
      temperature_c: null,
      problems: spec.bad ? ["ECC"] : [],
    },
  };
}

// ------------------------------------------------------------------- model

const LIVENESS_RANK = { ready: 0, unreachable: 1, lost: 2 } as const;
type ModelLiveness = keyof typeof LIVENESS_RANK;

interface ModelNode {
  gpus: GpuSpec[];
  label: string;
  lastSeen: number;
  liveness: ModelLiveness;
  intent: "none" | "cordoned" | "draining";
}

interface ModelAlloc {
  node: string;
  replica: string;
  shard: string;
  indices: number[];
}

/** Design §4 in as few lines as possible: what the store must agree with. */
class Model {
  now = 0;
  nodes = new Map<string, ModelNode>();
  /** `${replica}|${shard}` → allocation. */
  allocs = new Map<string, ModelAlloc>();

  state(id: string): NodeState {
    const n = this.nodes.get(id)!;
    if (n.liveness !== "ready") return n.liveness;
    return n.intent === "none" ? "ready" : n.intent;
  }

  allocsOn(node: string): ModelAlloc[] {
    return [...this.allocs.values()].filter((a) => a.node === node);
  }

  free(node: string): number[] {
    const taken = new Set(this.allocsOn(node).flatMap((a) => a.indices));
    return this.nodes.get(node)!.gpus.filter((g) => !g.bad && !taken.has(g.index))
      .map((g) => g.index).sort((a, b) => a - b);
  }
}

/** What a command should do: its result, or the refusal it should get. */
type Outcome = { ok: unknown } | { refused: string };

function validGpus(gpus: GpuSpec[]): boolean {
  return new Set(gpus.map((g) => g.index)).size === gpus.length;
}

/** Allocated GPUs of a node that are missing or unhealthy, as sorted keys. */
function gpuProblems(m: Model, node: string): string[] {
  const gpus = m.nodes.get(node)!.gpus;
  return m.allocsOn(node).flatMap((a) =>
    a.indices.flatMap((i) => {
      const g = gpus.find((g) => g.index === i);
      const problem = g === undefined ? "missing" : g.bad ? "unhealthy" : null;
      return problem === null ? [] : [`${a.replica}|${a.shard}|${i}|${problem}`];
    })
  ).sort();
}

/** fast-check's records have no prototype; the model keeps plain objects. */
function plainGpus(gpus: GpuSpec[]): GpuSpec[] {
  return gpus.map((g) => ({ index: g.index, bad: g.bad }));
}

function applyToModel(m: Model, c: Command): Outcome {
  switch (c.op) {
    case "upsert": {
      if (!validGpus(c.gpus)) return { refused: "report" };
      const prev = m.nodes.get(c.node);
      m.nodes.set(c.node, {
        gpus: plainGpus(c.gpus),
        label: c.label,
        lastSeen: Math.max(prev?.lastSeen ?? -Infinity, m.now),
        liveness: "ready",
        intent: prev?.intent ?? "none",
      });
      return { ok: gpuProblems(m, c.node) };
    }
    case "heartbeat": {
      const n = m.nodes.get(c.node);
      if (n === undefined) return { refused: "unknown-node" };
      if (c.gpus !== null && !validGpus(c.gpus)) return { refused: "report" };
      if (c.gpus !== null) n.gpus = plainGpus(c.gpus);
      n.lastSeen = Math.max(n.lastSeen, m.now);
      n.liveness = "ready";
      return { ok: c.gpus === null ? [] : gpuProblems(m, c.node) };
    }
    case "cordon":
    case "uncordon":
    case "drain": {
      const n = m.nodes.get(c.node);
      if (n === undefined) return { refused: "unknown-node" };
      if (c.op === "drain") n.intent = "draining";
      if (c.op === "uncordon") n.intent = "none";
      if (c.op === "cordon" && n.intent === "none") n.intent = "cordoned";
      return { ok: null };
    }
    case "advance": {
      m.now += c.ms;
      const transitions = [];
      for (const [id, n] of m.nodes) {
        const silent = m.now - n.lastSeen;
        const due: ModelLiveness = silent >= THRESHOLDS.lost_after_ms
          ? "lost"
          : silent >= THRESHOLDS.unreachable_after_ms
          ? "unreachable"
          : "ready";
        if (LIVENESS_RANK[due] > LIVENESS_RANK[n.liveness]) {
          const from = m.state(id);
          n.liveness = due;
          transitions.push({ node: id, from, to: m.state(id) });
        }
      }
      return { ok: transitions.sort((a, b) => NODE_ORDER.get(a.node)! - NODE_ORDER.get(b.node)!) };
    }
    case "allocate": {
      if (c.replica === "") return { refused: "empty-id" };
      const n = m.nodes.get(c.node);
      if (n === undefined) return { refused: "unknown-node" };
      if (c.indices.length === 0) return { refused: "no-gpus" };
      if (m.allocs.has(`${c.replica}|${c.shard}`)) return { refused: "duplicate-shard" };
      const taken = new Set(m.allocsOn(c.node).flatMap((a) => a.indices));
      const seen = new Set<number>();
      for (const i of c.indices) {
        const g = n.gpus.find((g) => g.index === i);
        if (g === undefined) return { refused: "unknown-gpu" };
        if (seen.has(i)) return { refused: "duplicate-gpu" };
        seen.add(i);
        if (g.bad) return { refused: "unhealthy-gpu" };
        if (taken.has(i)) return { refused: "gpu-allocated" };
      }
      const a = { node: c.node, replica: c.replica, shard: c.shard, indices: c.indices };
      m.allocs.set(`${c.replica}|${c.shard}`, a);
      return { ok: [a] };
    }
    case "releaseShard": {
      const a = m.allocs.get(`${c.replica}|${c.shard}`);
      m.allocs.delete(`${c.replica}|${c.shard}`);
      return { ok: a === undefined ? [] : [a] };
    }
    case "releaseReplica": {
      const gone = [...m.allocs].filter(([, a]) => a.replica === c.replica);
      for (const [k] of gone) m.allocs.delete(k);
      return { ok: gone.map(([, a]) => a) };
    }
    case "removeNode": {
      if (!m.nodes.has(c.node)) return { refused: "unknown-node" };
      const gone = [...m.allocs].filter(([, a]) => a.node === c.node);
      for (const [k] of gone) m.allocs.delete(k);
      m.nodes.delete(c.node);
      return { ok: gone.map(([, a]) => a) };
    }
  }
}

// ------------------------------------------------------------------- store

function refusal(e: unknown): string {
  if (e instanceof UnknownNodeError) return "unknown-node";
  if (e instanceof NodeReportError) return "report";
  if (e instanceof AllocationError) return e.reason;
  throw e;
}

/** Allocations as the model writes them, in one canonical order, to compare as sets. */
function canonical(allocs: { node: string; replica: string; shard: string; indices: number[] }[]) {
  return allocs.map((a) => JSON.stringify([a.node, a.replica, a.shard, a.indices])).sort();
}

function problemKeys(problems: AllocatedGpuProblem[]): string[] {
  return problems.map((p) => `${p.replica_id}|${p.shard_id}|${p.gpu_index}|${p.problem}`).sort();
}

function fromStore(node: string, a: Allocation) {
  return { node, replica: a.replica_id, shard: a.shard_id, indices: a.gpu_indices };
}

function applyToStore(s: InventoryStore, m: Model, c: Command): Outcome {
  try {
    switch (c.op) {
      case "upsert": {
        const result = s.upsertNode({
          id: c.node,
          hostname: `host-${c.node}`,
          mgmt_addr: "10.0.0.1",
          labels: { rack: c.label },
          gpus: c.gpus.map(makeGpu),
          fabrics: [],
          agent_version: "0.1.0",
          engine_versions: {},
        }, m.now);
        return { ok: problemKeys(result.allocated_gpu_problems) };
      }
      case "heartbeat": {
        const gpus = c.gpus === null ? undefined : c.gpus.map(makeGpu);
        return { ok: problemKeys(s.heartbeat(c.node, m.now, gpus).allocated_gpu_problems) };
      }
      case "cordon":
      case "uncordon":
      case "drain":
        s[c.op](c.node);
        return { ok: null };
      case "advance":
        // The model has already advanced m.now.
        return { ok: s.refresh(m.now) };
      case "allocate": {
        const a = s.allocate({
          node: c.node,
          replica_id: c.replica,
          shard_id: c.shard,
          deployment: "d",
          gpu_indices: c.indices,
        });
        return { ok: [fromStore(a.node, a)] };
      }
      case "releaseShard": {
        const a = s.releaseShard(c.replica, c.shard);
        return { ok: a === undefined ? [] : [fromStore(a.node, a)] };
      }
      case "releaseReplica":
        return { ok: s.releaseReplica(c.replica).map((a) => fromStore(a.node, a)) };
      case "removeNode":
        return { ok: s.removeNode(c.node).map((a) => fromStore(a.node, a)) };
    }
  } catch (e) {
    return { refused: refusal(e) };
  }
}

// ------------------------------------------------------------------ checks

function checkAgainstModel(s: InventoryStore, m: Model, where: string): void {
  const ids = [...m.nodes.keys()].sort((a, b) => NODE_ORDER.get(a)! - NODE_ORDER.get(b)!);
  const listed = s.listNodes();
  assertEquals(listed.map((n) => n.id), ids, `${where}: node ids in natural order`);
  assertEquals(s.snapshot().map((n) => n.id), ids, `${where}: snapshot ids`);
  for (const node of listed) {
    const mn = m.nodes.get(node.id)!;
    const at = `${where}: node ${node.id}`;
    assertEquals(node.state, m.state(node.id), `${at} state`);
    assertEquals(node.liveness, mn.liveness, `${at} liveness`);
    assertEquals(node.intent, mn.intent, `${at} intent`);
    assertEquals(node.last_seen_ms, mn.lastSeen, `${at} last seen`);
    assertEquals(node.labels, { rack: mn.label }, `${at} labels`);
    assertEquals(
      node.gpus.map((g) => ({ index: g.index, bad: g.health.problems.length > 0 })),
      mn.gpus,
      `${at} GPUs`,
    );
    assertEquals(
      canonical(node.allocations.map((a) => fromStore(node.id, a))),
      canonical(m.allocsOn(node.id)),
      `${at} allocations`,
    );
    const free = s.freeGpus(node.id);
    assertEquals(free, m.free(node.id), `${at} free GPUs`);

    // Invariants, checked on the store alone (design §1.1 #4, §4).
    const held = node.allocations.flatMap((a) => a.gpu_indices);
    assertEquals(new Set(held).size, held.length, `${at}: a GPU is held twice`);
    for (const i of free) {
      assertOk(!held.includes(i), `${at}: free GPU ${i} is allocated`);
      const g = node.gpus.find((g) => g.index === i);
      assertOk(g !== undefined && g.health.problems.length === 0, `${at}: free GPU ${i} unhealthy`);
    }
  }
}

function run(commands: Command[]): void {
  const s = new InventoryStore({ thresholds: THRESHOLDS });
  const m = new Model();
  commands.forEach((c, step) => {
    const where = `step ${step} ${JSON.stringify(c)}`;
    const before = { snapshot: s.snapshot(), nodes: s.listNodes() };
    const expected = applyToModel(m, c);
    const actual = applyToStore(s, m, c);
    if ("refused" in expected) {
      assertEquals(actual, expected, `${where}: outcome`);
      assertEquals(s.snapshot(), before.snapshot, `${where}: a refused command changed the store`);
      assertEquals(s.listNodes(), before.nodes, `${where}: a refused command changed the store`);
    } else if (c.op === "advance") {
      assertEquals(actual, expected, `${where}: transitions`);
    } else {
      assertOk("ok" in actual, `${where}: refused (${JSON.stringify(actual)}), model accepted`);
      if (c.op === "upsert" || c.op === "heartbeat") {
        assertEquals(actual.ok, expected.ok, `${where}: allocated GPU problems`);
      } else if (Array.isArray(expected.ok)) {
        assertEquals(canonical(actual.ok as ModelAlloc[]), canonical(expected.ok), where);
      }
    }
    // Design §1.3: nothing the agent sends clears a cordon or a drain.
    if (c.op === "upsert" || c.op === "heartbeat") {
      for (const n of before.nodes) {
        assertEquals(s.getNode(n.id)?.intent, n.intent, `${where}: agent changed intent`);
      }
    }
    checkAgainstModel(s, m, where);
  });
}

Deno.test("inventory store agrees with the design §4 model over random command sequences", () => {
  fc.assert(
    fc.property(runArb, run),
    { numRuns: 300 },
  );
});

Deno.test("the model test sees a store that disagrees with the model", () => {
  // Guard against a vacuous property: a sequence whose checks must fail if
  // the store let a re-registration clear a cordon.
  const s = new InventoryStore({ thresholds: THRESHOLDS });
  const m = new Model();
  const commands: Command[] = [
    { op: "upsert", node: "n1", gpus: [{ index: 0, bad: false }], label: "a" },
    { op: "cordon", node: "n1" },
  ];
  for (const c of commands) {
    applyToModel(m, c);
    applyToStore(s, m, c);
  }
  s.uncordon("n1"); // what a buggy re-registration would do
  let failed = false;
  try {
    checkAgainstModel(s, m, "sabotaged");
  } catch {
    failed = true;
  }
  assertOk(failed, "checkAgainstModel accepted a store whose cordon was cleared");
});
