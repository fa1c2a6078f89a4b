/**
 * Placement (design §7): a pure, deterministic function from a cluster
 * snapshot, a deployment and a replica id to a placement or an
 * unschedulable result, both explained (design §1.2).
 *
 * The hard constraints of design §1.1 hold by construction: candidates come
 * from one GPU class's node list and GPUs are taken only from that class's
 * free list; a multi-node replica is chosen from one fabric's member list,
 * and each shard gets that fabric's adapters on its node. Among fabrics that
 * can hold it, the one giving a collective the most bandwidth per node wins
 * (design §5.2), and the explanation says why each other one was passed over.
 *
 * @module
 */
import type { Deployment, Profile } from "../deployment/schema.ts";
import { factsKey, type ModelFacts } from "../models/model_facts.ts";
import type { FabricAttachment } from "../discovery/types.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { shardId } from "../protocol/ids.ts";
import {
  type ClassMember,
  type ClusterIndex,
  compareIds,
  indexCluster,
  withoutNodes,
} from "./cluster_index.ts";
import {
  describeNoClass,
  diskName,
  firstRejection,
  type ModelDisk,
  modelDisk,
  type ProfileContext,
  profileContext,
} from "./filters.ts";
import { chooseGpus } from "./gpu_choice.ts";
import {
  fabricTooSmallGroup,
  formatCount,
  GROUP_EXAMPLES,
  InsufficientTally,
  noFabricGroup,
  stableGroups,
} from "./groups.ts";
import { type ReasonCode, reasonLabel } from "./reasons.ts";
import { perNodeGbps, type StableFit, stableFit } from "./stable_fit.ts";
import type {
  DetailLevel,
  Explanation,
  FabricBandwidth,
  FabricOption,
  NodeRejection,
  PlacementResult,
  ProfileAttempt,
  RejectionGroup,
  ShardPlacement,
} from "./types.ts";

/** Options for {@link place}. */
export interface PlaceOptions {
  /**
   * Per-node detail in the explanation ({@link DetailLevel}): `false` (the
   * default) gives summaries and counts; `"grouped"` adds one group per
   * reason with its count ("8,213 nodes: insufficient_gpus — needs 8 free
   * h100-80g GPUs, has 0–4 free"), cheap at any size; `"full"` adds every
   * rejected node with its own message, which grows with the cluster.
   */
  detail?: DetailLevel;
  /**
   * Nodes to leave out, as if they were not in the cluster: where the
   * replica was refused for good before (control/replica_failures.ts). The
   * explanation counts only the other nodes.
   */
  avoid?: ReadonlySet<string>;
  /**
   * The deployment's model's facts (models/model_facts.ts), when known:
   * GPUs too small for it (`insufficient_gpu_memory`) and a tensor_parallel
   * that does not divide its heads (`tensor_parallel_heads`) are refused.
   * Absent: the index's facts for the deployment's model at its revision
   * (`ClusterIndex.models`, by `factsKey`), if any; null or unknown: nothing is refused for them.
   */
  model?: ModelFacts | null;
}

/** The outcome of trying one profile. */
interface Trial {
  attempt: ProfileAttempt;
  shards: ShardPlacement[] | null;
}

/** A node the replica would use: its position in the class's list, and its fabric attachment. */
interface Pick {
  pos: number;
  attachment: FabricAttachment | null;
}

/** A fabric as a multi-node profile sees it: its eligible nodes and the ones it would use. */
interface FabricRank {
  fabric: string;
  /** Eligible nodes on it. */
  eligible: number;
  /** The nodes it would use, best first; null when it has too few eligible nodes. */
  top: Pick[] | null;
  bandwidth: FabricBandwidth | null;
  /** Free GPUs of the class on `top`. */
  free: number;
}

/** What the choice of nodes reads: the class's members and their free GPUs, by position. */
interface Pool {
  members: ClassMember[];
  free: Int32Array;
  /** The deployment, when `spread` makes its presence on a node count; else null. */
  spreadOf: string | null;
  /** `repo@commit` of the model when known: nodes holding it are preferred; else null. */
  holds: string | null;
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
 * Never changes the index (per-profile work is memoized beside it, placement/stable_fit.ts).
 * Nodes in `options.avoid` are left out.
 *
 * @example Why a replica is unschedulable, one line per reason
 * ```ts ignore
 * const r = place(index, deployment, "llama-r0", { detail: "grouped" });
 * console.log(explanationLines(r.explanation).join("\n"));
 * ```
 */
export function place(
  index: ClusterIndex,
  deployment: Deployment,
  replicaId: string,
  options: PlaceOptions = {},
): PlacementResult {
  const detail: DetailLevel = options.detail ?? false;
  // Rare (a replica refused for good somewhere): a filtered copy, so the hot path stays as it is.
  if (options.avoid !== undefined && options.avoid.size > 0) {
    index = withoutNodes(index, options.avoid);
  }
  const commit = index.commits?.get(deployment.name) ?? null;
  const model = options.model !== undefined
    ? options.model
    : index.models?.get(factsKey(deployment.model, deployment.revision, commit)) ?? null;
  const disk = modelDisk(deployment.model, model, commit);
  const attempts: ProfileAttempt[] = [];
  for (const [i, profile] of deployment.profiles.entries()) {
    const trial = tryProfile(index, deployment, profile, replicaId, detail, model, disk);
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
  detail: DetailLevel,
  model: ModelFacts | null,
  disk: ModelDisk | null,
): Trial {
  const ctx = profileContext(profile, model, disk);
  const fit = stableFit(index, ctx);
  const pool: Pool = {
    members: index.byClass.get(profile.gpu_class) ?? [],
    free: index.freeByClass.get(profile.gpu_class) ?? new Int32Array(0),
    spreadOf: deployment.placement === "spread" ? deployment.name : null,
    holds: disk?.revision ?? null,
  };
  // The hot loop of design §16: only the nodes the stable filters passed,
  // only their free GPUs re-checked, from one compact array; no strings.
  const { passing } = fit;
  const { free } = pool;
  const gpn = profile.gpus_per_node;
  let insufficient = 0;
  const tally = detail ? new InsufficientTally(fit) : null;
  let chosen: Pick[] | null = null;
  let ranks: FabricRank[] | null = null;
  if (profile.nodes === 1) {
    let best = -1;
    for (let i = 0; i < passing.length; i++) {
      const pos = passing[i];
      if (free[pos] < gpn) {
        insufficient++;
        tally?.add(i, free[pos]);
      } else if (best === -1 || better(pos, best, pool, true)) best = pos;
    }
    if (best !== -1) chosen = [{ pos: best, attachment: null }];
  } else {
    for (let i = 0; i < passing.length; i++) {
      if (free[passing[i]] < gpn) {
        insufficient++;
        tally?.add(i, free[passing[i]]);
      }
    }
    ranks = rankFabrics(fit, pool, profile.nodes, gpn);
    chosen = ranks[0]?.top ?? null;
  }
  const fits = chosen !== null;
  const counts: [ReasonCode, number][] = [...fit.counts];
  if (insufficient > 0) counts.push(["insufficient_gpus", insufficient]);
  // Eligible nodes of an unschedulable multi-node profile: why they were of no use.
  const onNoFabric: ClassMember[] = [];
  const onSmallFabrics: ClassMember[] = [];
  if (!fits && ranks !== null) {
    const eligible = passing.length - insufficient;
    const noFabric = fit.noFabric.reduce((k, pos) => k + (free[pos] >= gpn ? 1 : 0), 0);
    if (noFabric > 0) counts.push(["no_fabric", noFabric]);
    if (eligible - noFabric > 0) counts.push(["fabric_too_small", eligible - noFabric]);
    for (let i = 0; detail && i < passing.length; i++) {
      if (free[passing[i]] < gpn) continue;
      const m = pool.members[passing[i]];
      (m.n.node.fabrics.length === 0 ? onNoFabric : onSmallFabrics).push(m);
    }
  }
  const total = index.nodes.length;
  const attempt: ProfileAttempt = {
    profile: profile.name,
    fits,
    summary: fits
      ? fitSummary(chosen!.map((c) => pool.members[c.pos]), ranks, ctx, total) +
        holdersText(chosen!.map((c) => pool.members[c.pos]), ctx)
      : `0/${total} nodes fit: ${countsText(counts, profile)}`,
    counts: Object.fromEntries(counts),
  };
  if (ranks !== null) attempt.fabrics = ranks.map((r) => fabricOption(r, ranks![0], fits, ctx));
  if (detail) {
    const groups: RejectionGroup[] = stableGroups(index, fit, ctx);
    const tooFew = tally!.group(pool.members, ctx);
    if (tooFew !== null) groups.push(tooFew);
    if (onNoFabric.length > 0) groups.push(noFabricGroup(onNoFabric, ctx));
    if (onSmallFabrics.length > 0) {
      groups.push(fabricTooSmallGroup(onSmallFabrics, ctx, ranks!));
    }
    attempt.groups = groups;
  }
  if (detail === "full") {
    const eligibleOn = fits || ranks === null
      ? null
      : new Map(ranks.map((r) => [r.fabric, r.eligible]));
    attempt.nodes = explainNodes(index, ctx, eligibleOn);
  }
  if (!fits) return { attempt, shards: null };
  const fabric = ranks === null ? null : ranks[0].fabric;
  return { attempt, shards: buildShards(chosen!, pool, fabric, profile, replicaId) };
}

/**
 * Whether the node at position `a` is a better pick than the one at `b`:
 * `spread` first avoids the deployment's nodes; then a node whose model
 * cache holds the model's revision (no download) beats one that does not;
 * then, for single-node replicas, fewer free GPUs (bin packing, design §7),
 * for multi-node ones more (the emptiest). Strictly better only, so among
 * equals the first in node order (natural id order) wins. Only nodes that
 * passed every filter are compared: holding never beats a hard constraint.
 */
function better(a: number, b: number, pool: Pool, fewest: boolean): boolean {
  if (pool.spreadOf !== null) {
    const da = pool.members[a].n.deployments.has(pool.spreadOf);
    if (da !== pool.members[b].n.deployments.has(pool.spreadOf)) return !da;
  }
  if (pool.holds !== null) {
    const ha = holdsModel(pool.members[a], pool.holds);
    if (ha !== holdsModel(pool.members[b], pool.holds)) return ha;
  }
  return fewest ? pool.free[a] < pool.free[b] : pool.free[a] > pool.free[b];
}

/** Whether a node's model cache holds `revision` (`repo@commit`) complete. */
function holdsModel(m: ClassMember, revision: string): boolean {
  return m.n.cache?.holds.has(revision) ?? false;
}

/**
 * Multi-node: fabrics are considered one at a time, each with only its own
 * members, so no code path can combine nodes of two fabrics (design §1.1).
 * On each fabric the emptiest eligible nodes are taken; the fabric whose
 * nodes give a collective the most bandwidth per node wins (the minimum over
 * them of active HCAs × slowest active port rate: a collective runs at its
 * slowest member, design §5.2), then the one whose nodes are emptiest, then
 * the first by name. Returned best first; fabrics with too few eligible
 * nodes come last, by name; fabrics with none are left out.
 */
function rankFabrics(fit: StableFit, pool: Pool, count: number, gpn: number): FabricRank[] {
  const { free } = pool;
  const ranks: FabricRank[] = [];
  for (const [fabric, list] of fit.fabrics) {
    // The `count` best in one pass: insertion into a short sorted list. Equals
    // keep node order, as a stable sort by node id would.
    const top: Pick[] = [];
    let eligible = 0;
    for (let i = 0; i < list.pos.length; i++) {
      const pos = list.pos[i];
      if (free[pos] < gpn) continue;
      eligible++;
      if (top.length === count && !better(pos, top[count - 1].pos, pool, false)) continue;
      let at = top.length;
      while (at > 0 && better(pos, top[at - 1].pos, pool, false)) at--;
      top.splice(at, 0, { pos, attachment: list.attachments[i] });
      if (top.length > count) top.pop();
    }
    if (eligible === 0) continue;
    if (eligible < count) {
      ranks.push({ fabric, eligible, top: null, bandwidth: null, free: 0 });
      continue;
    }
    let slowest = top[0];
    for (const t of top) {
      const a = perNodeGbps(t.attachment!) ?? -1;
      const b = perNodeGbps(slowest.attachment!) ?? -1;
      if (a < b || (a === b && t.pos < slowest.pos)) slowest = t;
    }
    ranks.push({
      fabric,
      eligible,
      top,
      bandwidth: {
        per_node_gbps: perNodeGbps(slowest.attachment!),
        node: pool.members[slowest.pos].n.node.id,
        hcas: slowest.attachment!.hcas.length,
        rate_gbps: slowest.attachment!.rate_gbps,
      },
      free: top.reduce((sum, t) => sum + free[t.pos], 0),
    });
  }
  return ranks.sort(compareRanks);
}

/** Best fabric first: enough nodes, bandwidth (unknown lowest), free GPUs, name. */
function compareRanks(a: FabricRank, b: FabricRank): number {
  if ((a.top === null) !== (b.top === null)) return a.top === null ? 1 : -1;
  if (a.top !== null) {
    const d = (b.bandwidth!.per_node_gbps ?? -1) - (a.bandwidth!.per_node_gbps ?? -1);
    if (d !== 0) return d;
    if (a.free !== b.free) return b.free - a.free;
  }
  return a.fabric < b.fabric ? -1 : a.fabric > b.fabric ? 1 : 0;
}

/** "8 × 400 Gb/s = 3,200 Gb/s", or why it is unknown. */
function bandwidthText(b: FabricBandwidth): string {
  if (b.per_node_gbps === null) return `unknown bandwidth (node ${b.node} reports no port rate)`;
  return `${b.hcas} × ${formatCount(b.rate_gbps!)} Gb/s = ${formatCount(b.per_node_gbps)} Gb/s`;
}

/** Why a fabric was chosen or passed over, against the best one. */
function fabricWhy(r: FabricRank, best: FabricRank, placed: boolean, ctx: ProfileContext): string {
  const need = ctx.profile.nodes;
  if (r.top === null) {
    return `only ${r.eligible} eligible node${r.eligible === 1 ? "" : "s"}, needs ${need}`;
  }
  const cls = ctx.profile.gpu_class;
  const bw = r.bandwidth!;
  if (r === best) return `${bandwidthText(bw)} per node, ${r.free} free ${cls} GPUs on its nodes`;
  if (!placed) return `${bandwidthText(bw)} per node`;
  const top = best.bandwidth!;
  if (bw.per_node_gbps !== top.per_node_gbps) {
    return `${bandwidthText(bw)} per node < ${best.fabric} ${bandwidthText(top)}`;
  }
  const same = bw.per_node_gbps === null
    ? `bandwidth unknown, as on ${best.fabric}`
    : `same ${formatCount(bw.per_node_gbps)} Gb/s per node as ${best.fabric}`;
  if (r.free !== best.free) {
    return `${same}, but ${r.free} free ${cls} GPUs on the nodes it would use < ${best.free}`;
  }
  return `${same}, as many free GPUs (${r.free}), and ${best.fabric} comes first by name`;
}

function fabricOption(
  r: FabricRank,
  best: FabricRank,
  placed: boolean,
  ctx: ProfileContext,
): FabricOption {
  return {
    fabric: r.fabric,
    eligible_nodes: r.eligible,
    chosen: placed && r === best,
    bandwidth: r.bandwidth === null ? null : { ...r.bandwidth },
    free_gpus: r.top === null ? null : r.free,
    why: fabricWhy(r, best, placed, ctx),
  };
}

function buildShards(
  chosen: Pick[],
  pool: Pool,
  fabric: string | null,
  profile: Profile,
  replicaId: string,
): ShardPlacement[] {
  // Position order is node order: ranks follow node id.
  return [...chosen].sort((a, b) => a.pos - b.pos).map((c, rank) => {
    const { n, slot } = pool.members[c.pos];
    return {
      rank,
      shard_id: shardId(replicaId, rank),
      node: n.node.id,
      gpu_indices: chooseGpus(slot.gpus, slot.free, profile.gpus_per_node),
      gpu_class: profile.gpu_class,
      fabric,
      hcas: c.attachment === null ? [] : [...c.attachment.hcas],
      hca_ports: c.attachment === null ? [] : c.attachment.ports.map((p) => ({ ...p })),
    };
  });
}

function countsText(counts: [ReasonCode, number][], profile: Profile): string {
  return counts.map(([r, n]) => `${n} ${reasonLabel(r, profile)}`)
    .join(", ");
}

/** How many passed-over fabrics a summary names before "and N more". */
const PASSED_OVER_IN_SUMMARY = 3;

function fitSummary(
  chosen: ClassMember[],
  ranks: FabricRank[] | null,
  ctx: ProfileContext,
  total: number,
): string {
  const nodes = chosen.map((c) => c.n.node.id).sort(compareIds).join(", ");
  if (ranks === null) return `fits on ${nodes} (of ${total} nodes)`;
  const head = `fits on ${nodes} over fabric ${ranks[0].fabric} (of ${total} nodes)`;
  const passed = ranks.slice(1);
  const named = passed.slice(0, PASSED_OVER_IN_SUMMARY)
    .map((r) => `; fabric ${r.fabric} passed over: ${fabricWhy(r, ranks[0], true, ctx)}`);
  const more = passed.length - named.length;
  return head + named.join("") + (more > 0 ? `; and ${more} more fabrics passed over` : "");
}

/** "; n2 holds acme/llm@4b1c2a9" for the chosen nodes whose cache holds the revision; else "". */
function holdersText(chosen: ClassMember[], ctx: ProfileContext): string {
  const rev = ctx.disk?.revision ?? null;
  if (rev === null) return "";
  const holders = chosen.filter((m) => holdsModel(m, rev)).map((m) => m.n.node.id).sort(compareIds);
  if (holders.length === 0) return "";
  return `; ${holders.join(", ")} ${holders.length === 1 ? "holds" : "hold"} ${
    diskName(ctx.disk!)
  }`;
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

/**
 * Every rejected node with its own message, in node order; computed only for
 * detail "full". `eligibleOn` (fabric → eligible nodes) is given when a
 * multi-node profile did not fit, so eligible nodes are explained too.
 */
function explainNodes(
  index: ClusterIndex,
  ctx: ProfileContext,
  eligibleOn: Map<string, number> | null,
): NodeRejection[] {
  const out: NodeRejection[] = [];
  const profile = ctx.profile;
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
    } else if (eligibleOn !== null && n.node.fabrics.length === 0) {
      out.push({
        node: n.node.id,
        reason: "no_fabric",
        message: `a ${profile.nodes}-node replica needs nodes on a fabric; this node is on none`,
      });
    } else if (eligibleOn !== null) {
      const on = [...new Set(n.node.fabrics.map((f) => f.fabric))]
        .map((f) => `${f} has ${eligibleOn.get(f) ?? 0}`);
      out.push({
        node: n.node.id,
        reason: "fabric_too_small",
        message: `needs ${profile.nodes} eligible nodes on one fabric: ${on.join(", ")}`,
      });
    }
  }
  return out;
}

/** Options for {@link explanationLines}. */
export interface ExplanationLinesOptions {
  /**
   * Every rejected node on its own line, and every fabric considered, instead
   * of the grouped lines. Either form falls back to the other when the
   * explanation lacks it (it was placed with less or more detail).
   */
  detail?: boolean;
}

/**
 * An explanation as text lines, for people (`llmgw plan`, `llmgw explain`):
 * the summary, one line per profile tried, and under each its rejections,
 * grouped by reason by default:
 *
 * ```text
 *   profile h100-tp8: does not fit: 0/10000 nodes fit: 7500 no h100-80g GPUs, …
 *     7,500 nodes: no_gpu_class — no h100-80g GPUs (they have a100-80g, l40s-45g) (e.g. node-0, node-1, node-3)
 * ```
 */
export function explanationLines(
  explanation: Explanation,
  options: ExplanationLinesOptions = {},
): string[] {
  const lines = [explanation.summary];
  for (const a of explanation.profiles) {
    lines.push(`  profile ${a.profile}: ${a.fits ? "fits" : "does not fit"}: ${a.summary}`);
    const perNode = options.detail
      ? a.nodes ?? null
      : a.groups === undefined
      ? a.nodes ?? null
      : null;
    if (perNode !== null) {
      for (const r of perNode) lines.push(`    ${r.node}: ${r.reason}: ${r.message}`);
    } else {
      for (const g of a.groups ?? []) lines.push(`    ${groupLine(g)}`);
    }
    if (options.detail) {
      for (const f of a.fabrics ?? []) {
        lines.push(`    fabric ${f.fabric}: ${f.chosen ? "chosen" : "not chosen"}: ${f.why}`);
      }
    }
  }
  return lines;
}

/** "8,213 nodes: insufficient_gpus — needs 8 free h100-80g GPUs, has 0–4 free (e.g. n1, n2, n3)". */
function groupLine(g: RejectionGroup): string {
  const some = g.examples.length < g.count || g.count > GROUP_EXAMPLES;
  return `${formatCount(g.count)} node${g.count === 1 ? "" : "s"}: ${g.reason} — ${g.message} (${
    some ? "e.g. " : ""
  }${g.examples.join(", ")})`;
}
