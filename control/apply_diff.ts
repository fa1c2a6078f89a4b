/**
 * What an apply does to a deployment (design §6.3), decided before anything
 * is stored, so an apply and its dry run cannot disagree: `unchanged` when
 * the canonical specs are equal (GitOps loops re-apply constantly: nothing
 * is stored and nothing restarts), `scaled` or `configured` when only
 * settings changed, `updated` (a new revision) when the workload changed,
 * with the replicas that revision replaces. Pure.
 *
 * @module
 */
import { specChanges } from "../deployment/canonical.ts";
import type { Deployment } from "../deployment/schema.ts";
import type { ApplyResultKind, SpecChange } from "../protocol/apply_answer.ts";
import { revisionCommit, revisionSpec, sameWorkload } from "./rollout_revisions.ts";
import {
  deploymentRevision,
  replicaRevision,
  type StoredDeployment,
  type StoredReplica,
} from "./store/store.ts";

/** What an apply of a spec does to the deployment of its name. */
export interface ApplyPlan {
  /** What it does. */
  result: ApplyResultKind;
  /** Each field that differs from the live spec (none for a new deployment). */
  changes: SpecChange[];
  /**
   * Replicas the new revision replaces, by id: those whose own revision
   * runs something else (replicas already on the applied spec join it in
   * place). Empty unless `result` is `updated`.
   */
  rolling: string[];
}

/**
 * Compares `next` with the live deployment `live` (undefined: none of that
 * name) whose replicas are `replicas`. `commit` is what `next`'s model
 * revision resolves to now (null: unknown): a commit other than the live
 * revision's is a change that rolls (`model_commit`), even when the spec is
 * the same (a branch moved upstream); a live revision with no commit yet
 * is resolved, not changed.
 */
export function planApply(
  live: StoredDeployment | undefined,
  next: Deployment,
  replicas: readonly StoredReplica[],
  commit: string | null = null,
): ApplyPlan {
  if (live === undefined) return { result: "created", changes: [], rolling: [] };
  const changes = specChanges(live.spec, next);
  const liveCommit = revisionCommit(live, deploymentRevision(live));
  const moved = (c: string | null) => commit !== null && c !== null && c !== commit;
  if (moved(liveCommit)) {
    changes.push({ path: "model_commit", from: liveCommit, to: commit, rolls: true });
  }
  if (changes.length === 0) return { result: "unchanged", changes, rolling: [] };
  if (changes.some((c) => c.rolls)) {
    const rolling = replicas.filter((r) => {
      const spec = revisionSpec(live, replicaRevision(r));
      return spec === undefined || !sameWorkload(spec, next) ||
        moved(revisionCommit(live, replicaRevision(r)));
    }).map((r) => r.id).sort();
    return { result: "updated", changes, rolling };
  }
  const countOnly = changes.every((c) => c.path === "replicas");
  return { result: countOnly ? "scaled" : "configured", changes, rolling: [] };
}
