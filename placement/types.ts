/**
 * Placement results (design §7) and their explanations (design §1.2). Wire types:
 * `llmgw plan --json` prints them and the control plane stores them.
 *
 * @module
 */
import type { FabricPort } from "../discovery/types.ts";
import type { ReasonCode } from "./reasons.ts";

/** One shard of a placed replica: where it runs and with which GPUs and adapters. */
export interface ShardPlacement {
  /** Rank within the replica; rank 0 is the leader that serves HTTP. */
  rank: number;
  /** `<replica id>/<rank>`. */
  shard_id: string;
  /** Node id. */
  node: string;
  /** nvidia-smi indices (what CUDA_VISIBLE_DEVICES lists). */
  gpu_indices: number[];
  /** The GPUs' class: one class per replica (design §1.1). */
  gpu_class: string;
  /** The fabric of a multi-node replica; null for single-node replicas. */
  fabric: string | null;
  /** That fabric's adapters on this node, and only those (design §1.1, §5.3). */
  hcas: string[];
  /** The active ports of those adapters, with what NCCL needs. */
  hca_ports: FabricPort[];
}

/**
 * How much per-node detail an explanation carries (design §1.2), from
 * cheapest to dearest:
 *
 * - `false`: the summary and the per-reason counts only.
 * - `"grouped"`: also {@link RejectionGroup}s: one line per reason with its
 *   count, what the nodes have in common and a few example nodes. Cheap
 *   enough to compute for every unschedulable replica on every change.
 * - `"full"`: the groups and also every rejected node with its own message
 *   ({@link NodeRejection}); grows with the cluster, so only on request.
 */
export type DetailLevel = false | "grouped" | "full";

/** Why one node could not take the replica with one profile. */
export interface NodeRejection {
  /** Node id. */
  node: string;
  /** Stable reason code (placement/reasons.ts). */
  reason: ReasonCode;
  /** The reason in words. */
  message: string;
}

/**
 * The nodes one reason rejected, counted instead of listed, e.g.
 * "8,213 nodes: insufficient_gpus — needs 8 free h100-80g GPUs, has 0–4 free".
 */
export interface RejectionGroup {
  /** Stable reason code (placement/reasons.ts). */
  reason: ReasonCode;
  /** How many nodes; equals `counts[reason]` of the attempt. */
  count: number;
  /** What these nodes have in common, in words. */
  message: string;
  /** Up to three of them, in node order, to look at first. */
  examples: string[];
}

/** The per-node bandwidth a collective would see on one fabric (design §5.2). */
export interface FabricBandwidth {
  /**
   * Gb/s per node: over the nodes the replica would use, the minimum of
   * active HCAs × the rate of the slowest active port (a collective runs at
   * its slowest member); null when some port's rate is unknown.
   */
  per_node_gbps: number | null;
  /** The node that sets the figure. */
  node: string;
  /** Its active HCAs on the fabric. */
  hcas: number;
  /** The rate of its slowest active port on the fabric; null when unknown. */
  rate_gbps: number | null;
}

/** One fabric a multi-node profile could have used, and why it was or was not. */
export interface FabricOption {
  /** Fabric name. */
  fabric: string;
  /** Nodes on it that passed every filter. */
  eligible_nodes: number;
  /** Whether the replica was placed on it. */
  chosen: boolean;
  /** On the nodes it would use; null when it has fewer eligible nodes than the profile needs. */
  bandwidth: FabricBandwidth | null;
  /** Free GPUs of the class on the nodes it would use; null as for `bandwidth`. */
  free_gpus: number | null;
  /** Why it was chosen or passed over, e.g. "4 × 100 Gb/s = 400 Gb/s per node < ib-a 8 × 400 Gb/s = 3,200 Gb/s". */
  why: string;
}

/** What happened to one profile. */
export interface ProfileAttempt {
  /** Profile name. */
  profile: string;
  /** Whether the replica was placed with it. */
  fits: boolean;
  /** One line, e.g. "0/12 nodes fit: 8 cordoned, 3 insufficient free h100-80g GPUs". */
  summary: string;
  /** Rejected nodes per reason code. */
  counts: Partial<Record<ReasonCode, number>>;
  /**
   * Multi-node profiles: every fabric with an eligible node, the chosen one
   * first, then the others in the order they ranked (bandwidth, then free
   * GPUs, then name), then those with too few eligible nodes by name.
   */
  fabrics?: FabricOption[];
  /** Rejected nodes grouped by reason, in filter order; with detail `"grouped"` or `"full"`. */
  groups?: RejectionGroup[];
  /** Every rejected node, in node order; with detail `"full"` only (it grows with the cluster). */
  nodes?: NodeRejection[];
}

/** The explanation every placement result carries (design §1.2). */
export interface Explanation {
  /** One line for the whole replica. */
  summary: string;
  /** The profiles tried, in priority order; profiles after the one used were not tried. */
  profiles: ProfileAttempt[];
}

/** A placed replica. */
export interface Placed {
  /** Result kind. */
  status: "placed";
  /** Replica id. */
  replica_id: string;
  /** Deployment name. */
  deployment: string;
  /** The profile used. */
  profile: string;
  /** Its engine plugin (design §8). */
  engine: string;
  /** Shards in rank order. */
  shards: ShardPlacement[];
  /** Why this profile, and why not the ones before it. */
  explanation: Explanation;
}

/** A replica that fits nowhere now. */
export interface Unschedulable {
  /** Result kind. */
  status: "unschedulable";
  /** Replica id. */
  replica_id: string;
  /** Deployment name. */
  deployment: string;
  /** Why no profile fits. */
  explanation: Explanation;
}

/** The outcome of placing one replica. */
export type PlacementResult = Placed | Unschedulable;
