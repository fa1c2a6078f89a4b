/**
 * What the filters that do not depend on allocations decide for one profile
 * (class presence, node size, node state, selector, compute capability,
 * engine), computed once per index and profile and kept beside the index.
 * Placing the 1,000th replica of a deployment then only re-checks free GPUs
 * on the nodes left (design §16). The answer, and the words of its groups,
 * depend on the profile's class, shape, quantization, engine, node
 * selector and the model's fit (its key) and on the nodes, which the index
 * never changes.
 *
 * @module
 */
import type { FabricAttachment } from "../discovery/types.ts";
import type { ClassMember, ClusterIndex } from "./cluster_index.ts";
import { type ProfileContext, STABLE_FILTERS } from "./filters.ts";
import { type ReasonCode, reasonOrder } from "./reasons.ts";
import type { RejectionGroup } from "./types.ts";

/** The nodes on one fabric that pass the stable filters, in node order. */
export interface FabricList {
  /** Their positions in the class's list (`ClusterIndex.byClass`). */
  pos: Int32Array;
  /** Their attachments to the fabric (the first, should a node list a fabric twice). */
  attachments: FabricAttachment[];
}

/** The stable filters' verdict for one profile. */
export interface StableFit {
  /** Nodes without the class or rejected by a stable filter, per reason, in filter order. */
  counts: [ReasonCode, number][];
  /** The class's nodes rejected by a stable filter, per reason, in node order. */
  rejected: Map<ReasonCode, ClassMember[]>;
  /** Positions (in the class's list) of the nodes that pass every stable filter, ascending. */
  passing: Int32Array;
  /** Beside `passing`: each node's GPUs of the class (allocated = this − unhealthy − free). */
  gpuCount: Int32Array;
  /** Beside `passing`: each node's unhealthy, unallocated GPUs of the class (they stay so). */
  unhealthy: Int32Array;
  /** Fabric name → the passing nodes on it; sorted by name. */
  fabrics: [string, FabricList][];
  /** Positions of the passing nodes on no fabric, ascending. */
  noFabric: Int32Array;
  /** Groups of the rejections above, built on first request (placement/groups.ts). */
  groups: RejectionGroup[] | null;
}

/**
 * Index → profile key → verdict. Weak, so a verdict lives as long as its
 * index; valid as long as the nodes do not change, which the index requires
 * anyway (applyPlacement changes only allocations).
 */
const MEMO = new WeakMap<ClusterIndex, Map<string, StableFit>>();

/** The stable verdict for a profile, computed on first use and kept for the index's life. */
export function stableFit(index: ClusterIndex, ctx: ProfileContext): StableFit {
  const p = ctx.profile;
  const key = JSON.stringify([
    p.gpu_class,
    p.gpus_per_node,
    p.nodes,
    p.tensor_parallel,
    p.pipeline_parallel,
    p.quantization,
    ctx.needsFp8,
    p.engine,
    ctx.selector,
    ctx.model?.key ?? null,
    ctx.disk?.bytes ?? null,
    ctx.disk?.revision ?? null,
  ]);
  let memo = MEMO.get(index);
  if (memo === undefined) MEMO.set(index, memo = new Map());
  let fit = memo.get(key);
  if (fit === undefined) memo.set(key, fit = computeStableFit(index, ctx));
  return fit;
}

/** Drops an index's verdicts: a release made an unhealthy GPU unallocated (cluster_index.ts). */
export function forgetStableFit(index: ClusterIndex): void {
  MEMO.delete(index);
}

/** Active HCAs × the slowest active port's rate, Gb/s; null when the rate is unknown. */
export function perNodeGbps(attachment: FabricAttachment): number | null {
  return attachment.rate_gbps === null ? null : attachment.rate_gbps * attachment.hcas.length;
}

function computeStableFit(index: ClusterIndex, ctx: ProfileContext): StableFit {
  const withClass = index.byClass.get(ctx.profile.gpu_class) ?? [];
  const rejected = new Map<ReasonCode, ClassMember[]>();
  const passing: number[] = [];
  for (let pos = 0; pos < withClass.length; pos++) {
    const member = withClass[pos];
    let reason: ReasonCode | null = null;
    for (let f = 0; f < STABLE_FILTERS.length && reason === null; f++) {
      reason = STABLE_FILTERS[f].check(member.n, member.slot, ctx);
    }
    if (reason === null) passing.push(pos);
    else (rejected.get(reason) ?? rejected.set(reason, []).get(reason)!).push(member);
  }
  const ordered = new Map(
    [...rejected].sort((a, b) => reasonOrder(a[0]) - reasonOrder(b[0])),
  );
  const counts: [ReasonCode, number][] = [];
  const noClass = index.nodes.length - withClass.length;
  if (noClass > 0) counts.push(["no_gpu_class", noClass]);
  for (const [r, list] of ordered) counts.push([r, list.length]);
  const byFabric = new Map<string, { pos: number[]; attachments: FabricAttachment[] }>();
  const noFabric: number[] = [];
  for (const pos of passing) {
    const fabrics = withClass[pos].n.node.fabrics;
    if (fabrics.length === 0) noFabric.push(pos);
    for (const attachment of fabrics) {
      let list = byFabric.get(attachment.fabric);
      if (list === undefined) byFabric.set(attachment.fabric, list = { pos: [], attachments: [] });
      // A node listed twice on one fabric is still one node.
      if (list.pos[list.pos.length - 1] === pos) continue;
      list.pos.push(pos);
      list.attachments.push(attachment);
    }
  }
  return {
    counts,
    rejected: ordered,
    passing: Int32Array.from(passing),
    gpuCount: Int32Array.from(passing, (pos) => withClass[pos].slot.gpus.length),
    unhealthy: Int32Array.from(passing, (pos) => withClass[pos].slot.unhealthy),
    fabrics: [...byFabric].sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
      .map(([name, l]) => [name, { pos: Int32Array.from(l.pos), attachments: l.attachments }]),
    noFabric: Int32Array.from(noFabric),
    groups: null,
  };
}
