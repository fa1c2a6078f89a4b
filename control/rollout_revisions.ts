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

/**
 * The commit revision `revision` of `d` serves (issue #25 item 1): the
 * deployment's `model_commit` for the current one, else its history entry's;
 * null when unresolved, a local path, or no longer in the history.
 */
export function revisionCommit(d: StoredDeployment, revision: number): string | null {
  if (revision === deploymentRevision(d)) return d.model_commit ?? null;
  return d.history?.find((h) => h.revision === revision)?.model_commit ?? null;
}

/**
 * Records that the current revision of `d` serves `commit`: on the
 * deployment and in its history entry, the two places
 * {@link revisionCommit} reads.
 */
export function setCurrentCommit(d: StoredDeployment, commit: string | null): void {
  const current = deploymentRevision(d);
  d.model_commit = commit;
  d.history = historyOf(d).map((h) => h.revision === current ? { ...h, model_commit: commit } : h);
}

/**
 * True when revisions `a` and `b` of `d` run the same replicas: the same
 * workload ({@link sameWorkload}) at the same model commit, so a branch that
 * moved upstream is another run of the same spec.
 */
export function sameRun(d: StoredDeployment, a: number, b: number): boolean {
  const specA = revisionSpec(d, a);
  const specB = revisionSpec(d, b);
  return specA !== undefined && specB !== undefined && sameWorkload(specA, specB) &&
    revisionCommit(d, a) === revisionCommit(d, b);
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
    /** The commit its model revision resolved to; null when unknown. */
    commit?: string | null;
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
    model_commit: added.commit ?? null,
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
    .filter((h) => h.revision < current && !sameRun(d, h.revision, current))
    .at(-1);
}
