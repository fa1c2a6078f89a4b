/**
 * Placement (plan §7): a pure, deterministic function from a cluster
 * snapshot, a deployment and a replica id to a placement or an
 * unschedulable result, both explained (plan §1.2).
 *
 * The hard constraints of plan §1.1 hold by construction: candidates come
 * from one GPU class's node list and GPUs are taken only from that class's
 * free list; a multi-node replica is chosen from one fabric's member list,
 * and each shard gets that fabric's adapters on its node.
 *
 * @module
 */
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { ClusterNode } from "../inventory/types.ts";
import {
  type ClassMember,
  type ClusterIndex,
  compareIds,
  indexCluster,
  type IndexedNode,
} from "./cluster_index.ts";
import {
  describeNoClass,
  firstRejection,
  NODE_FILTERS,
  type ProfileContext,
  profileContext,
} from "./filters.ts";
import { chooseGpus } from "./gpu_choice.ts";
import { type ReasonCode, reasonLabel, reasonOrder } from "./reasons.ts";
import type {
  Explanation,
  NodeRejection,
  PlacementResult,
  ProfileAttempt,
  ShardPlacement,
} from "./types.ts";

/** Options for {@link place}. */
export interface PlaceOptions {
  /** Include per-node rejections in the explanation (costs time on large clusters). */
  detail?: boolean;
}

/** A node that passed every filter, with its slot of the profile's class. */
type Candidate = ClassMember;

/** The outcome of trying one profile. */
interface Trial {
  attempt: ProfileAttempt;
  shards: ShardPlacement[] | null;
}

/** Places one replica on a plain snapshot. See {@link place}. */
export function placeReplica(
  nodes: readonly ClusterNode[],
  deployment: Deployment,
  replicaId: string,
  options: PlaceOptions = {},
): PlacementResult {
  return place(indexCluster(nodes), deployment, replicaId, options);
}

/**
 * Places one replica: profiles in priority order, the first that fits wins.
 * Never changes the index.
 */
export function place(
  index: ClusterIndex,
  deployment: Deployment,
  replicaId: string,
  options: PlaceOptions = {},
): PlacementResult {
  const attempts: ProfileAttempt[] = [];
  for (const [i, profile] of deployment.profiles.entries()) {
    const trial = tryProfile(index, deployment, profile, replicaId, options);
    attempts.push(trial.attempt);
    if (trial.shards !== null) {
      return {
        status: "placed",
        replica_id: replicaId,
        deployment: deployment.name,
        profile: profile.name,
        engine: profile.engine,
        shards: trial.shards,
        explanation: { summary: placedSummary(deployment, i, attempts), profiles: attempts },
      };
    }
  }
  return {
    status: "unschedulable",
    replica_id: replicaId,
    deployment: deployment.name,
    explanation: {
      summary: `no profile fits: ${
        attempts.map((a) => `profile "${a.profile}": ${a.summary}`).join("; ")
      }`,
      profiles: attempts,
    },
  };
}

function tryProfile(
  index: ClusterIndex,
  deployment: Deployment,
  profile: Profile,
  replicaId: string,
  options: PlaceOptions,
): Trial {
  const ctx = profileContext(profile);
  // The hot loop of plan §16: only nodes with the class, no strings built.
  const rejectedBy = new Map<ReasonCode, number>();
  const withClass = index.byClass.get(profile.gpu_class) ?? [];
  const candidates: Candidate[] = [];
  for (const member of withClass) {
    let reason: ReasonCode | null = null;
    for (let f = 0; f < NODE_FILTERS.length && reason === null; f++) {
      reason = NODE_FILTERS[f].check(member.n, member.slot, ctx);
    }
    if (reason === null) candidates.push(member);
    else rejectedBy.set(reason, (rejectedBy.get(reason) ?? 0) + 1);
  }
  const counts = new Map<ReasonCode, number>();
  const noClass = index.nodes.length - withClass.length;
  if (noClass > 0) counts.set("no_gpu_class", noClass);
  for (const [r, c] of rejectedBy) counts.set(r, c);
  const bump = (r: ReasonCode) => counts.set(r, (counts.get(r) ?? 0) + 1);
  const spread = deployment.placement === "spread";
  let chosen: Candidate[] | null;
  let fabric: string | null = null;
  let fabricRejects = new Map<IndexedNode, ReasonCode>();
  if (profile.nodes === 1) {
    chosen = candidates.length === 0 ? null : [pickSingle(candidates, deployment.name, spread)];
  } else {
    const multi = pickMulti(candidates, profile.nodes, deployment.name, spread);
    chosen = multi.chosen;
    fabric = multi.fabric;
    fabricRejects = multi.rejected;
    if (chosen === null) { for (const r of fabricRejects.values()) bump(r); }
  }
  const total = index.nodes.length;
  const fits = chosen !== null;
  const attempt: ProfileAttempt = {
    profile: profile.name,
    fits,
    summary: fits
      ? fitSummary(chosen!, fabric, total)
      : `0/${total} nodes fit: ${countsText(counts, profile)}`,
    counts: Object.fromEntries([...counts].sort((a, b) => reasonOrder(a[0]) - reasonOrder(b[0]))),
  };
  if (options.detail) {
    attempt.nodes = explainNodes(index, ctx, fits ? new Map() : fabricRejects, candidates, profile);
  }
  if (!fits) return { attempt, shards: null };
  return { attempt, shards: buildShards(chosen!, fabric, profile, replicaId) };
}

/** Bin packing (plan §7): the fewest free GPUs that still fit; `spread` first avoids the deployment's nodes. */
function pickSingle(candidates: Candidate[], deployment: string, spread: boolean): Candidate {
  let best = candidates[0];
  for (const c of candidates) {
    if (singleKeyLess(c, best, deployment, spread)) best = c;
  }
  return best;
}

function singleKeyLess(a: Candidate, b: Candidate, deployment: string, spread: boolean): boolean {
  if (spread) {
    const da = a.n.deployments.has(deployment) ? 1 : 0;
    const db = b.n.deployments.has(deployment) ? 1 : 0;
    if (da !== db) return da < db;
  }
  if (a.slot.free.length !== b.slot.free.length) return a.slot.free.length < b.slot.free.length;
  return compareIds(a.n.node.id, b.n.node.id) < 0;
}

/** Emptiest first for multi-node replicas (plan §7); `spread` first avoids the deployment's nodes. */
function multiKey(a: Candidate, b: Candidate, deployment: string, spread: boolean): number {
  if (spread) {
    const d = (a.n.deployments.has(deployment) ? 1 : 0) - (b.n.deployments.has(deployment) ? 1 : 0);
    if (d !== 0) return d;
  }
  return b.slot.free.length - a.slot.free.length || compareIds(a.n.node.id, b.n.node.id);
}

/**
 * Multi-node: fabrics are considered one at a time, each with only its own
 * members, so no code path can combine nodes of two fabrics (plan §1.1). The
 * fabric whose chosen nodes are emptiest wins; ties break on fabric name.
 */
function pickMulti(
  candidates: Candidate[],
  count: number,
  deployment: string,
  spread: boolean,
): { chosen: Candidate[] | null; fabric: string | null; rejected: Map<IndexedNode, ReasonCode> } {
  const members = new Map<string, Candidate[]>();
  const rejected = new Map<IndexedNode, ReasonCode>();
  for (const c of candidates) {
    if (c.n.node.fabrics.length === 0) rejected.set(c.n, "no_fabric");
    for (const f of c.n.node.fabrics) {
      let list = members.get(f.fabric);
      if (list === undefined) members.set(f.fabric, list = []);
      // A node listed twice on one fabric is still one node.
      if (list[list.length - 1] !== c) list.push(c);
    }
  }
  let best: { fabric: string; chosen: Candidate[]; free: number } | null = null;
  for (const fabric of [...members.keys()].sort()) {
    const list = members.get(fabric)!;
    if (list.length < count) continue;
    const chosen = [...list].sort((a, b) => multiKey(a, b, deployment, spread)).slice(0, count);
    const free = chosen.reduce((sum, c) => sum + c.slot.free.length, 0);
    if (best === null || free > best.free) best = { fabric, chosen, free };
  }
  if (best !== null) return { chosen: best.chosen, fabric: best.fabric, rejected };
  for (const c of candidates) if (!rejected.has(c.n)) rejected.set(c.n, "fabric_too_small");
  return { chosen: null, fabric: null, rejected };
}

function buildShards(
  chosen: Candidate[],
  fabric: string | null,
  profile: Profile,
  replicaId: string,
): ShardPlacement[] {
  return [...chosen].sort((a, b) => compareIds(a.n.node.id, b.n.node.id)).map((c, rank) => {
    const attachment = fabric === null
      ? undefined
      : c.n.node.fabrics.find((f) => f.fabric === fabric);
    return {
      rank,
      shard_id: `${replicaId}/${rank}`,
      node: c.n.node.id,
      gpu_indices: chooseGpus(c.slot.gpus, c.slot.free, profile.gpus_per_node),
      gpu_class: profile.gpu_class,
      fabric,
      hcas: attachment === undefined ? [] : [...attachment.hcas],
      hca_ports: attachment === undefined ? [] : attachment.ports.map((p) => ({ ...p })),
    };
  });
}

function countsText(counts: Map<ReasonCode, number>, profile: Profile): string {
  return [...counts].sort((a, b) => reasonOrder(a[0]) - reasonOrder(b[0]))
    .map(([r, n]) => `${n} ${reasonLabel(r, profile.gpu_class, profile.quantization)}`).join(", ");
}

function fitSummary(chosen: Candidate[], fabric: string | null, total: number): string {
  const nodes = chosen.map((c) => c.n.node.id).sort(compareIds).join(", ");
  return fabric === null
    ? `fits on ${nodes} (of ${total} nodes)`
    : `fits on ${nodes} over fabric ${fabric} (of ${total} nodes)`;
}

function placedSummary(deployment: Deployment, used: number, attempts: ProfileAttempt[]): string {
  const profile = deployment.profiles[used];
  const head = `placed with profile "${profile.name}"`;
  if (used === 0) return `${head}: ${attempts[0].summary}`;
  const why = attempts.slice(0, used).map((a) => `profile "${a.profile}": ${a.summary}`).join("; ");
  return `${head} (choice ${used + 1} of ${deployment.profiles.length}): ${
    attempts[used].summary
  }; ${why}`;
}

/** Per-node rejections for one profile, in node order, computed on demand. */
function explainNodes(
  index: ClusterIndex,
  ctx: ProfileContext,
  fabricRejects: Map<IndexedNode, ReasonCode>,
  candidates: Candidate[],
  profile: Profile,
): NodeRejection[] {
  const out: NodeRejection[] = [];
  const eligibleByFabric = new Map<string, number>();
  for (const c of candidates) {
    for (const f of c.n.node.fabrics) {
      eligibleByFabric.set(f.fabric, (eligibleByFabric.get(f.fabric) ?? 0) + 1);
    }
  }
  for (const n of index.nodes) {
    const slot = n.classes.get(profile.gpu_class);
    if (slot === undefined) {
      out.push({ node: n.node.id, reason: "no_gpu_class", message: describeNoClass(n, ctx) });
      continue;
    }
    const first = firstRejection(n, slot, ctx);
    if (first !== null) {
      out.push({
        node: n.node.id,
        reason: first.reason,
        message: first.filter.describe(n, slot, ctx),
      });
      continue;
    }
    const fr = fabricRejects.get(n);
    if (fr === "no_fabric") {
      out.push({
        node: n.node.id,
        reason: fr,
        message: `a ${profile.nodes}-node replica needs nodes on a fabric; this node is on none`,
      });
    } else if (fr === "fabric_too_small") {
      const on = n.node.fabrics.map((f) =>
        `${f.fabric} has ${eligibleByFabric.get(f.fabric) ?? 0}`
      );
      out.push({
        node: n.node.id,
        reason: fr,
        message: `needs ${profile.nodes} eligible nodes on one fabric: ${on.join(", ")}`,
      });
    }
  }
  return out;
}

/** The explanation of a result as text lines, for people. */
export function explanationLines(explanation: Explanation): string[] {
  const lines = [explanation.summary];
  for (const a of explanation.profiles) {
    lines.push(`  profile ${a.profile}: ${a.fits ? "fits" : "does not fit"}: ${a.summary}`);
    for (const r of a.nodes ?? []) lines.push(`    ${r.node}: ${r.reason}: ${r.message}`);
  }
  return lines;
}
