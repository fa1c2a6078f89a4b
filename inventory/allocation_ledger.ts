/**
 * Allocation bookkeeping (design §4): which shard holds which GPUs of which
 * node. Each node's record keeps its own allocations; the ledger keeps the
 * indexes across nodes that make a (replica, shard) pair unique in the whole
 * inventory and let a replica be released whole (design §5.4).
 *
 * Like the store, every method checks everything before it changes anything.
 *
 * @module
 */
import { compareAllocations, compareNatural } from "./natural_order.ts";
import { gpuOwners, type NodeRecord, recordOf } from "./node_record.ts";
import { isHealthy } from "./node_report.ts";
import type { Allocation } from "./types.ts";

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

/** The key of a (replica, shard) pair; JSON so no id can collide with another pair's. */
export function shardKey(replicaId: string, shardId: string): string {
  return JSON.stringify([replicaId, shardId]);
}

/** `r-1/0` for placement's shard ids (which start with the replica id), else `r-1/<shard>`. */
export function shardLabel(replicaId: string, shardId: string): string {
  return shardId.startsWith(`${replicaId}/`) ? shardId : `${replicaId}/${shardId}`;
}

function compareNodeAllocations(a: NodeAllocation, b: NodeAllocation): number {
  return compareNatural(a.node, b.node) || compareAllocations(a, b);
}

/** The cross-node allocation indexes of one inventory, over its node records. */
export class AllocationLedger {
  readonly #nodes: ReadonlyMap<string, NodeRecord>;
  /** Shard key → node id, for global shard uniqueness. */
  readonly #shardNodes = new Map<string, string>();
  /** Replica id → shard keys, for releasing replicas whole. */
  readonly #replicaShards = new Map<string, Set<string>>();

  /** Creates an empty ledger over the store's node records, which it reads and never adds to. */
  constructor(nodes: ReadonlyMap<string, NodeRecord>) {
    this.#nodes = nodes;
  }

  /**
   * Records GPUs of a node as held by one shard. The refusals are
   * `InventoryStore.allocate`'s, checked in the order it lists them.
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
    const record = recordOf(this.#nodes, node, `allocate shard ${label} on`);
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
    const owners = gpuOwners(record);
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
      if (!isHealthy(gpu)) {
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

  /** Frees the GPUs one shard holds; `undefined` when the shard held nothing. */
  releaseShard(replicaId: string, shardId: string): NodeAllocation | undefined {
    const key = shardKey(replicaId, shardId);
    const node = this.#shardNodes.get(key);
    if (node === undefined) return undefined;
    return this.#release(key, this.#nodes.get(node)!);
  }

  /** Frees every shard of a replica, on every node, sorted by node, replica and shard. */
  releaseReplica(replicaId: string): NodeAllocation[] {
    const keys = this.#replicaShards.get(replicaId);
    if (keys === undefined) return [];
    const released = [...keys].map((key) =>
      this.#release(key, this.#nodes.get(this.#shardNodes.get(key)!)!)
    );
    return released.sort(compareNodeAllocations);
  }

  /**
   * Frees everything held on one node, sorted by replica and shard, before
   * the store forgets it. Other shards of the same replicas are kept.
   */
  releaseNode(record: NodeRecord): NodeAllocation[] {
    const released = [...record.allocations.keys()].map((key) => this.#release(key, record));
    return released.sort(compareNodeAllocations);
  }

  #release(key: string, record: NodeRecord): NodeAllocation {
    const allocation = record.allocations.get(key)!;
    record.allocations.delete(key);
    this.#shardNodes.delete(key);
    const shards = this.#replicaShards.get(allocation.replica_id)!;
    shards.delete(key);
    if (shards.size === 0) this.#replicaShards.delete(allocation.replica_id);
    return { node: record.reg.id, ...allocation };
  }
}
