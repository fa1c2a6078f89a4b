/**
 * A placement index over a cluster snapshot: per node and GPU class, the free
 * healthy GPUs, so that placing one replica on 10,000 nodes touches only the
 * nodes that have the class (design §16). It is a derived cache: `place()`
 * only reads it; {@link applyPlacement} updates it after a placement and
 * `releasePlacement` (placement/release.ts) after a release, so one index serves a whole
 * reconcile pass.
 *
 * @module
 */
import { fp8Capable } from "../deployment/quantization.ts";
import type { Gpu } from "../discovery/types.ts";
import type { Allocation, ClusterNode } from "../inventory/types.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import { compareNatural } from "../text/natural_order.ts";

const MIB = 2 ** 20;

/** One node's GPUs of one class. */
export interface ClassSlot {
  /** The GPUs of this class on the node, by index. */
  gpus: Gpu[];
  /** Indices of healthy, unallocated GPUs of this class, ascending. */
  free: number[];
  /** How many of them are allocated. */
  allocated: number;
  /** How many are unhealthy (and not allocated). */
  unhealthy: number;
  /** True when every GPU of the class reports compute capability ≥ 8.9 (fp8, design §6.2). */
  fp8Capable: boolean;
  /** The compute capabilities reported, for messages ("8.0", "unknown"). */
  computeCapabilities: string[];
  /**
   * The least memory of the class's GPUs here, in bytes, as the driver
   * reports it; null when some GPU reports none (the class name's size is
   * used then, models/memory_estimate.ts `classMemoryBytes`).
   */
  memoryBytes: number | null;
  /** This node's position in its class's list (`ClusterIndex.byClass`, `freeByClass`). */
  pos: number;
}

/** A node with its per-class slots. */
export interface IndexedNode {
  /** The node as given (not copied: the index never changes it). */
  node: ClusterNode;
  /** GPU class → slot. */
  classes: Map<string, ClassSlot>;
  /** Deployment → number of its replicas with a shard here (for `spread`). */
  deployments: Map<string, number>;
  /** GPU indices allocated here, including by placements applied to the index. */
  allocatedIndices: Set<number>;
  /**
   * The engines the node reports (design §14); null when it reports none,
   * which means unknown (an older agent, a cluster file without
   * `engine_versions`), not "no engine": such a node takes any engine.
   */
  engines: ReadonlySet<string> | null;
  /**
   * What the node's agent reports of its model cache (`insufficient_disk`,
   * the preference for holders); null when it reports none (an older agent,
   * a cluster file): such a node is neither refused for disk nor preferred.
   */
  cache: NodeModelCache | null;
}

/** A node's model cache as placement reads it (from the heartbeat's `model_cache`). */
export interface NodeModelCache {
  /** Bytes a new revision may take under the high watermark after evicting all it may; null: unknown. */
  roomBytes: number | null;
  /** `repo@commit` of every revision held complete. */
  holds: ReadonlySet<string>;
  /** `repo@commit` → bytes on disk of a revision being fetched (they need no new room). */
  partial: ReadonlyMap<string, number>;
  /**
   * Revisions (`diskKey` in placement/filters.ts) this node ran out of disk
   * fetching lately, each with why it is left out for them, in words: the
   * control plane's verdict (control/disk_full_backoff.ts). Absent: none.
   */
  backoff?: ReadonlyMap<string, string>;
}

/** A node together with its slot of one class: what placement iterates over. */
export interface ClassMember {
  /** The node. */
  n: IndexedNode;
  /** Its GPUs of the class. */
  slot: ClassSlot;
}

/** The index: every node, and per GPU class the nodes that have it, sorted by id. */
export interface ClusterIndex {
  /** All nodes, sorted by id. */
  nodes: IndexedNode[];
  /** Node id → node. */
  byId: Map<string, IndexedNode>;
  /** GPU class → nodes having at least one GPU of it, with their slot, sorted by id. */
  byClass: Map<string, ClassMember[]>;
  /**
   * GPU class → each member's number of free GPUs, by position in `byClass`:
   * `slot.free.length`, kept in one compact array so that the placement loop
   * reads neighbouring numbers instead of chasing a pointer per node.
   */
  freeByClass: Map<string, Int32Array>;
  /**
   * The model facts whoever built the index knows, by model and commit
   * (else revision; `factsKey` in models/model_facts.ts; the control plane's,
   * control/model_facts_book.ts): `place()` reads a
   * deployment's model here unless its options name facts. Absent: none known.
   */
  models?: ReadonlyMap<string, ModelFacts>;
  /**
   * The commit each deployment's model revision resolved to, by deployment
   * name (the control plane's `model_commit`): which revision a holder must
   * hold. Absent: none known, and no node is preferred as a holder.
   */
  commits?: ReadonlyMap<string, string>;
}

/** Options of {@link indexCluster}. */
export interface IndexOptions {
  /** See {@link ClusterIndex.models}. */
  models?: ReadonlyMap<string, ModelFacts>;
  /** See {@link ClusterIndex.commits}. */
  commits?: ReadonlyMap<string, string>;
  /** Node id → its model cache, as its agent last reported it; a node not listed reports none. */
  caches?: ReadonlyMap<string, NodeModelCache>;
}

/** Builds the index of a snapshot. Nodes are not copied; do not change them afterwards. */
export function indexCluster(
  nodes: readonly ClusterNode[],
  options: IndexOptions = {},
): ClusterIndex {
  const caches = options.caches;
  const index = assemble(
    [...nodes].sort((a, b) => compareIds(a.id, b.id)).map((n) =>
      indexNode(n, caches?.get(n.id) ?? null)
    ),
  );
  if (options.models !== undefined) index.models = options.models;
  if (options.commits !== undefined) index.commits = options.commits;
  return index;
}

/**
 * The index without the nodes in `avoid`, as if they were not in the
 * cluster, with every placement and release applied to `index` so far; a
 * copy, so `index` is left as it is.
 */
export function withoutNodes(index: ClusterIndex, avoid: ReadonlySet<string>): ClusterIndex {
  const copy = assemble(
    index.nodes.filter((n) => !avoid.has(n.node.id)).map((n) => ({
      node: n.node,
      classes: new Map(
        [...n.classes].map(([cls, slot]) => [cls, { ...slot, free: [...slot.free], pos: -1 }]),
      ),
      deployments: new Map(n.deployments),
      allocatedIndices: new Set(n.allocatedIndices),
      engines: n.engines,
      cache: n.cache,
    })),
  );
  if (index.models !== undefined) copy.models = index.models;
  if (index.commits !== undefined) copy.commits = index.commits;
  return copy;
}

/** The index of nodes already indexed and sorted by id. */
function assemble(indexed: IndexedNode[]): ClusterIndex {
  const byId = new Map<string, IndexedNode>();
  const byClass = new Map<string, ClassMember[]>();
  for (const n of indexed) {
    if (byId.has(n.node.id)) {
      throw new RangeError(`Cannot index cluster: node id ${n.node.id} appears twice`);
    }
    byId.set(n.node.id, n);
    for (const [cls, slot] of n.classes) {
      let list = byClass.get(cls);
      if (list === undefined) byClass.set(cls, list = []);
      slot.pos = list.length;
      list.push({ n, slot });
    }
  }
  const freeByClass = new Map<string, Int32Array>();
  for (const [cls, list] of byClass) {
    freeByClass.set(cls, Int32Array.from(list, (m) => m.slot.free.length));
  }
  return { nodes: indexed, byId, byClass, freeByClass };
}

function indexNode(node: ClusterNode, cache: NodeModelCache | null): IndexedNode {
  const allocatedIndices = new Set<number>();
  const deployments = new Map<string, number>();
  const seenReplicas = new Set<string>();
  for (const a of node.allocations) {
    for (const i of a.gpu_indices) allocatedIndices.add(i);
    countDeployment(deployments, seenReplicas, a);
  }
  const classes = new Map<string, ClassSlot>();
  for (const gpu of node.gpus) {
    if (gpu.class === null) continue;
    let slot = classes.get(gpu.class);
    if (slot === undefined) {
      slot = {
        gpus: [],
        free: [],
        allocated: 0,
        unhealthy: 0,
        fp8Capable: true,
        computeCapabilities: [],
        memoryBytes: Infinity,
        pos: -1, // set by indexCluster
      };
      classes.set(gpu.class, slot);
    }
    slot.gpus.push(gpu);
    if (allocatedIndices.has(gpu.index)) slot.allocated++;
    else if (gpu.health.problems.length > 0) slot.unhealthy++;
    else slot.free.push(gpu.index);
    slot.fp8Capable &&= fp8Capable(gpu.compute_capability);
    slot.memoryBytes = gpu.memory_total_mb === null || slot.memoryBytes === null
      ? null
      : Math.min(slot.memoryBytes, gpu.memory_total_mb * MIB);
    const cc = gpu.compute_capability ?? "unknown";
    if (!slot.computeCapabilities.includes(cc)) slot.computeCapabilities.push(cc);
  }
  for (const slot of classes.values()) {
    slot.free.sort((a, b) => a - b);
    slot.gpus.sort((a, b) => a.index - b.index);
  }
  const reported = Object.keys(node.engine_versions ?? {});
  const engines = reported.length === 0 ? null : new Set(reported);
  return { node, classes, deployments, allocatedIndices, engines, cache };
}

function countDeployment(counts: Map<string, number>, seen: Set<string>, a: Allocation): void {
  if (a.deployment === undefined || a.deployment === null || seen.has(a.replica_id)) return;
  seen.add(a.replica_id);
  counts.set(a.deployment, (counts.get(a.deployment) ?? 0) + 1);
}

/** What {@link applyPlacement} needs of a placement. */
export interface AppliedShard {
  /** Node id. */
  node: string;
  /** GPUs taken. */
  gpu_indices: number[];
  /** Their class. */
  gpu_class: string;
}

/**
 * Records a placement in the index (not in the nodes), so the next `place()`
 * sees those GPUs as taken and the deployment as present on those nodes.
 *
 * @throws {RangeError} When a shard names an unknown node or a GPU that is not free.
 */
export function applyPlacement(
  index: ClusterIndex,
  deployment: string,
  shards: readonly AppliedShard[],
): void {
  const touched = new Set<IndexedNode>();
  for (const s of shards) {
    const n = index.byId.get(s.node);
    const slot = n?.classes.get(s.gpu_class);
    if (n === undefined || slot === undefined) {
      throw new RangeError(`Cannot apply placement: node ${s.node} has no ${s.gpu_class} GPUs`);
    }
    for (const i of s.gpu_indices) {
      const at = slot.free.indexOf(i);
      if (at === -1) {
        throw new RangeError(`Cannot apply placement: GPU ${i} of ${s.node} is not free`);
      }
      slot.free.splice(at, 1);
      index.freeByClass.get(s.gpu_class)![slot.pos] = slot.free.length;
      slot.allocated++;
      n.allocatedIndices.add(i);
    }
    touched.add(n);
  }
  for (const n of touched) n.deployments.set(deployment, (n.deployments.get(deployment) ?? 0) + 1);
}

/**
 * Orders ids so that `node-2` sorts before `node-10` (ties break on node id,
 * design §7): the one natural order, text/natural_order.ts.
 */
export const compareIds: (a: string, b: string) => number = compareNatural;
