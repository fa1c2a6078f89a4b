/**
 * One node as the inventory keeps it (design §4), and the views made of it:
 * the {@link ClusterNode} placement reads and the {@link InventoryNode} the
 * API hands out. Records are the store's own; only the store changes them.
 *
 * @module
 */
import type { Liveness, OperatorIntent } from "./node_state.ts";
import { nodeState } from "./node_state.ts";
import { compareAllocations } from "./natural_order.ts";
import type { NodeRegistration } from "./node_report.ts";
import type { Allocation, ClusterNode, NodeState } from "./types.ts";

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

/** The store's record of one node; liveness and intent kept apart (design §4). */
export interface NodeRecord {
  /** The latest registration, its GPUs replaced by each heartbeat that sends them. */
  reg: NodeRegistration;
  /** What heartbeats say. */
  liveness: Liveness;
  /** What the operator wants. */
  intent: OperatorIntent;
  /**
   * The liveness clock, ms since the epoch; never moves back. A node restored
   * from the store starts it at the restore, so it gets the whole
   * unreachable/lost window before being judged.
   */
  lastSeenMs: number;
  /** When really last heard from, ms since the epoch: what operators are shown. */
  heardMs: number;
  /** Shard key → allocation. */
  allocations: Map<string, Allocation>;
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

/** A new node's record: `ready`, no operator intent, nothing allocated (design §4). */
export function newNodeRecord(reg: NodeRegistration, nowMs: number): NodeRecord {
  return {
    reg,
    liveness: "ready",
    intent: "none",
    lastSeenMs: nowMs,
    heardMs: nowMs,
    allocations: new Map(),
  };
}

/**
 * The record of node `id`.
 *
 * @throws {UnknownNodeError} When there is none; `action` says what was attempted.
 */
export function recordOf(
  nodes: ReadonlyMap<string, NodeRecord>,
  id: string,
  action: string,
): NodeRecord {
  const record = nodes.get(id);
  if (record === undefined) throw new UnknownNodeError(action, id);
  return record;
}

/** The state reported for a record (design §4). */
export function recordState(record: NodeRecord): NodeState {
  return nodeState(record.liveness, record.intent);
}

/** A record's allocations by replica and shard, in natural order; shares the record's data. */
export function sortedAllocations(record: NodeRecord): Allocation[] {
  return [...record.allocations.values()].sort(compareAllocations);
}

/** GPU index → the allocation holding it. */
export function gpuOwners(record: NodeRecord): Map<number, Allocation> {
  const owners = new Map<number, Allocation>();
  for (const a of record.allocations.values()) {
    for (const i of a.gpu_indices) owners.set(i, a);
  }
  return owners;
}

/** What placement sees of a node; shares the record's data. */
export function clusterNodeOf(record: NodeRecord): ClusterNode {
  const { reg } = record;
  return {
    id: reg.id,
    hostname: reg.hostname,
    mgmt_addr: reg.mgmt_addr,
    mgmt_interface: reg.mgmt_interface ?? null,
    state: recordState(record),
    labels: reg.labels,
    gpus: reg.gpus,
    fabrics: reg.fabrics,
    allocations: sortedAllocations(record),
  };
}

/** A deep copy of a node with liveness, intent and versions, as the store hands nodes out. */
export function inventoryNodeOf(record: NodeRecord): InventoryNode {
  const { reg } = record;
  return structuredClone({
    ...clusterNodeOf(record),
    liveness: record.liveness,
    intent: record.intent,
    last_seen_ms: record.heardMs,
    agent_version: reg.agent_version,
    engine_versions: reg.engine_versions,
  });
}
