/**
 * The model-cache side of `llmgw plan` (issue #25 item 5): the caches a
 * cluster file's nodes report, and the commit the deployment's revision
 * stands for, as the index options every placement reads, so a plan explains
 * `insufficient_disk` and names holders as the live control plane does
 * (control/model_caches.ts owns how a report reads as placement's view).
 *
 * @module
 */
import { nodeModelCache } from "../placement/node_model_cache.ts";
import type { Deployment } from "../deployment/schema.ts";
import { isLocalModel, modelRevision } from "../deployment/model_revision.ts";
import { COMMIT_PATTERN } from "../models/hub_protocol.ts";
import type { IndexOptions, NodeModelCache } from "../placement/cluster_index.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { UsageError } from "./usage_error.ts";

/**
 * The commit a plan takes the deployment's model at: `--model-commit`, else
 * the deployment's `revision` when it is a commit; null when neither names
 * one (a branch or tag resolves only at the hub, which a plan never asks),
 * or for a local path (its files are used in place, never held).
 *
 * @throws {UsageError} A `--model-commit` that is not a commit, that
 *   contradicts a commit the deployment names, or that is given for a local path.
 */
export function planModelCommit(deployment: Deployment, flag: string | undefined): string | null {
  const revision = modelRevision(deployment.model, deployment.revision);
  if (flag === undefined) {
    return revision !== undefined && COMMIT_PATTERN.test(revision) ? revision : null;
  }
  if (!COMMIT_PATTERN.test(flag)) {
    throw new UsageError(`plan: --model-commit must be a commit of 40 hex digits, got "${flag}"`);
  }
  if (isLocalModel(deployment.model)) {
    throw new UsageError(
      `plan: --model-commit is for a hub model; ${deployment.model} is a local path, used in place`,
    );
  }
  if (revision !== undefined && COMMIT_PATTERN.test(revision) && revision !== flag) {
    throw new UsageError(
      `plan: --model-commit ${flag} differs from the deployment's revision ${revision}`,
    );
  }
  return flag;
}

/**
 * The index options of a plan: each node's cache and the deployment's
 * commit. When nodes hold some commit of the model but the commit is not
 * known, `warn` says why none counts as a holder.
 */
export function planIndexOptions(
  caches: ReadonlyMap<string, ModelCacheReport>,
  deployment: Deployment,
  commit: string | null,
  warn: (message: string) => void,
): IndexOptions {
  const nodes = new Map<string, NodeModelCache>();
  for (const [node, report] of caches) nodes.set(node, nodeModelCache(report));
  if (commit === null && !isLocalModel(deployment.model)) {
    const held = [...caches.values()].some((c) =>
      c.revisions.some((r) => r.repo === deployment.model)
    );
    if (held) {
      warn(
        `no node counts as holding ${deployment.model}: its revision "${
          modelRevision(deployment.model, deployment.revision)
        }" is not a commit; name the commit it resolves to with --model-commit`,
      );
    }
  }
  return {
    caches: nodes,
    commits: commit === null ? undefined : new Map([[deployment.name, commit]]),
  };
}
