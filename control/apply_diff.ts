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
import { revisionSpec, sameWorkload } from "./rollout_revisions.ts";
import { replicaRevision, type StoredDeployment, type StoredReplica } from "./store/store.ts";

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
 * name) whose replicas are `replicas`.
 */
export function planApply(
  live: StoredDeployment | undefined,
  next: Deployment,
  replicas: readonly StoredReplica[],
): ApplyPlan {
  if (live === undefined) return { result: "created", changes: [], rolling: [] };
  const changes = specChanges(live.spec, next);
  if (changes.length === 0) return { result: "unchanged", changes, rolling: [] };
  if (changes.some((c) => c.rolls)) {
    const rolling = replicas.filter((r) => {
      const spec = revisionSpec(live, replicaRevision(r));
      return spec === undefined || !sameWorkload(spec, next);
    }).map((r) => r.id).sort();
    return { result: "updated", changes, rolling };
  }
  const countOnly = changes.every((c) => c.path === "replicas");
  return { result: countOnly ? "scaled" : "configured", changes, rolling: [] };
}
