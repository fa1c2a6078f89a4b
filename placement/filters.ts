/**
 * Node filters (design §7), in the style of Kubernetes' scheduler framework:
 * each is a small named step that passes a node or rejects it with a reason
 * code. `check` is the hot path (no strings built); `describe` explains a
 * rejection in words, on demand (design §1.2).
 *
 * @module
 */
import { tooBigAdvice } from "../deployment/parallelism.ts";
import { fp8Requirement, needsFp8Hardware } from "../deployment/quantization.ts";
import type { Profile } from "../deployment/schema.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import { isLocalModel, shortCommit } from "../deployment/model_revision.ts";
import {
  classMemoryBytes,
  fitsGpu,
  gib,
  insufficientMemoryText,
} from "../models/memory_estimate.ts";
import { type ModelFit, modelFit } from "../deployment/model_fit.ts";
import type { ClassSlot, IndexedNode } from "./cluster_index.ts";
import type { ReasonCode } from "./reasons.ts";

/** What the filters know about the profile being placed. */
export interface ProfileContext {
  /** The profile. */
  profile: Profile;
  /** Whether the profile's quantization needs fp8 hardware. */
  needsFp8: boolean;
  /** Selector entries, precomputed. */
  selector: [string, string][];
  /**
   * The model against the profile's GPUs (deployment/model_fit.ts); null when
   * the model's facts or the engine's memory settings are unknown, and then
   * nothing is refused for memory or heads (as a node reporting no engine).
   */
  model: ModelFit | null;
  /**
   * The model's files as a node's cache holds them: null for a local path
   * (used in place, never copied) or when neither size nor commit is known.
   */
  disk: ModelDisk | null;
}

/** A hub model revision's files, as `insufficient_disk` and the preference for holders read them. */
export interface ModelDisk {
  /** The hub id. */
  repo: string;
  /** Bytes of its files (the facts' weight bytes); null when unknown: nothing is refused for disk. */
  bytes: number | null;
  /** `repo@commit` when the commit is known (holders hold it); else null: none is preferred. */
  revision: string | null;
}

/** Builds the context of a profile; `facts` are the deployment's model's, when known. */
export function profileContext(
  profile: Profile,
  facts: ModelFacts | null = null,
  disk: ModelDisk | null = null,
): ProfileContext {
  return {
    profile,
    needsFp8: needsFp8Hardware(profile.quantization),
    selector: Object.entries(profile.node_selector),
    model: facts === null ? null : modelFit(facts, profile),
    disk,
  };
}

/** One filter step. */
export interface NodeFilter {
  /** The step's name, for documentation and debugging. */
  name: string;
  /** Returns null when the node passes, else why not. */
  check(n: IndexedNode, slot: ClassSlot, ctx: ProfileContext): ReasonCode | null;
  /** Explains a rejection this filter made. */
  describe(n: IndexedNode, slot: ClassSlot, ctx: ProfileContext): string;
}

const STATE_REASONS: Record<string, ReasonCode> = {
  cordoned: "node_cordoned",
  draining: "node_draining",
  unreachable: "node_unreachable",
  lost: "node_lost",
};

/**
 * A node with fewer GPUs of the class than one shard needs can never take
 * it, whatever is freed: said apart from `insufficient_gpus`, so nobody
 * waits for capacity that cannot come. It counts every GPU of the class,
 * healthy or not (a sick GPU may be repaired).
 */
export const nodeSizeFilter: NodeFilter = {
  name: "node_size",
  check: (_n, slot, ctx) => slot.gpus.length < ctx.profile.gpus_per_node ? "node_too_small" : null,
  describe: (_n, slot, ctx) =>
    tooSmallText(`node has only ${slot.gpus.length}`, slot.gpus.length, ctx),
};

/**
 * "node has only 4 l40s-45g GPUs; a shard needs 8 on one node, so this
 * profile can never fit: use nodes: 2 (4 GPUs per node) or a smaller
 * tensor_parallel". `has` says how many ("node has only 4", "they have only
 * 2–4"); `most` is the most GPUs of the class any of them has.
 */
export function tooSmallText(has: string, most: number, ctx: ProfileContext): string {
  const p = ctx.profile;
  return `${has} ${p.gpu_class} GPU${
    most === 1 ? "" : "s"
  }; a shard needs ${p.gpus_per_node} on one node, so this profile can never fit: ${
    tooBigAdvice(p, most)
  }`;
}

/**
 * A tensor_parallel that does not divide the model's attention heads is
 * refused by the engine on every node (vLLM `verify_with_parallel_config`):
 * said here so the replica never starts only to fail.
 */
export const tensorParallelHeadsFilter: NodeFilter = {
  name: "tensor_parallel_heads",
  check: (_n, _slot, ctx) =>
    ctx.model?.tensorParallelProblem == null ? null : "tensor_parallel_heads",
  describe: (_n, _slot, ctx) => ctx.model!.tensorParallelProblem!,
};

/** The bytes of one GPU of the slot: what the driver reports, else what the class name says. */
export function slotGpuBytes(slot: ClassSlot, gpuClass: string): number | null {
  return slot.memoryBytes ?? classMemoryBytes(gpuClass);
}

/**
 * A GPU whose memory × the engine's fraction cannot hold its share of the
 * weights and the KV cache of one full-length sequence never takes the
 * profile (models/memory_estimate.ts): the engine would fail at load.
 */
export const gpuMemoryFilter: NodeFilter = {
  name: "gpu_memory",
  check: (_n, slot, ctx) => {
    const m = ctx.model;
    if (m === null) return null;
    const bytes = slotGpuBytes(slot, ctx.profile.gpu_class);
    return bytes === null || fitsGpu(m.estimate, bytes, m.settings.fraction)
      ? null
      : "insufficient_gpu_memory";
  },
  describe: (_n, slot, ctx) =>
    insufficientMemoryText(
      ctx.model!.estimate,
      ctx.profile.gpu_class,
      slotGpuBytes(slot, ctx.profile.gpu_class)!,
      ctx.model!.settings,
    ),
};

/** Only ready nodes take new replicas (design §4). */
export const nodeStateFilter: NodeFilter = {
  name: "node_state",
  check: (n) => n.node.state === "ready" ? null : STATE_REASONS[n.node.state],
  describe: (n) => `node is ${n.node.state}`,
};

/** Every label of the profile's node selector must match. */
export const nodeSelectorFilter: NodeFilter = {
  name: "node_selector",
  check: (n, _slot, ctx) => {
    for (let i = 0; i < ctx.selector.length; i++) {
      if (n.node.labels[ctx.selector[i][0]] !== ctx.selector[i][1]) return "selector_mismatch";
    }
    return null;
  },
  describe: (n, _slot, ctx) => {
    const [k, v] = ctx.selector.find(([k, v]) => n.node.labels[k] !== v)!;
    const has = n.node.labels[k];
    return `label ${k}=${v} required, node has ${
      has === undefined ? `no ${k} label` : `${k}=${has}`
    }`;
  },
};

/** fp8 only on compute capability ≥ 8.9: refused, not silently slower (design §6.2). */
export const computeCapabilityFilter: NodeFilter = {
  name: "compute_capability",
  check: (_n, slot, ctx) => ctx.needsFp8 && !slot.fp8Capable ? "compute_capability" : null,
  describe: (_n, slot, ctx) =>
    `${fp8Requirement(ctx.profile.quantization)}; ${ctx.profile.gpu_class} GPUs here report ${
      slot.computeCapabilities.join(", ")
    }`,
};

/**
 * The profile's engine must be one the node reports (design §14): a shard
 * of an engine that is not installed only fails to start. A node that
 * reports no engine at all is unknown and passes (IndexedNode.engines).
 */
export const engineFilter: NodeFilter = {
  name: "engine",
  check: (n, _slot, ctx) =>
    n.engines === null || n.engines.has(ctx.profile.engine) ? null : "engine_missing",
  describe: (n, _slot, ctx) =>
    `needs engine ${ctx.profile.engine}; node has ${engineList(n.node.engine_versions ?? {})}`,
};

/** "sglang 0.5.3, vllm 0.11.1": engines in name order, each with its version. */
export function engineList(versions: Record<string, string>, separator = ", "): string {
  return Object.entries(versions).sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
    .map(([e, v]) => `${e} ${v}`).join(separator);
}

/**
 * The deployment's model files as placement weighs them: a hub id's size
 * (the bytes of its revision's files, else its weight bytes) and revision
 * (`repo@commit`); null for a local
 * path, which is used in place and never copied, or when neither is known.
 */
export function modelDisk(
  model: string,
  facts: ModelFacts | null,
  commit: string | null,
): ModelDisk | null {
  if (isLocalModel(model) || (facts === null && commit === null)) return null;
  return {
    repo: model,
    // What lands on disk: the revision's files, not the weights' claimed size.
    bytes: facts?.download_bytes ?? facts?.weight_bytes ?? null,
    revision: commit === null ? null : `${model}@${commit}`,
  };
}

/** Bytes `n` still needs for the model's files: none when it holds them, less what a download has. */
export function diskNeed(n: IndexedNode, disk: ModelDisk): number {
  const rev = disk.revision;
  if (rev !== null && n.cache?.holds.has(rev)) return 0;
  return Math.max(0, (disk.bytes ?? 0) - (rev === null ? 0 : n.cache?.partial.get(rev) ?? 0));
}

/**
 * The node's model cache must have room for the model's files under its
 * high watermark, after evicting every revision it may evict (its agent
 * reports that room in its heartbeat). A node that holds the revision
 * passes; one that reports no cache (an older agent) is not refused.
 */
export const diskFilter: NodeFilter = {
  name: "disk",
  check: (n, _slot, ctx) => {
    const room = n.cache?.roomBytes ?? null;
    if (ctx.disk === null || ctx.disk.bytes === null || room === null) return null;
    return diskNeed(n, ctx.disk) > room ? "insufficient_disk" : null;
  },
  describe: (n, _slot, ctx) => diskText(diskNeed(n, ctx.disk!), n.cache!.roomBytes!, ctx.disk!),
};

/** How a disk-full is keyed: `repo@commit`, or the repo while the commit is unknown. */
export function diskKey(disk: ModelDisk): string {
  return disk.revision ?? disk.repo;
}

/**
 * A node that ran out of disk fetching this revision lately, though its
 * report claimed room, is left out for it while the control plane's
 * backoff holds (control/disk_full_backoff.ts decides; the verdict comes in
 * the node's cache as `backoff`), so other nodes are tried meanwhile.
 */
export const diskFullBackoffFilter: NodeFilter = {
  name: "disk_full_backoff",
  check: (n, _slot, ctx) =>
    ctx.disk !== null && n.cache?.backoff?.has(diskKey(ctx.disk)) === true
      ? "disk_full_backoff"
      : null,
  describe: (n, _slot, ctx) => n.cache!.backoff!.get(diskKey(ctx.disk!))!,
};

/**
 * "needs 15.0 GiB for acme/llm@4b1c2a9 in its model cache, which has room
 * for 9.3 GiB under its high watermark after evicting all it may".
 * `room` may be a range ("9.3–12.0") for a group.
 */
export function diskText(
  need: number,
  room: number | string,
  disk: ModelDisk,
  plural = false,
): string {
  const has = typeof room === "number" ? gib(room) : room;
  const [where, may] = plural
    ? ["their model caches, which have", "they"]
    : ["its model cache, which has", "it"];
  return `needs ${gib(need)} GiB for ${diskName(disk)} in ${where} room for ${has} GiB ` +
    `under the high watermark after evicting all ${may} may`;
}

/** `repo@abc1234` (the commit's first 7 digits), or the repo alone when the commit is unknown. */
export function diskName(disk: ModelDisk): string {
  if (disk.revision === null) return disk.repo;
  return `${disk.repo}@${shortCommit(disk.revision.slice(disk.repo.length + 1))}`;
}

/** Enough healthy, unallocated GPUs of the class for one shard. */
export const freeGpusFilter: NodeFilter = {
  name: "free_gpus",
  check: (_n, slot, ctx) =>
    slot.free.length < ctx.profile.gpus_per_node ? "insufficient_gpus" : null,
  describe: (_n, slot, ctx) => {
    const parts = [`${slot.free.length} free`];
    if (slot.allocated > 0) parts.push(`${slot.allocated} allocated`);
    if (slot.unhealthy > 0) {
      const sick = slot.gpus.find((g) => g.health.problems.length > 0);
      parts.push(
        `${slot.unhealthy} unhealthy${
          sick ? ` (GPU ${sick.index}: ${sick.health.problems[0]})` : ""
        }`,
      );
    }
    return `needs ${ctx.profile.gpus_per_node} free ${ctx.profile.gpu_class} GPUs, has ${
      parts.join(", ")
    } of ${slot.gpus.length}`;
  },
};

/**
 * The filters whose answer depends only on the node and the profile, not on
 * allocations, in order: placement runs them once per index and profile
 * (placement/stable_fit.ts). Every one of them comes before
 * {@link freeGpusFilter}, the only filter that changes between placements.
 */
export const STABLE_FILTERS: readonly NodeFilter[] = [
  nodeSizeFilter,
  tensorParallelHeadsFilter,
  gpuMemoryFilter,
  nodeStateFilter,
  nodeSelectorFilter,
  computeCapabilityFilter,
  engineFilter,
  diskFilter,
  diskFullBackoffFilter,
];

/** The filters after class presence, in order (see REASONS). */
export const NODE_FILTERS: readonly NodeFilter[] = [...STABLE_FILTERS, freeGpusFilter];

/** Runs the filters; returns the first rejection's reason and filter, or null. */
export function firstRejection(
  n: IndexedNode,
  slot: ClassSlot,
  ctx: ProfileContext,
): { reason: ReasonCode; filter: NodeFilter } | null {
  for (const filter of NODE_FILTERS) {
    const reason = filter.check(n, slot, ctx);
    if (reason !== null) return { reason, filter };
  }
  return null;
}

/** Describes a node without the profile's class. */
export function describeNoClass(n: IndexedNode, ctx: ProfileContext): string {
  const classes = [...n.classes.entries()].map(([c, s]) => `${c}×${s.gpus.length}`);
  return `no ${ctx.profile.gpu_class} GPUs (node has ${
    classes.length === 0 ? "no GPUs" : classes.join(", ")
  })`;
}
