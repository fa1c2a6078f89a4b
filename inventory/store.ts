/**
 * The control plane's inventory (design §4): registered nodes, their liveness
 * and the operator's intent (inventory/node_state.ts), and the allocations
 * that hold their GPUs. In memory; persistence is the control plane's store
 * (design §11), which records operator intent and allocations.
 *
 * Concurrency (design §4, "safe for concurrent use"): every method is
 * synchronous and contains no `await`, so each call runs to completion before
 * any other code on the event loop; a call is atomic. Keep it so: a mutation
 * that awaited halfway would let another caller see half of it.
 *
 * Copies (design §4): every value handed out is a deep copy, and every value
 * taken in is copied before it is kept, so nothing a caller does to an object
 * afterwards affects the store.
 *
 * A refused call throws and changes nothing: each method checks everything
 * before it changes anything.
 *
 * @example
 * ```ts
 * import { InventoryStore } from "./store.ts";
 * const store = new InventoryStore();
 * store.upsertNode({
 *   id: "n1", hostname: "gpu-1", mgmt_addr: "10.0.0.1", labels: {}, gpus: [], fabrics: [],
 *   agent_version: "0.1.0", engine_versions: {},
 * }, Date.now());
 * store.cordon("n1");
 * store.getNode("n1")?.state; // "cordoned"
 * ```
 *
 * @module
 */
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import {
  type Liveness,
  livenessAt,
  type LivenessThresholds,
  livenessThresholds,
  nodeState,
  type OperatorIntent,
  worseLiveness,
} from "./node_state.ts";
import type { Allocation, ClusterNode, NodeState } from "./types.ts";

/** What an agent sends when it registers (design §4, §10). */
export interface NodeRegistration {
  /** Stable node id. */
  id: string;
  /** Host name, for people. */
  hostname: string;
  /** Management address: the bootstrap interface's address (design §5.3). */
  mgmt_addr: string;
  /** The interface holding it (NCCL_SOCKET_IFNAME); omitted or null when unknown. */
  mgmt_interface?: string | null;
  /**
   * Labels from the agent's configuration, which the operator writes; a
   * re-registration replaces them.
   */
  labels: Record<string, string>;
  /** GPUs as discovery reports them (design §5.1). */
  gpus: Gpu[];
  /** Fabric attachments (design §5.2). */
  fabrics: FabricAttachment[];
  /** The agent's version. */
  agent_version: string;
  /** Engine name → installed version (design §14). */
  engine_versions: Record<string, string>;
}

/** A node as the inventory holds it: what placement sees plus liveness, intent and versions. */
export interface InventoryNode extends ClusterNode {
  /** What heartbeats say (design §4). */
  liveness: Liveness;
  /** What the operator wants; survives every re-registration (design §1.3). */
  intent: OperatorIntent;
  /** When the node was last heard from (registration or heartbeat), ms since the epoch. */
  last_seen_ms: number;
  /** The agent's version. */
  agent_version: string;
  /** Engine name → installed version (design §14). */
  engine_versions: Record<string, string>;
}

/** A request to record GPUs of one node as held by one shard (design §4). */
export interface AllocationRequest {
  /** The node id. */
  node: string;
  /** The replica the shard belongs to. */
  replica_id: string;
  /** The shard; a (replica, shard) pair is held at most once in the whole inventory. */
  shard_id: string;
  /** The replica's deployment, when known (used by `spread`). */
  deployment?: string | null;
  /** nvidia-smi indices of the GPUs to hold; at least one, each once. */
  gpu_indices: number[];
}

/** An allocation together with the node it is on. */
export interface NodeAllocation extends Allocation {
  /** The node id. */
  node: string;
}

/** A node's reported state changing (design §4). */
export interface StateTransition {
  /** The node id. */
  node: string;
  /** The state before. */
  from: NodeState;
  /** The state after. */
  to: NodeState;
}

/**
 * An allocated GPU that its node no longer reports, or reports unhealthy.
 * The allocation is kept: rebuilding the replica is the control plane's job
 * (design §5.4).
 */
export interface AllocatedGpuProblem {
  /** The node id. */
  node: string;
  /** The GPU's index. */
  gpu_index: number;
  /** The replica holding it. */
  replica_id: string;
  /** The shard holding it. */
  shard_id: string;
  /** `missing`: not in the node's GPU list any more; `unhealthy`: has health problems. */
  problem: "missing" | "unhealthy";
  /** In words, e.g. "GPU 3 on node n1, held by shard r-1/0, is unhealthy: 2 ECC errors". */
  message: string;
}

/** What a heartbeat did. */
export interface NodeUpdate {
  /** The node (a copy, made when read). */
  readonly node: InventoryNode;
  /** The state change, e.g. `lost` → `ready`; `null` when the state did not change. */
  transition: StateTransition | null;
  /**
   * Every allocated GPU that is now missing or unhealthy (level-triggered:
   * reported on each update while it lasts). Empty when no GPU list was sent.
   */
  allocated_gpu_problems: AllocatedGpuProblem[];
}

/** What a registration did. */
export interface RegistrationResult extends NodeUpdate {
  /** True when the node was not known before. */
  created: boolean;
}

/** Options of {@link InventoryStore}. */
export interface InventoryStoreOptions {
  /** Heartbeat thresholds; missing values take design §4's defaults. */
  thresholds?: Partial<LivenessThresholds>;
}

/** Raised when a call names a node the inventory does not have. */
export class UnknownNodeError extends Error {
  /** The node id asked for. */
  readonly node: string;
  /** Creates the error; `action` says what was attempted, e.g. "heartbeat". */
  constructor(action: string, node: string) {
    super(`Cannot ${action} node ${node}: not registered`);
    this.name = "UnknownNodeError";
    this.node = node;
  }
}

/** Raised for a registration or heartbeat whose content cannot be recorded. */
export class NodeReportError extends Error {
  /** Creates the error; `message` names the node and the offending value. */
  constructor(message: string) {
    super(message);
    this.name = "NodeReportError";
  }
}

/** Why an allocation was refused. */
export type AllocationRefusal =
  | "empty-id"
  | "no-gpus"
  | "duplicate-shard"
  | "unknown-gpu"
  | "duplicate-gpu"
  | "unhealthy-gpu"
  | "gpu-allocated";

/** Raised when an allocation is refused (design §1.1 #4); nothing is recorded. */
export class AllocationError extends Error {
  /** The reason, as a stable code. */
  readonly reason: AllocationRefusal;
  /** Creates the error. */
  constructor(reason: AllocationRefusal, message: string) {
    super(message);
    this.name = "AllocationError";
    this.reason = reason;
  }
}

interface NodeRecord {
  reg: NodeRegistration;
  liveness: Liveness;
  intent: OperatorIntent;
  lastSeenMs: number;
  /** Shard key → allocation. */
  allocations: Map<string, Allocation>;
}

const collator = new Intl.Collator("en", { numeric: true });

/** Natural order (`n2` before `n10`), ties broken by code units so the order is total. */
function compareNatural(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

function compareAllocations(a: Allocation, b: Allocation): number {
  return compareNatural(a.replica_id, b.replica_id) || compareNatural(a.shard_id, b.shard_id);
}

function shardKey(replicaId: string, shardId: string): string {
  return JSON.stringify([replicaId, shardId]);
}

/** `r-1/0` for placement's shard ids (which start with the replica id), else `r-1/<shard>`. */
function shardLabel(replicaId: string, shardId: string): string {
  return shardId.startsWith(`${replicaId}/`) ? shardId : `${replicaId}/${shardId}`;
}

function healthy(gpu: Gpu): boolean {
  return gpu.health.problems.length === 0;
}

function checkTime(nowMs: number, action: string): void {
  if (!Number.isFinite(nowMs)) {
    throw new RangeError(`Cannot ${action}: time ${nowMs} is not a finite number of ms`);
  }
}

/**
 * Checks a node's GPU report as registration and heartbeats do (indices
 * whole, non-negative and unique), so callers can refuse one before
 * changing anything. Throws {@link NodeReportError}.
 */
export function checkGpus(nodeId: string, gpus: readonly Gpu[], action: string): void {
  const seen = new Set<number>();
  for (const g of gpus) {
    if (!Number.isSafeInteger(g.index) || g.index < 0) {
      throw new NodeReportError(
        `Cannot ${action} node ${nodeId}: GPU index ${g.index} is not a non-negative integer`,
      );
    }
    if (seen.has(g.index)) {
      throw new NodeReportError(
        `Cannot ${action} node ${nodeId}: GPU index ${g.index} appears twice`,
      );
    }
    seen.add(g.index);
  }
}

/**
 * The control plane's inventory (design §4). See the module documentation for
 * its concurrency and copy guarantees.
 */
export class InventoryStore {
  readonly #nodes = new Map<string, NodeRecord>();
  /** Shard key → node id, for global shard uniqueness. */
  readonly #shardNodes = new Map<string, string>();
  /** Replica id → shard keys, for releasing replicas whole. */
  readonly #replicaShards = new Map<string, Set<string>>();
  readonly #thresholds: LivenessThresholds;

  /**
   * Creates an empty inventory.
   *
   * @throws {LivenessThresholdsError} For thresholds that cannot work.
   */
  constructor(options: InventoryStoreOptions = {}) {
    this.#thresholds = livenessThresholds(options.thresholds);
  }

  /** The heartbeat thresholds in use (a copy). */
  get thresholds(): LivenessThresholds {
    return { ...this.#thresholds };
  }

  /**
   * Records a node's registration at `nowMs`. A new node starts `ready` with
   * no operator intent. A known node gets the reported hardware, address,
   * labels and versions, is heard from (so `unreachable` or `lost` become
   * `ready` liveness), and keeps its operator intent and its allocations: a
   * re-registering agent never clears a cordon or a drain (design §1.3).
   * Allocated GPUs now missing or unhealthy are reported, their allocations
   * kept.
   *
   * @throws {NodeReportError} For an empty id or GPU indices that are not unique non-negative integers.
   */
  upsertNode(registration: NodeRegistration, nowMs: number): RegistrationResult {
    checkTime(nowMs, `register node ${registration.id}`);
    if (typeof registration.id !== "string" || registration.id === "") {
      throw new NodeReportError("Cannot register a node with an empty id");
    }
    checkGpus(registration.id, registration.gpus, "register");
    const reg = structuredClone(registration);
    const prev = this.#nodes.get(reg.id);
    if (prev === undefined) {
      const record: NodeRecord = {
        reg,
        liveness: "ready",
        intent: "none",
        lastSeenMs: nowMs,
        allocations: new Map(),
      };
      this.#nodes.set(reg.id, record);
      return {
        node: this.#view(record),
        transition: null,
        allocated_gpu_problems: [],
        created: true,
      };
    }
    const from = this.#state(prev);
    prev.reg = reg;
    this.#heard(prev, nowMs);
    return { ...this.#update(prev, from, true), created: false };
  }

  /**
   * Records a heartbeat at `nowMs`, with the node's current GPUs when sent.
   * Brings `unreachable` and `lost` liveness back to `ready`; a cordon or
   * drain stays (design §4). A node back from `lost` shows as a transition from
   * `lost`, so the caller can fence its old shards (design §10).
   *
   * @throws {UnknownNodeError} For a node that never registered.
   * @throws {NodeReportError} For GPU indices that are not unique non-negative integers.
   */
  heartbeat(id: string, nowMs: number, gpus?: Gpu[]): NodeUpdate {
    checkTime(nowMs, `heartbeat node ${id}`);
    const record = this.#get(id, "heartbeat");
    if (gpus !== undefined) checkGpus(id, gpus, "heartbeat");
    const from = this.#state(record);
    if (gpus !== undefined) record.reg.gpus = structuredClone(gpus);
    this.#heard(record, nowMs);
    return this.#update(record, from, gpus !== undefined);
  }

  /**
   * Cordons a node: no new placements; what runs keeps running (design §4). On
   * a draining node this changes nothing (a drain already excludes it).
   *
   * @throws {UnknownNodeError} For an unknown node.
   */
  cordon(id: string): InventoryNode {
    const record = this.#get(id, "cordon");
    if (record.intent === "none") record.intent = "cordoned";
    return this.#view(record);
  }

  /**
   * Starts draining a node: no new placements, and the control plane moves
   * its replicas off (design §4, §11). Supersedes a cordon.
   *
   * @throws {UnknownNodeError} For an unknown node.
   */
  drain(id: string): InventoryNode {
    const record = this.#get(id, "drain");
    record.intent = "draining";
    return this.#view(record);
  }

  /**
   * Clears the operator's intent, cordon and drain alike (as `kubectl
   * uncordon` ends a drain). Liveness is untouched: an unreachable node stays
   * unreachable.
   *
   * @throws {UnknownNodeError} For an unknown node.
   */
  uncordon(id: string): InventoryNode {
    const record = this.#get(id, "uncordon");
    record.intent = "none";
    return this.#view(record);
  }

  /**
   * Applies the liveness timers at `nowMs` (design §4) and returns the state
   * changes, by node id. Time only makes liveness worse: only a heartbeat or
   * registration brings a node back, so a clock stepping back revives
   * nothing. Allocations are not touched: releasing the replicas of a `lost`
   * node is the control plane's decision (design §5.4, §11).
   */
  refresh(nowMs: number): StateTransition[] {
    checkTime(nowMs, "refresh the inventory");
    const transitions: StateTransition[] = [];
    for (const record of this.#nodes.values()) {
      const liveness = worseLiveness(
        record.liveness,
        livenessAt(record.lastSeenMs, nowMs, this.#thresholds),
      );
      if (liveness === record.liveness) continue;
      const from = this.#state(record);
      record.liveness = liveness;
      transitions.push({ node: record.reg.id, from, to: this.#state(record) });
    }
    return transitions.sort((a, b) => compareNatural(a.node, b.node));
  }

  /**
   * Records GPUs of a node as held by one shard (design §4). Refused, changing
   * nothing, when: an id is empty; the node is unknown; no GPU is listed; the
   * (replica, shard) pair already holds GPUs anywhere; a GPU is unknown on
   * the node, listed twice, unhealthy, or already allocated (design §1.1 #4).
   * The node's state is placement's concern (design §7), not checked here.
   *
   * @throws {UnknownNodeError} For an unknown node.
   * @throws {AllocationError} For every other refusal, with its reason code.
   */
  allocate(request: AllocationRequest): NodeAllocation {
    const { node, replica_id, shard_id } = request;
    if (typeof replica_id !== "string" || replica_id === "") {
      throw new AllocationError("empty-id", `Cannot allocate on node ${node}: empty replica id`);
    }
    if (typeof shard_id !== "string" || shard_id === "") {
      throw new AllocationError(
        "empty-id",
        `Cannot allocate on node ${node} for replica ${replica_id}: empty shard id`,
      );
    }
    const label = shardLabel(replica_id, shard_id);
    const record = this.#get(node, `allocate shard ${label} on`);
    const indices = [...request.gpu_indices];
    if (indices.length === 0) {
      throw new AllocationError(
        "no-gpus",
        `Cannot allocate shard ${label} on node ${node}: no GPUs listed`,
      );
    }
    const key = shardKey(replica_id, shard_id);
    const holder = this.#shardNodes.get(key);
    if (holder !== undefined) {
      throw new AllocationError(
        "duplicate-shard",
        `Cannot allocate shard ${label} on node ${node}: it already holds GPUs on node ${holder}`,
      );
    }
    const gpus = new Map(record.reg.gpus.map((g) => [g.index, g]));
    const owners = this.#owners(record);
    const listed = new Set<number>();
    for (const i of indices) {
      const gpu = gpus.get(i);
      if (gpu === undefined) {
        throw new AllocationError(
          "unknown-gpu",
          `Cannot allocate GPU ${i} on node ${node}: the node has no such GPU`,
        );
      }
      if (listed.has(i)) {
        throw new AllocationError(
          "duplicate-gpu",
          `Cannot allocate GPU ${i} on node ${node}: listed twice for shard ${label}`,
        );
      }
      listed.add(i);
      if (!healthy(gpu)) {
        throw new AllocationError(
          "unhealthy-gpu",
          `Cannot allocate GPU ${i} on node ${node}: unhealthy (${gpu.health.problems.join("; ")})`,
        );
      }
      const owner = owners.get(i);
      if (owner !== undefined) {
        throw new AllocationError(
          "gpu-allocated",
          `Cannot allocate GPU ${i} on node ${node}: already allocated to shard ${
            shardLabel(owner.replica_id, owner.shard_id)
          }`,
        );
      }
    }
    const allocation: Allocation = {
      replica_id,
      shard_id,
      deployment: request.deployment ?? null,
      gpu_indices: indices,
    };
    record.allocations.set(key, allocation);
    this.#shardNodes.set(key, node);
    let shards = this.#replicaShards.get(replica_id);
    if (shards === undefined) this.#replicaShards.set(replica_id, shards = new Set());
    shards.add(key);
    return { node, ...structuredClone(allocation) };
  }

  /**
   * Frees the GPUs one shard holds. Prefer {@link releaseReplica}: replicas
   * fail, and are released, whole (design §5.4).
   *
   * @returns The released allocation, or `undefined` when the shard held nothing.
   */
  releaseShard(replicaId: string, shardId: string): NodeAllocation | undefined {
    const key = shardKey(replicaId, shardId);
    const node = this.#shardNodes.get(key);
    if (node === undefined) return undefined;
    return this.#release(key, node);
  }

  /**
   * Frees every shard of a replica, on every node: replicas fail whole, so
   * they are released whole (design §5.4).
   *
   * @returns The released allocations by node, replica and shard; empty when the replica held nothing.
   */
  releaseReplica(replicaId: string): NodeAllocation[] {
    const keys = this.#replicaShards.get(replicaId);
    if (keys === undefined) return [];
    const released = [...keys].map((key) => this.#release(key, this.#shardNodes.get(key)!));
    return released.sort(compareNodeAllocations);
  }

  /**
   * Forgets a node and its allocations. Other shards of the replicas that
   * had GPUs here are kept; the caller rebuilds those replicas (design §5.4).
   *
   * @returns The node's allocations, which no longer exist.
   * @throws {UnknownNodeError} For an unknown node.
   */
  removeNode(id: string): NodeAllocation[] {
    const record = this.#get(id, "remove");
    const released = [...record.allocations.keys()].map((key) => this.#release(key, id));
    this.#nodes.delete(id);
    return released.sort(compareNodeAllocations);
  }

  /** A copy of one node, or `undefined` when it is not registered. */
  getNode(id: string): InventoryNode | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : this.#view(record);
  }

  /**
   * A node as placement and launch building see it, without the deep copy
   * of {@link getNode} (the control plane builds launches for every replica
   * on each gateway poll). The result shares the store's data: read it, never
   * change it.
   */
  peekNode(id: string): Readonly<ClusterNode> | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : this.#clusterNode(record);
  }

  /**
   * A node's state without copying anything (the reconciler's hot path on
   * 10,000 nodes); `undefined` when it is not registered.
   */
  stateOf(id: string): NodeState | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : this.#state(record);
  }

  /** Copies of every node, in natural id order (`n2` before `n10`). */
  listNodes(): InventoryNode[] {
    return this.#sorted().map((r) => this.#view(r));
  }

  /**
   * The indices of a node's free GPUs, ascending: healthy and not allocated
   * (design §4, §5.1).
   *
   * @throws {UnknownNodeError} For an unknown node.
   */
  freeGpus(id: string): number[] {
    const record = this.#get(id, "list free GPUs of");
    const owners = this.#owners(record);
    return record.reg.gpus
      .filter((g) => healthy(g) && !owners.has(g.index))
      .map((g) => g.index)
      .sort((a, b) => a - b);
  }

  /** The cluster as placement reads it (design §7): copies, in natural id order. */
  snapshot(): ClusterNode[] {
    return this.#sorted().map((record) =>
      structuredClone({
        ...this.#clusterNode(record),
        engine_versions: record.reg.engine_versions,
      })
    );
  }

  #get(id: string, action: string): NodeRecord {
    const record = this.#nodes.get(id);
    if (record === undefined) throw new UnknownNodeError(action, id);
    return record;
  }

  #sorted(): NodeRecord[] {
    return [...this.#nodes.values()].sort((a, b) => compareNatural(a.reg.id, b.reg.id));
  }

  #state(record: NodeRecord): NodeState {
    return nodeState(record.liveness, record.intent);
  }

  #heard(record: NodeRecord, nowMs: number): void {
    record.lastSeenMs = Math.max(record.lastSeenMs, nowMs);
    record.liveness = "ready";
  }

  #update(record: NodeRecord, from: NodeState, gpusReported: boolean): NodeUpdate {
    const to = this.#state(record);
    // The copy is made when asked for, as of now: heartbeats, at fleet rate, mostly never ask.
    const view = () => this.#view(record);
    return {
      get node() {
        return view();
      },
      transition: from === to ? null : { node: record.reg.id, from, to },
      allocated_gpu_problems: gpusReported ? this.#gpuProblems(record) : [],
    };
  }

  /** GPU index → the allocation holding it. */
  #owners(record: NodeRecord): Map<number, Allocation> {
    const owners = new Map<number, Allocation>();
    for (const a of record.allocations.values()) {
      for (const i of a.gpu_indices) owners.set(i, a);
    }
    return owners;
  }

  #gpuProblems(record: NodeRecord): AllocatedGpuProblem[] {
    const id = record.reg.id;
    const gpus = new Map(record.reg.gpus.map((g) => [g.index, g]));
    const problems: AllocatedGpuProblem[] = [];
    for (const a of this.#allocations(record)) {
      for (const i of [...a.gpu_indices].sort((x, y) => x - y)) {
        const gpu = gpus.get(i);
        const held = `GPU ${i} on node ${id}, held by shard ${
          shardLabel(a.replica_id, a.shard_id)
        }`;
        const base = { node: id, gpu_index: i, replica_id: a.replica_id, shard_id: a.shard_id };
        if (gpu === undefined) {
          problems.push({ ...base, problem: "missing", message: `${held}, is no longer reported` });
        } else if (!healthy(gpu)) {
          problems.push({
            ...base,
            problem: "unhealthy",
            message: `${held}, is unhealthy: ${gpu.health.problems.join("; ")}`,
          });
        }
      }
    }
    return problems;
  }

  #allocations(record: NodeRecord): Allocation[] {
    return [...record.allocations.values()].sort(compareAllocations);
  }

  #release(key: string, node: string): NodeAllocation {
    const record = this.#nodes.get(node)!;
    const allocation = record.allocations.get(key)!;
    record.allocations.delete(key);
    this.#shardNodes.delete(key);
    const shards = this.#replicaShards.get(allocation.replica_id)!;
    shards.delete(key);
    if (shards.size === 0) this.#replicaShards.delete(allocation.replica_id);
    return { node, ...allocation };
  }

  /** What placement sees of a node; shares the record's data. */
  #clusterNode(record: NodeRecord): ClusterNode {
    const { reg } = record;
    return {
      id: reg.id,
      hostname: reg.hostname,
      mgmt_addr: reg.mgmt_addr,
      mgmt_interface: reg.mgmt_interface ?? null,
      state: this.#state(record),
      labels: reg.labels,
      gpus: reg.gpus,
      fabrics: reg.fabrics,
      allocations: this.#allocations(record),
    };
  }

  #view(record: NodeRecord): InventoryNode {
    const { reg } = record;
    return structuredClone({
      ...this.#clusterNode(record),
      liveness: record.liveness,
      intent: record.intent,
      last_seen_ms: record.lastSeenMs,
      agent_version: reg.agent_version,
      engine_versions: reg.engine_versions,
    });
  }
}

function compareNodeAllocations(a: NodeAllocation, b: NodeAllocation): number {
  return compareNatural(a.node, b.node) || compareAllocations(a, b);
}
