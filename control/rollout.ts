/**
 * The rollout planner (design §6.3): given a deployment's replicas as they
 * stand, the one next thing to do to move them to the target revision. Pure;
 * the reconciler's `roll_out` step (control/rollout_step.ts) reads the books
 * into a {@link RolloutView}, asks, and acts, once per pass.
 *
 * The rule, Kubernetes-Deployment style: old replicas are replaced one at a
 * time. When capacity is free the new one starts first (surge 1) and the old
 * one goes only once the new one is ready; otherwise one old replica is taken
 * down and rebuilt in place (max unavailable 1), and only while every index
 * has a ready replica. Old replicas that serve nothing are replaced first,
 * since replacing them costs nothing. A step waits for readiness (every
 * shard `ready`); no progress within the deadline, or a new replica that
 * failed for good, fails the rollout, which the step then reverts.
 *
 * @module
 */
import { compareNatural } from "../text/natural_order.ts";
import { replicaId, surgeReplicaId } from "../protocol/ids.ts";
import type { RolloutStepRecord } from "./store/store.ts";

/** A replica as the planner sees it. */
export interface RolloutReplica {
  /** Replica id. */
  id: string;
  /** Its ordinal: replicas sharing one are an old replica and its replacement. */
  index: number;
  /** Whether its revision runs what the target runs. */
  current: boolean;
  /** Placed, with every shard reporting ready. */
  ready: boolean;
  /** Given up on (`failed`): the reason, else null. */
  failed: string | null;
}

/** What the planner decides from. */
export interface RolloutView {
  /** The replica count. */
  desired: number;
  /** The deployment's replicas, any revision. */
  replicas: readonly RolloutReplica[];
  /** The step under way. */
  step: RolloutStepRecord | null;
  /** Now (ms). */
  now: number;
  /** The last progress (ms): the deadline counts from it. */
  progressAt: number;
  /** The progress deadline (ms). */
  deadlineMs: number;
  /** False for an automatic revert: it is never reverted again, so it never fails. */
  revertible: boolean;
}

/** The one next thing to do. */
export type RolloutDecision =
  /** Remove an old replica: `by` (ready) replaced it, or (null) it served nothing. */
  | { kind: "retire"; id: string; by: string | null }
  /** Start a new replica at `index`, to replace `replaces` once it is ready. */
  | { kind: "surge"; replaces: string; index: number }
  /** Take an old replica down and rebuild it on the target revision. */
  | { kind: "replace"; id: string }
  /** The in-place step's replica is ready. */
  | { kind: "step_done"; id: string }
  /** Nothing to do until something changes. */
  | { kind: "wait"; reason: string }
  /** Every replica runs the target revision. */
  | { kind: "complete" }
  /** Stop and revert. */
  | { kind: "fail"; reason: string };

/**
 * The next decision. `surgeFits` answers whether one more replica of the
 * target revision, at `index`, would be placed now; it is asked only when
 * it matters, and at most once.
 */
export function planRollout(
  v: RolloutView,
  surgeFits: (index: number) => boolean,
): RolloutDecision {
  const live = v.replicas.filter((r) => r.index < v.desired)
    .sort((a, b) => a.index - b.index || compareNatural(a.id, b.id));
  if (v.revertible) {
    const failed = live.find((r) => r.current && r.failed !== null);
    if (failed !== undefined) {
      return { kind: "fail", reason: `replica ${failed.id} failed: ${failed.failed}` };
    }
  }
  const byIndex = new Map<number, RolloutReplica[]>();
  for (const r of live) byIndex.set(r.index, [...(byIndex.get(r.index) ?? []), r]);
  // An old replica beside a current one goes once that one is ready, or at
  // once when it serves nothing (a surge left behind by a revert, say).
  for (const group of byIndex.values()) {
    const current = group.filter((r) => r.current);
    if (current.length === 0) continue;
    const ready = current.find((r) => r.ready);
    for (const old of group.filter((r) => !r.current)) {
      if (ready !== undefined) return { kind: "retire", id: old.id, by: ready.id };
      if (!old.ready) return { kind: "retire", id: old.id, by: null };
    }
  }
  if (v.step?.mode === "in_place") {
    const r = live.find((x) => x.id === v.step!.by);
    if (r === undefined || (r.current && r.ready)) return { kind: "step_done", id: v.step.by };
  }
  const late = v.revertible && v.now - v.progressAt > v.deadlineMs;
  const seconds = Math.round(v.deadlineMs / 1000);
  const waiting = live.filter((r) => r.current && !r.ready);
  if (waiting.length > 0) {
    const ids = waiting.map((r) => r.id).join(", ");
    if (late) {
      return { kind: "fail", reason: `${ids} not ready within the ${seconds} s progress deadline` };
    }
    return { kind: "wait", reason: `waiting for ${ids} to become ready` };
  }
  const old = live.filter((r) => !r.current);
  if (old.length === 0) return { kind: "complete" };
  const idle = old.find((r) => !r.ready);
  if (idle !== undefined) return { kind: "replace", id: idle.id };
  const next = old[0];
  if (surgeFits(next.index)) return { kind: "surge", replaces: next.id, index: next.index };
  const readyIndices = [...byIndex.values()].filter((g) => g.some((r) => r.ready)).length;
  if (readyIndices >= v.desired) return { kind: "replace", id: next.id };
  if (late) {
    return {
      kind: "fail",
      reason: `no progress within the ${seconds} s progress deadline: no free capacity ` +
        `to start a new replica first, and fewer than ${v.desired} replicas are ready`,
    };
  }
  return {
    kind: "wait",
    reason: `no free capacity to start a new replica first, and fewer than ${v.desired} ` +
      `replicas are ready to take one down`,
  };
}

/**
 * The id of a new replica at `index`: `NAME-rI` while free (a scale-up, the
 * first revision), else `NAME-rI-vREV` (a replacement started beside the
 * replica it replaces), then `NAME-rI-vREV-2`, `-3`, …
 */
export function freshReplicaId(
  deployment: string,
  index: number,
  revision: number,
  taken: (id: string) => boolean,
  surge: boolean,
): string {
  const plain = replicaId(deployment, index);
  if (!surge && !taken(plain)) return plain;
  for (let k = 1;; k++) {
    const id = surgeReplicaId(plain, revision, k);
    if (!taken(id)) return id;
  }
}
