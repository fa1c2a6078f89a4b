/**
 * Node filters (design §7), in the style of Kubernetes' scheduler framework:
 * each is a small named step that passes a node or rejects it with a reason
 * code. `check` is the hot path (no strings built); `describe` explains a
 * rejection in words, on demand (design §1.2).
 *
 * @module
 */
import { fp8Requirement, needsFp8Hardware } from "../deployment/quantization.ts";
import type { Profile } from "../deployment/schema.ts";
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
}

/** Builds the context of a profile. */
export function profileContext(profile: Profile): ProfileContext {
  return {
    profile,
    needsFp8: needsFp8Hardware(profile.quantization),
    selector: Object.entries(profile.node_selector),
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
  nodeStateFilter,
  nodeSelectorFilter,
  computeCapabilityFilter,
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
