/**
 * Reason codes: why a node cannot take a replica with a given profile. Stable
 * names for tools; the labels make the one-line summary of design §1.2
 * ("0/12 nodes fit: 8 cordoned, 3 insufficient free h100-80g GPUs").
 *
 * @module
 */

/** Why a node was rejected for a profile. */
export type ReasonCode =
  | "no_gpu_class"
  | "node_too_small"
  | "tensor_parallel_heads"
  | "insufficient_gpu_memory"
  | "node_cordoned"
  | "node_draining"
  | "node_unreachable"
  | "node_lost"
  | "selector_mismatch"
  | "compute_capability"
  | "engine_missing"
  | "insufficient_disk"
  | "disk_full_backoff"
  | "insufficient_gpus"
  | "no_fabric"
  | "fabric_too_small";

/**
 * Every reason code, in filter order, with its summary label. Filters run in
 * this order and a node is reported under the first that rejects it.
 */
export const REASONS: readonly { code: ReasonCode; label: string; meaning: string }[] = [
  {
    code: "no_gpu_class",
    label: "no {class} GPUs",
    meaning: "The node has no GPU of the profile's class.",
  },
  {
    code: "node_too_small",
    label: "too small (fewer than {gpus} {class} GPUs in all)",
    meaning:
      "The node has fewer GPUs of the class, free or not, than a shard needs (gpus_per_node): the profile can never fit there, whatever is freed; use more nodes per replica or a smaller tensor_parallel.",
  },
  {
    code: "tensor_parallel_heads",
    label: "refused: tensor_parallel does not divide the model's attention heads",
    meaning:
      "The model's attention heads are not divisible by tensor_parallel, which vLLM and SGLang refuse at start; no node can help. Known only when the model's facts are (models/model_facts.ts).",
  },
  {
    code: "insufficient_gpu_memory",
    label: "too little memory per {class} GPU for the model",
    meaning:
      "A GPU's memory × the engine's memory fraction is less than its share of the weights plus the KV cache of one full-length sequence (models/memory_estimate.ts); the profile can never fit there. Known only when the model's facts are.",
  },
  { code: "node_cordoned", label: "cordoned", meaning: "An operator cordoned the node." },
  { code: "node_draining", label: "draining", meaning: "The node is being drained." },
  {
    code: "node_unreachable",
    label: "unreachable",
    meaning: "Heartbeats stopped; the node may come back.",
  },
  { code: "node_lost", label: "lost", meaning: "Unreachable long enough to be declared lost." },
  {
    code: "selector_mismatch",
    label: "not matching the node selector",
    meaning: "A label of the profile's node_selector is missing or different.",
  },
  {
    code: "compute_capability",
    label: "compute capability too low for {quantization}",
    meaning:
      "A quantization that computes in fp8 (fp8, w8a8_fp8, modelopt, …) needs compute capability ≥ 8.9; unknown counts as too low.",
  },
  {
    code: "engine_missing",
    label: "without {engine}",
    meaning:
      "The node reports engines, and the profile's engine is not among them (the message names what the node has). A node that reports none is not refused: its engines are unknown.",
  },
  {
    code: "insufficient_disk",
    label: "too little model cache room",
    meaning:
      "The node's model cache cannot take the model's files: their size (the model facts' weight bytes) is more than the room its agent reports under the cache's high watermark after evicting every revision it may (none a shard uses or a deployment pins). A node that holds the revision, or reports no cache, is not refused. Known only when the model's facts are.",
  },
  {
    code: "disk_full_backoff",
    label: "out of disk for this model lately",
    meaning:
      "The node's model cache ran out of disk fetching this model revision lately, though it reported room: it is not chosen for the revision again until its backoff ends (DISK_FULL_BACKOFF in control/disk_full_backoff.ts, longer at each disk-full in a row; the message says when) or its reported room grows by the model's size. Other nodes are tried meanwhile.",
  },
  {
    code: "insufficient_gpus",
    label: "insufficient free {class} GPUs",
    meaning: "Fewer healthy, unallocated GPUs of the class than gpus_per_node.",
  },
  {
    code: "no_fabric",
    label: "on no fabric",
    meaning: "A multi-node profile needs nodes attached to a fabric.",
  },
  {
    code: "fabric_too_small",
    label: "on fabrics with too few eligible nodes",
    meaning: "Every fabric the node is on has fewer eligible nodes than the profile's nodes.",
  },
];

const ORDER = new Map(REASONS.map((r, i) => [r.code, i]));

/** Filter order of a reason code, for sorting summaries. */
export function reasonOrder(code: ReasonCode): number {
  return ORDER.get(code) ?? REASONS.length;
}

/** What a reason's label names of the profile. */
export interface LabelFacts {
  /** The profile's GPU class. */
  gpu_class: string;
  /** Its quantization. */
  quantization: string;
  /** Its engine. */
  engine: string;
  /** GPUs one shard needs on a node. */
  gpus_per_node: number;
}

/** The summary label of a reason, with the profile's class, quantization, engine and size filled in. */
export function reasonLabel(code: ReasonCode, p: LabelFacts): string {
  const r = REASONS[reasonOrder(code)];
  return r.label.replace("{class}", p.gpu_class).replace("{quantization}", p.quantization)
    .replace("{engine}", p.engine).replace("{gpus}", String(p.gpus_per_node));
}
