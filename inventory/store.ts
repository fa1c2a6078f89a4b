/**
 * The control plane's inventory (design §4): registered nodes, their liveness
 * and the operator's intent (inventory/node_state.ts), and the allocations
 * that hold their GPUs. In memory; persistence is the control plane's store
 * (design §11), which records operator intent and allocations.
 *
 * The store is the one door in: the node record and its views
 * (inventory/node_record.ts), liveness transitions (inventory/node_update.ts)
 * and allocation bookkeeping (inventory/allocation_ledger.ts) are its parts.
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
import type { Gpu } from "../discovery/types.ts";
import {
  AllocationLedger,
  type AllocationRequest,
  type NodeAllocation,
} from "./allocation_ledger.ts";
import { compareNatural } from "./natural_order.ts";
import {
  clusterNodeOf,
  gpuOwners,
  type InventoryNode,
  inventoryNodeOf,
  newNodeRecord,
  type NodeRecord,
  recordOf,
  recordState,
} from "./node_record.ts";
import { checkGpus, isHealthy, type NodeRegistration, NodeReportError } from "./node_report.ts";
import { type LivenessThresholds, livenessThresholds } from "./node_state.ts";
import {
  applyTimers,
  markHeard,
  type NodeUpdate,
  nodeUpdate,
  type RegistrationResult,
  type StateTransition,
} from "./node_update.ts";
import type { ClusterNode, NodeState } from "./types.ts";

// The store's API names these; importers of this module get them here.
export {
  AllocationError,
  type AllocationRefusal,
  type AllocationRequest,
  type NodeAllocation,
} from "./allocation_ledger.ts";
export { type InventoryNode, UnknownNodeError } from "./node_record.ts";
export { checkGpus, type NodeRegistration, NodeReportError } from "./node_report.ts";
export {
  type AllocatedGpuProblem,
  type NodeUpdate,
  type RegistrationResult,
  type StateTransition,
} from "./node_update.ts";

/** Options of {@link InventoryStore}. */
export interface InventoryStoreOptions {
  /** Heartbeat thresholds; missing values take design §4's defaults. */
  thresholds?: Partial<LivenessThresholds>;
}

function checkTime(nowMs: number, action: string): void {
  if (!Number.isFinite(nowMs)) {
    throw new RangeError(`Cannot ${action}: time ${nowMs} is not a finite number of ms`);
  }
}

/**
 * The control plane's inventory (design §4). See the module documentation for
 * its concurrency and copy guarantees.
 */
export class InventoryStore {
  readonly #nodes = new Map<string, NodeRecord>();
  readonly #ledger = new AllocationLedger(this.#nodes);
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
      const record = newNodeRecord(reg, nowMs);
      this.#nodes.set(reg.id, record);
      return {
        node: inventoryNodeOf(record),
        transition: null,
        allocated_gpu_problems: [],
        created: true,
      };
    }
    const from = recordState(prev);
    prev.reg = reg;
    markHeard(prev, nowMs);
    return { ...nodeUpdate(prev, from, true), created: false };
  }

  /**
   * Says when a node restored from the store was really last heard from
   * (its stored record), so it shows that time instead of the restore's;
   * call it right after the restore's {@link upsertNode}. Its liveness still
   * counts from the restore. Only ever moves the time back; an unknown node
   * is ignored.
   */
  restoreLastSeen(id: string, heardMs: number): void {
    const record = this.#nodes.get(id);
    if (record === undefined || !Number.isFinite(heardMs)) return;
    record.heardMs = Math.min(record.heardMs, heardMs);
  }

  /**
   * When a node was really last heard from, without copying it (read for
   * every node when last-seen times are written); `undefined` for an unknown node.
   */
  lastHeard(id: string): number | undefined {
    return this.#nodes.get(id)?.heardMs;
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
    const from = recordState(record);
    if (gpus !== undefined) record.reg.gpus = structuredClone(gpus);
    markHeard(record, nowMs);
    return nodeUpdate(record, from, gpus !== undefined);
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
    return inventoryNodeOf(record);
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
    return inventoryNodeOf(record);
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
    return inventoryNodeOf(record);
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
      const transition = applyTimers(record, nowMs, this.#thresholds);
      if (transition !== null) transitions.push(transition);
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
    return this.#ledger.allocate(request);
  }

  /**
   * Frees the GPUs one shard holds. Prefer {@link releaseReplica}: replicas
   * fail, and are released, whole (design §5.4).
   *
   * @returns The released allocation, or `undefined` when the shard held nothing.
   */
  releaseShard(replicaId: string, shardId: string): NodeAllocation | undefined {
    return this.#ledger.releaseShard(replicaId, shardId);
  }

  /**
   * Frees every shard of a replica, on every node: replicas fail whole, so
   * they are released whole (design §5.4).
   *
   * @returns The released allocations by node, replica and shard; empty when the replica held nothing.
   */
  releaseReplica(replicaId: string): NodeAllocation[] {
    return this.#ledger.releaseReplica(replicaId);
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
    const released = this.#ledger.releaseNode(record);
    this.#nodes.delete(id);
    return released;
  }

  /** A copy of one node, or `undefined` when it is not registered. */
  getNode(id: string): InventoryNode | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : inventoryNodeOf(record);
  }

  /**
   * A node as placement and launch building see it, without the deep copy
   * of {@link getNode} (the control plane builds launches for every replica
   * on each gateway poll). The result shares the store's data: read it, never
   * change it.
   */
  peekNode(id: string): Readonly<ClusterNode> | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : clusterNodeOf(record);
  }

  /**
   * A node's state without copying anything (the reconciler's hot path on
   * 10,000 nodes); `undefined` when it is not registered.
   */
  stateOf(id: string): NodeState | undefined {
    const record = this.#nodes.get(id);
    return record === undefined ? undefined : recordState(record);
  }

  /** Copies of every node, in natural id order (`n2` before `n10`). */
  listNodes(): InventoryNode[] {
    return this.#sorted().map((r) => inventoryNodeOf(r));
  }

  /**
   * The indices of a node's free GPUs, ascending: healthy and not allocated
   * (design §4, §5.1).
   *
   * @throws {UnknownNodeError} For an unknown node.
   */
  freeGpus(id: string): number[] {
    const record = this.#get(id, "list free GPUs of");
    const owners = gpuOwners(record);
    return record.reg.gpus
      .filter((g) => isHealthy(g) && !owners.has(g.index))
      .map((g) => g.index)
      .sort((a, b) => a - b);
  }

  /** The cluster as placement reads it (design §7): copies, in natural id order. */
  snapshot(): ClusterNode[] {
    return this.#sorted().map((record) =>
      structuredClone({
        ...clusterNodeOf(record),
        engine_versions: record.reg.engine_versions,
      })
    );
  }

  #get(id: string, action: string): NodeRecord {
    return recordOf(this.#nodes, id, action);
  }

  #sorted(): NodeRecord[] {
    return [...this.#nodes.values()].sort((a, b) => compareNatural(a.reg.id, b.reg.id));
  }
}
