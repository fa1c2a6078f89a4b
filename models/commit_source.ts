/**
 * Where a model revision's commit comes from (issue #25 item 1): the hub
 * client, or a fake in tests. The control plane resolves each deployment
 * revision's model revision through one (control/model_commits.ts).
 *
 * @module
 */
import type { HubClient } from "./hub_client.ts";

/** Resolves a revision (branch, tag or commit) of a hub repository to the commit it points at. */
export interface CommitSource {
  /**
   * The commit `revision` of `repo` points at now (40 hex).
   *
   * @throws {HubError} The hub's refusal (`retryable` false: final) or no answer.
   */
  resolveCommit(repo: string, revision: string, signal?: AbortSignal): Promise<string>;
}

/** The hub client as a {@link CommitSource}: the revision API's commit. */
export function hubCommitSource(client: HubClient): CommitSource {
  return {
    async resolveCommit(repo, revision, signal) {
      return (await client.resolveRevision(repo, revision, signal)).commit;
    },
  };
}
