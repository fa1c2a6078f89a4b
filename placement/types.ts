/**
 * Placement results (plan §7) and their explanations (plan §1.2). Wire types:
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
  /** The GPUs' class: one class per replica (plan §1.1). */
  gpu_class: string;
  /** The fabric of a multi-node replica; null for single-node replicas. */
  fabric: string | null;
  /** That fabric's adapters on this node, and only those (plan §1.1, §5.3). */
  hcas: string[];
  /** The active ports of those adapters, with what NCCL needs. */
  hca_ports: FabricPort[];
}

/** Why one node could not take the replica with one profile. */
export interface NodeRejection {
  /** Node id. */
  node: string;
  /** Stable reason code (placement/reasons.ts). */
  reason: ReasonCode;
  /** The reason in words. */
  message: string;
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
  /** Per-node detail, present when asked for (it costs time on large clusters). */
  nodes?: NodeRejection[];
}

/** The explanation every placement result carries (plan §1.2). */
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
  /** Its engine plugin (plan §8). */
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
