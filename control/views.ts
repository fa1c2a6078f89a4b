/**
 * What the API shows of replicas and what gateways may route to, built from
 * stored placements (ports included) and the agents' last reports. Nothing
 * here asks an engine plugin: a view is a read.
 *
 * @module
 */
import type { Explanation, ShardPlacement } from "../placement/types.ts";
import { CRASH_LOOP_FROM, type ShardReport } from "../protocol/agent_protocol.ts";
import type { EndpointSpec } from "../protocol/gateway_protocol.ts";
import type { ColdStartReceipt } from "../protocol/cold_start_receipt.ts";
import type { ShardDownload } from "../protocol/shard_download.ts";
import type { ControlState } from "./state.ts";
import { type ReplicaFailure, replicaRevision, type StoredReplica } from "./store/store.ts";

/**
 * A shard of a replica as the API shows it: where it was placed
 * (`ShardPlacement`) joined with its agent's last report (`ShardReport`).
 */
export interface ShardView
  extends
    Pick<ShardPlacement, "shard_id" | "rank" | "node" | "gpu_indices">,
    Pick<ShardReport, "progress" | "last_failure" | "restarts"> {
  /** Port it serves on, as its agent reported it (kept with the placement). */
  port: number;
  /** What its agent last reported; `unknown` before the first report. */
  state: ShardReport["state"] | "unknown";
  /**
   * Set while the shard is crash-looping: not ready, and failed at least
   * {@link CRASH_LOOP_FROM} times in a row; the agent gives up at `limit`.
   */
  crash_loop: { failures: number; limit: number } | null;
  /** The current run's cold-start receipt, as reported; null when none (issue #25 item 7). */
  cold_start: ColdStartReceipt | null;
  /** Its model's download while it is `downloading`, as reported; null otherwise (issue #25). */
  download: ShardDownload | null;
}

/** A replica's state as the API shows it. */
export type ReplicaState = "pending" | "downloading" | "starting" | "loading" | "ready" | "failed";

/** A replica as the API shows it. */
export interface ReplicaView {
  /** Replica id. */
  id: string;
  /** Deployment. */
  deployment: string;
  /** pending, downloading, starting, loading, ready or failed, from the phase and the shards' reports. */
  state: ReplicaState;
  /** The profile used, when placed. */
  profile: string | null;
  /** Shards, when placed. */
  shards: ShardView[];
  /** Why it is where it is, or why it is pending. */
  explanation: Explanation | null;
  /** The last failure that retrying cannot change, with its log tail; null when none. */
  failure: ReplicaFailure | null;
  /** The deployment revision it is built from (design §6.3). */
  revision: number;
  /** When its current placement's shards first all reported ready; null before. */
  ready_at: number | null;
  /** When it left the gateways' endpoints ahead of being replaced; null while it serves. */
  retiring_at: number | null;
}

/** A replica's view. */
export function replicaView(state: ControlState, r: StoredReplica): ReplicaView {
  const shards: ShardView[] = (r.placement?.shards ?? []).map((s) => {
    const report = state.reports.get(s.node)?.get(s.shard_id);
    return {
      shard_id: s.shard_id,
      rank: s.rank,
      node: s.node,
      gpu_indices: s.gpu_indices,
      port: r.placement?.ports.http[s.shard_id] ?? 0,
      state: report?.state ?? "unknown",
      progress: report?.progress ?? null,
      last_failure: report?.last_failure ?? null,
      restarts: report?.restarts ?? 0,
      crash_loop: crashLoop(report),
      cold_start: report?.cold_start ?? null,
      download: report?.state === "downloading" ? report.download ?? null : null,
    };
  });
  return {
    id: r.id,
    deployment: r.deployment,
    state: replicaState(r, shards),
    profile: r.placement?.profile ?? null,
    shards,
    explanation: r.explanation,
    failure: r.failure ?? null,
    revision: replicaRevision(r),
    ready_at: r.placement?.ready_at ?? null,
    retiring_at: r.placement?.retiring_at ?? null,
  };
}

/** A shard's crash loop as shown: while it is not ready and its restart did not help. */
function crashLoop(report: ShardReport | undefined): ShardView["crash_loop"] {
  const c = report?.crash_loop;
  if (c === null || c === undefined || report?.state === "ready") return null;
  return c.failures >= CRASH_LOOP_FROM ? { failures: c.failures, limit: c.limit } : null;
}

/** Whether a replica is placed and every one of its shards reports ready. */
export function isReady(state: ControlState, r: StoredReplica): boolean {
  if (r.phase !== "placed" || r.placement === null || r.placement.shards.length === 0) return false;
  return r.placement.shards.every((s) =>
    state.reports.get(s.node)?.get(s.shard_id)?.state === "ready"
  );
}

/**
 * A replica's state: its phase, then the worst of its shards' reports; a
 * shard still fetching its model holds the whole replica back, so
 * `downloading` comes before `loading`.
 */
export function replicaState(
  r: Pick<StoredReplica, "phase">,
  shards: readonly Pick<ShardView, "state">[],
): ReplicaState {
  if (r.phase === "failed") return "failed";
  if (r.phase !== "placed") return "pending";
  const states = shards.map((s) => s.state);
  if (states.length > 0 && states.every((s) => s === "ready")) return "ready";
  if (states.some((s) => s === "failed")) return "failed";
  if (states.some((s) => s === "downloading")) return "downloading";
  if (states.some((s) => s === "loading")) return "loading";
  return "starting";
}

/** Every replica's view. */
export function replicaViews(state: ControlState): ReplicaView[] {
  return [...state.replicas.values()].map((r) => replicaView(state, r));
}

/** Rank-0 endpoints of ready replicas: where gateways may send traffic. */
export function readyEndpoints(state: ControlState): EndpointSpec[] {
  const out: EndpointSpec[] = [];
  for (const r of state.replicas.values()) {
    if (r.phase !== "placed" || r.placement === null) continue;
    const leader = r.placement.shards.find((s) => s.rank === 0);
    const node = leader === undefined ? undefined : state.nodes.get(leader.node);
    // The replica's own revision's spec: during a rollout old and new replicas both serve.
    const spec = state.specOf(r);
    if (leader === undefined || node === undefined || spec === undefined) continue;
    // A replica being replaced leaves the endpoints before it stops (design §6.3).
    if (!isReady(state, r) || (r.placement.retiring_at ?? null) !== null) continue;
    const reg = node.registration;
    const names = state.reports.get(leader.node)?.get(leader.shard_id)?.load_metrics;
    const load = names === null || names === undefined ? {} : { load_metrics: names };
    // Through the node's engine proxy when it has one: engines listen on loopback.
    out.push(
      reg.proxy_url !== undefined && reg.proxy_url !== null && reg.proxy_token !== undefined
        ? {
          model: spec.served_model_name,
          replica_id: r.id,
          url: reg.proxy_url.replace(/\/$/, ""),
          shard: leader.shard_id,
          token: reg.proxy_token,
          ...load,
        }
        : {
          model: spec.served_model_name,
          replica_id: r.id,
          url: `http://${reg.mgmt_addr}:${r.placement.ports.http[leader.shard_id]}`,
          ...load,
        },
    );
  }
  return out;
}

/**
 * Whether the ready set is known. After a restart, replicas' states come
 * back only with their nodes' first heartbeats; until every node holding a
 * placed shard has reported (or the unreachable threshold has passed), the
 * ready set would look empty and gateways would drop all traffic to engines
 * that never stopped serving.
 */
export function endpointsSettled(state: ControlState, now = state.now()): boolean {
  return state.awaitingFirstReport.size === 0 ||
    now - state.startedAt >= state.inventory.thresholds.unreachable_after_ms;
}
