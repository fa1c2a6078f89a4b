/**
 * Grouped rejections (design §1.2 at scale): one {@link RejectionGroup} per
 * reason, with its count, what the nodes have in common and a few examples,
 * instead of one message per node. Built from lists placement already has,
 * without a string per node, so the control plane can keep one for every
 * unschedulable replica. The groups of the stable filters are built once per
 * index and profile.
 *
 * @module
 */
import type { ClassMember, ClusterIndex } from "./cluster_index.ts";
import {
  computeCapabilityFilter,
  diskFullBackoffFilter,
  diskNeed,
  diskText,
  engineList,
  gpuMemoryFilter,
  type ProfileContext,
  slotGpuBytes,
  tooSmallText,
} from "./filters.ts";
import { type ReasonCode, reasonLabel } from "./reasons.ts";
import type { StableFit } from "./stable_fit.ts";
import { gib } from "../models/memory_estimate.ts";
import type { RejectionGroup } from "./types.ts";

/** How many example nodes a group names. */
export const GROUP_EXAMPLES = 3;
/** How many distinct values a group message lists before "and N more". */
const LISTED = 5;

/**
 * A number with thousands separators, as people read it: "8,213". By hand
 * because `Intl.NumberFormat` costs a microsecond a call, and every grouped
 * explanation makes a few.
 */
export function formatCount(n: number): string {
  const text = String(n);
  const dot = text.indexOf(".");
  const whole = dot === -1 ? text : text.slice(0, dot);
  const sign = whole.startsWith("-") ? "-" : "";
  const digits = sign === "" ? whole : whole.slice(1);
  if (digits.length <= 3 || !/^\d+$/.test(digits)) return text;
  let out = digits.slice(0, digits.length % 3 || 3);
  for (let i = out.length; i < digits.length; i += 3) out += `,${digits.slice(i, i + 3)}`;
  return sign + out + (dot === -1 ? "" : text.slice(dot));
}

/** "a, b, c and 4 more". */
function listed(values: readonly string[]): string {
  if (values.length <= LISTED) return values.join(", ");
  return `${values.slice(0, LISTED).join(", ")} and ${values.length - LISTED} more`;
}

function group(reason: ReasonCode, members: readonly ClassMember[], message: string) {
  return {
    reason,
    count: members.length,
    message,
    examples: members.slice(0, GROUP_EXAMPLES).map((m) => m.n.node.id),
  };
}

/**
 * The groups of the rejections made by class presence and the stable
 * filters, in filter order; built once and kept in `fit`. Callers get copies.
 */
export function stableGroups(
  index: ClusterIndex,
  fit: StableFit,
  ctx: ProfileContext,
): RejectionGroup[] {
  if (fit.groups === null) {
    const groups: RejectionGroup[] = [];
    const noClass = noClassGroup(index, ctx);
    if (noClass !== null) groups.push(noClass);
    for (const [reason, members] of fit.rejected) {
      groups.push(group(reason, members, stableMessage(reason, members, ctx)));
    }
    fit.groups = groups;
  }
  return fit.groups.map((g) => ({ ...g, examples: [...g.examples] }));
}

/** Nodes without the class, and which classes they have instead. */
function noClassGroup(index: ClusterIndex, ctx: ProfileContext): RejectionGroup | null {
  const cls = ctx.profile.gpu_class;
  const others = new Set<string>();
  const examples: string[] = [];
  let count = 0;
  let none = 0;
  for (const n of index.nodes) {
    if (n.classes.has(cls)) continue;
    count++;
    if (examples.length < GROUP_EXAMPLES) examples.push(n.node.id);
    if (n.classes.size === 0) none++;
    for (const c of n.classes.keys()) others.add(c);
  }
  if (count === 0) return null;
  const have = [...others].sort();
  const parts: string[] = [];
  if (have.length > 0) parts.push(`they have ${listed(have)}`);
  if (none > 0) {
    const verb = none === 1 ? "has" : "have";
    parts.push(have.length > 0 ? `${formatCount(none)} ${verb} no GPUs` : "no GPUs at all");
  }
  return {
    reason: "no_gpu_class",
    count,
    message: `no ${cls} GPUs (${parts.join("; ")})`,
    examples,
  };
}

function stableMessage(
  reason: ReasonCode,
  members: readonly ClassMember[],
  ctx: ProfileContext,
): string {
  switch (reason) {
    case "node_too_small": {
      let min = Infinity;
      let max = 0;
      for (const m of members) {
        min = Math.min(min, m.slot.gpus.length);
        max = Math.max(max, m.slot.gpus.length);
      }
      return tooSmallText(`they have only ${min === max ? max : `${min}–${max}`}`, max, ctx);
    }
    case "engine_missing":
      return engineMessage(members, ctx);
    case "tensor_parallel_heads":
      return ctx.model!.tensorParallelProblem!;
    case "insufficient_gpu_memory": {
      // The filter's words for the roomiest of these GPUs: none of them is enough.
      let best = members[0];
      for (const m of members) {
        const cls = ctx.profile.gpu_class;
        if ((slotGpuBytes(m.slot, cls) ?? 0) > (slotGpuBytes(best.slot, cls) ?? 0)) best = m;
      }
      return gpuMemoryFilter.describe(best.n, best.slot, ctx);
    }
    case "insufficient_disk": {
      // The most any of them needs, against the range of room they have.
      let need = 0;
      let min = Infinity;
      let max = 0;
      for (const m of members) {
        need = Math.max(need, diskNeed(m.n, ctx.disk!));
        min = Math.min(min, m.n.cache!.roomBytes!);
        max = Math.max(max, m.n.cache!.roomBytes!);
      }
      // A group of one node reads as that node's own message ("its model cache").
      const room = min === max ? min : `${gib(min)}–${gib(max)}`;
      return diskText(need, room, ctx.disk!, members.length > 1);
    }
    case "disk_full_backoff": {
      // Each node's own words: a handful at most, each with its own time.
      const named = members.slice(0, LISTED).map((m) =>
        `${m.n.node.id} ${diskFullBackoffFilter.describe(m.n, m.slot, ctx)}`
      );
      const more = members.length - named.length;
      return named.join("; ") + (more > 0 ? `; and ${formatCount(more)} more` : "");
    }
    case "selector_mismatch":
      return selectorMessage(members, ctx);
    case "compute_capability": {
      // The filter's own words, over the capabilities all these nodes report.
      const seen = new Set<string>();
      for (const m of members) for (const cc of m.slot.computeCapabilities) seen.add(cc);
      const slot = { ...members[0].slot, computeCapabilities: [...seen].sort() };
      return computeCapabilityFilter.describe(members[0].n, slot, ctx);
    }
    default:
      return reasonLabel(reason, ctx.profile);
  }
}

/**
 * "needs engine sglang; they have vllm 0.11.1 (300), trtllm 1.0 + vllm 0.10.2 (2)":
 * one entry per set of engines, its engines joined by "+".
 */
function engineMessage(members: readonly ClassMember[], ctx: ProfileContext): string {
  const tally = new Map<string, number>();
  for (const m of members) {
    const has = engineList(m.n.node.engine_versions ?? {}, " + ");
    tally.set(has, (tally.get(has) ?? 0) + 1);
  }
  const has = [...tally].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([what, n]) => `${what} (${formatCount(n)})`);
  return `needs engine ${ctx.profile.engine}; they have ${listed(has)}`;
}

/** "label zone=a required; they have zone=b (300), no zone label (200)". */
function selectorMessage(members: readonly ClassMember[], ctx: ProfileContext): string {
  // required "k=v" → what the nodes have instead → how many
  const byRequired = new Map<string, Map<string, number>>();
  for (const m of members) {
    const labels = m.n.node.labels;
    const miss = ctx.selector.find(([k, v]) => labels[k] !== v);
    if (miss === undefined) continue;
    const [k, v] = miss;
    const has = labels[k] === undefined ? `no ${k} label` : `${k}=${labels[k]}`;
    let tally = byRequired.get(`${k}=${v}`);
    if (tally === undefined) byRequired.set(`${k}=${v}`, tally = new Map());
    tally.set(has, (tally.get(has) ?? 0) + 1);
  }
  return [...byRequired].map(([required, tally]) => {
    const has = [...tally].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .map(([what, n]) => `${what} (${formatCount(n)})`);
    return `label ${required} required; they have ${listed(has)}`;
  }).join("; ");
}

/**
 * The nodes the stable filters passed that have too few free GPUs of the
 * class, tallied by the placement loop as it meets them (reading only
 * compact arrays), so that grouping them adds almost nothing to placing.
 */
export class InsufficientTally {
  #count = 0;
  #min = Infinity;
  #max = 0;
  #withAllocated = 0;
  #withUnhealthy = 0;
  readonly #examples: number[] = [];
  readonly #passing: Int32Array;
  readonly #gpuCount: Int32Array;
  readonly #unhealthy: Int32Array;

  /** A tally over `fit.passing`. */
  constructor(fit: StableFit) {
    this.#passing = fit.passing;
    this.#gpuCount = fit.gpuCount;
    this.#unhealthy = fit.unhealthy;
  }

  /** Counts the node at `fit.passing[i]`, which has `free` free GPUs of the class. */
  add(i: number, free: number): void {
    this.#count++;
    if (this.#examples.length < GROUP_EXAMPLES) this.#examples.push(this.#passing[i]);
    if (free < this.#min) this.#min = free;
    if (free > this.#max) this.#max = free;
    const unhealthy = this.#unhealthy[i];
    if (this.#gpuCount[i] - unhealthy - free > 0) this.#withAllocated++;
    if (unhealthy > 0) this.#withUnhealthy++;
  }

  /**
   * The group: the range of free GPUs these nodes have, and why; null when
   * none was counted.
   *
   * @param members The class's nodes (`ClusterIndex.byClass`), which `passing` indexes.
   */
  group(members: readonly ClassMember[], ctx: ProfileContext): RejectionGroup | null {
    if (this.#count === 0) return null;
    const why: string[] = [];
    if (this.#withAllocated > 0) {
      why.push(`${formatCount(this.#withAllocated)} with GPUs allocated`);
    }
    if (this.#withUnhealthy > 0) {
      why.push(`${formatCount(this.#withUnhealthy)} with unhealthy GPUs`);
    }
    const has = this.#min === this.#max ? `${this.#min}` : `${this.#min}–${this.#max}`;
    const p = ctx.profile;
    return {
      reason: "insufficient_gpus",
      count: this.#count,
      message: `needs ${p.gpus_per_node} free ${p.gpu_class} GPUs, has ${has} free${
        why.length > 0 ? `; ${why.join(", ")}` : ""
      }`,
      examples: this.#examples.map((pos) => members[pos].n.node.id),
    };
  }
}

/** Eligible nodes of an unschedulable multi-node profile that are on no fabric. */
export function noFabricGroup(
  members: readonly ClassMember[],
  ctx: ProfileContext,
): RejectionGroup {
  return group(
    "no_fabric",
    members,
    `a ${ctx.profile.nodes}-node replica needs nodes on a fabric; these are on none`,
  );
}

/** Eligible nodes of an unschedulable multi-node profile whose fabrics are all too small. */
export function fabricTooSmallGroup(
  members: readonly ClassMember[],
  ctx: ProfileContext,
  eligibleOn: readonly { fabric: string; eligible: number }[],
): RejectionGroup {
  const sizes = eligibleOn.map((f) => `${f.fabric} has ${formatCount(f.eligible)}`);
  return group(
    "fabric_too_small",
    members,
    `needs ${ctx.profile.nodes} eligible nodes on one fabric: ${listed(sizes)}`,
  );
}
