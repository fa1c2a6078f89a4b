/**
 * The control plane's view of nodes (design §4): what placement reads. Wire
 * types, snake_case, shared by the cluster file of `llmgw plan`, the store and
 * the API.
 *
 * @module
 */
import type { FabricAttachment, Gpu } from "../discovery/types.ts";

/** Node states of design §4. Only `ready` nodes accept new placements. */
export type NodeState = "ready" | "cordoned" | "draining" | "unreachable" | "lost";

/** All node states, in the order of design §4. */
export const NODE_STATES: readonly NodeState[] = [
  "ready",
  "cordoned",
  "draining",
  "unreachable",
  "lost",
];

/** GPUs of one node held by one shard of one replica (design §4). */
export interface Allocation {
  /** The replica the shard belongs to; replicas are released whole (design §5.4). */
  replica_id: string;
  /** The shard, unique within the replica. */
  shard_id: string;
  /** The deployment of the replica, when known (used by `spread`). */
  deployment?: string | null;
  /** nvidia-smi indices of the GPUs it holds. */
  gpu_indices: number[];
}

/** One node as placement sees it: hardware, state and what is already allocated. */
export interface ClusterNode {
  /** Stable node id. */
  id: string;
  /** Host name, for people. */
  hostname: string;
  /** Management address: the bootstrap interface's address (design §5.3). */
  mgmt_addr: string;
  /** The interface holding `mgmt_addr` (NCCL_SOCKET_IFNAME, design §5.3); null when unknown. */
  mgmt_interface: string | null;
  /** Current state (design §4). */
  state: NodeState;
  /** Operator labels, matched by profiles' node selectors. */
  labels: Record<string, string>;
  /** GPUs as discovery reports them (design §5.1). */
  gpus: Gpu[];
  /** Fabric attachments (design §5.2). */
  fabrics: FabricAttachment[];
  /** What runs here already. */
  allocations: Allocation[];
  /** Installed engine versions, by engine name (design §14); absent when not reported. */
  engine_versions?: Record<string, string>;
}
