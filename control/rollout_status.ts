/**
 * A deployment's rollout status (design §6.3), for `GET
 * /v1/deployments/{name}/rollout` and `llmgw rollout status`: the revision,
 * the rollout under way with its step and deadline, and replicas counted by
 * revision. A read of the books.
 *
 * @module
 */
import { NotFoundError } from "./errors.ts";
import { progressDeadlineMs } from "./rollout_revisions.ts";
import { replicasOf } from "./replicas.ts";
import type { ControlState } from "./state.ts";
import { type PrepullStatus, prepullWaiting } from "./rollout_prepull.ts";
import { deploymentRevision, replicaRevision, type RolloutStepRecord } from "./store/store.ts";
import { isReady, type ReplicaState, replicaView } from "./views.ts";

/** Replicas of one revision. */
export interface RevisionCount {
  /** The revision. */
  revision: number;
  /** Its replicas. */
  replicas: number;
  /** Of them, ready. */
  ready: number;
}

/** A rollout under way, as shown. */
export interface RolloutProgress {
  /** The revision being rolled out (the deployment's current one). */
  target: number;
  /** The revision it goes back to if it fails; null for an automatic revert. */
  fallback: number | null;
  /** When it started (ms since epoch). */
  started_at: number;
  /** Its last progress. */
  progress_at: number;
  /** When it fails without further progress; null for a revert, which never fails. */
  deadline_at: number | null;
  /** Steps done. */
  steps: number;
  /** The step under way, or null between steps. */
  step: RolloutStepRecord | null;
}

/** A deployment's rollout status. */
export interface RolloutStatus {
  /** Deployment name. */
  deployment: string;
  /** Its current revision: the one every replica runs once a rollout completes. */
  revision: number;
  /** progressing while a rollout is under way, else complete. */
  state: "progressing" | "complete";
  /** The replica count. */
  desired: number;
  /** Replicas ready, any revision. */
  ready: number;
  /** Replicas on the current revision. */
  updated: number;
  /** Replicas counted by revision, oldest first. */
  replicas_by_revision: RevisionCount[];
  /** The rollout under way, or null. */
  rollout: RolloutProgress | null;
  /**
   * The model revision it fetches onto its nodes before its first step;
   * null when none (absent from older control planes' answers).
   */
  prepull?: PrepullStatus | null;
  /** Each replica with its revision and state. */
  replicas: { id: string; index: number; revision: number; state: ReplicaState }[];
}

/** The status of deployment `name`, or a NotFoundError. */
export function rolloutStatus(state: ControlState, name: string): RolloutStatus {
  const d = state.deployments.get(name);
  if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
  const revision = deploymentRevision(d);
  const all = replicasOf(state, name);
  const counts = new Map<number, RevisionCount>();
  for (const r of all) {
    const rev = replicaRevision(r);
    const c = counts.get(rev) ?? { revision: rev, replicas: 0, ready: 0 };
    c.replicas++;
    if (isReady(state, r)) c.ready++;
    counts.set(rev, c);
  }
  const r = d.rollout ?? null;
  return {
    deployment: name,
    revision,
    state: r === null ? "complete" : "progressing",
    desired: d.spec.replicas,
    ready: all.filter((x) => isReady(state, x)).length,
    updated: all.filter((x) => replicaRevision(x) === revision).length,
    replicas_by_revision: [...counts.values()].sort((a, b) => a.revision - b.revision),
    rollout: r === null ? null : {
      target: r.target,
      fallback: r.fallback,
      started_at: r.started_at,
      progress_at: r.progress_at,
      deadline_at: r.fallback === null ? null : r.progress_at + progressDeadlineMs(d.spec),
      steps: r.steps,
      step: r.step,
    },
    prepull: prepullWaiting(state, d, state.now()),
    replicas: all.map((x) => ({
      id: x.id,
      index: x.index,
      revision: replicaRevision(x),
      state: replicaView(state, x).state,
    })),
  };
}
