/**
 * A deployment's revisions (design §6.3): which spec each revision is, the
 * bounded history, and what counts as a change worth a new revision. Pure:
 * the deployment service and the rollout step call these on the books.
 *
 * @module
 */
import { DEFAULT_PROGRESS_DEADLINE_SECONDS, type Deployment } from "../deployment/schema.ts";
import { specChanges } from "../deployment/canonical.ts";
import {
  type DeploymentRevision,
  deploymentRevision,
  type RevisionCause,
  type StoredDeployment,
} from "./store/store.ts";

/** Revisions a deployment keeps (besides any a replica still runs). */
export const MAX_REVISIONS = 10;

export { DEFAULT_PROGRESS_DEADLINE_SECONDS };

/** A deployment's progress deadline, in ms. */
export function progressDeadlineMs(spec: Deployment): number {
  return (spec.rollout?.progress_deadline_seconds ?? DEFAULT_PROGRESS_DEADLINE_SECONDS) * 1000;
}

/**
 * True when two specs run the same replicas: compared in their canonical
 * form (defaults applied, key order ignored), they differ at most in
 * settings that change how many run, how they are replaced or how gateways
 * pick one, never what runs (deployment/canonical.ts).
 */
export function sameWorkload(a: Deployment, b: Deployment): boolean {
  return !specChanges(a, b).some((c) => c.rolls);
}

/**
 * A deployment's history with its current revision in it: a record from
 * before revisions has none, and its spec is then revision 1.
 */
export function historyOf(d: StoredDeployment): DeploymentRevision[] {
  const history = [...(d.history ?? [])];
  const current = deploymentRevision(d);
  if (!history.some((h) => h.revision === current)) {
    history.push({
      revision: current,
      spec: d.spec,
      applied_at: d.updated_at,
      cause: "apply",
      from_revision: null,
      outcome: "complete",
      reason: null,
    });
    history.sort((a, b) => a.revision - b.revision);
  }
  return history;
}

/** The spec of one revision of `d`, or undefined when the history no longer holds it. */
export function revisionSpec(d: StoredDeployment, revision: number): Deployment | undefined {
  if (revision === deploymentRevision(d)) return d.spec;
  return d.history?.find((h) => h.revision === revision)?.spec;
}

/** The number the next revision gets: one more than any it has had. */
export function nextRevision(d: StoredDeployment): number {
  return Math.max(deploymentRevision(d), ...historyOf(d).map((h) => h.revision)) + 1;
}

/**
 * The history with a new revision appended as current: the revision it
 * replaces is `superseded` if its rollout had not finished, and the oldest
 * are dropped past {@link MAX_REVISIONS}, except those in `keep` (revisions
 * replicas still run).
 */
export function appendRevision(
  d: StoredDeployment,
  added: {
    revision: number;
    spec: Deployment;
    at: number;
    cause: RevisionCause;
    from: number | null;
  },
  keep: ReadonlySet<number>,
): DeploymentRevision[] {
  const history = historyOf(d).map((h) =>
    h.outcome === "rolling_out" ? { ...h, outcome: "superseded" as const } : h
  );
  history.push({
    revision: added.revision,
    spec: added.spec,
    applied_at: added.at,
    cause: added.cause,
    from_revision: added.from,
    outcome: "rolling_out",
    reason: null,
  });
  return pruneHistory(history, new Set([...keep, added.revision]));
}

/** The newest {@link MAX_REVISIONS} revisions, plus those in `keep`, oldest first. */
export function pruneHistory(
  history: readonly DeploymentRevision[],
  keep: ReadonlySet<number>,
): DeploymentRevision[] {
  const sorted = [...history].sort((a, b) => a.revision - b.revision);
  const newest = new Set(sorted.slice(-MAX_REVISIONS).map((h) => h.revision));
  return sorted.filter((h) => newest.has(h.revision) || keep.has(h.revision));
}

/** The history with one revision's outcome (and reason) changed. */
export function withOutcome(
  history: readonly DeploymentRevision[],
  revision: number,
  outcome: DeploymentRevision["outcome"],
  reason: string | null = null,
): DeploymentRevision[] {
  return history.map((h) => h.revision === revision ? { ...h, outcome, reason } : h);
}

/**
 * What `rollout undo` goes back to without a revision named: the newest
 * revision before the current one whose replicas would differ from the
 * current ones; undefined when there is none.
 */
export function undoTarget(d: StoredDeployment): DeploymentRevision | undefined {
  const current = deploymentRevision(d);
  return historyOf(d)
    .filter((h) => h.revision < current && !sameWorkload(h.spec, d.spec))
    .at(-1);
}
