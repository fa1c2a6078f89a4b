/**
 * What agents report of their model caches (issue #25 item 5), as the
 * control plane keeps and uses it: each node's last report (placement's
 * `insufficient_disk` and its preference for holders read it through
 * {@link placementIndexOptions}), each eviction an agent reports as a
 * `model_evicted` event, and the pulls it reports failed for good
 * (control/model_pulls.ts `failPulls`).
 *
 * @module
 */
import type { IndexOptions, NodeModelCache } from "../placement/cluster_index.ts";
import { nodeModelCache } from "../placement/node_model_cache.ts";
import { type ModelCacheReport, revisionName } from "../protocol/model_cache_report.ts";
import { formatBytes } from "../text/bytes.ts";
import type { ControlState } from "./state.ts";
import { failPulls, settlePulls } from "./model_pulls.ts";
import { sweepPullsIfDue } from "./model_pull_sweep.ts";

/** Keeps `report` as the node's cache and records its evictions as events. */
export async function recordModelCache(
  state: ControlState,
  nodeId: string,
  report: ModelCacheReport,
): Promise<void> {
  state.modelCaches.set(nodeId, report);
  state.diskFull.observe(nodeId, report.room_bytes, nodeModelCache(report).holds, state.now());
  const settled = await settlePulls(state, nodeId);
  await failPulls(state, nodeId, report.pulls_failed ?? []);
  // Heartbeats come often: pulls are swept when one just finished, else once a minute.
  await sweepPullsIfDue(state, state.now(), settled);
  for (const e of report.evicted) {
    await state.event(
      "model_evicted",
      `node/${nodeId}`,
      `evicted ${revisionName(e.repo, e.commit)} from its model cache, ${
        formatBytes(e.bytes)
      } freed: ${e.reason}`,
    );
  }
}

/**
 * What every placement of the control plane indexes the cluster with: the
 * models' facts, each deployment's resolved commit and each node's model
 * cache, with the revisions each node is held back from after running out of
 * disk. One owner, so every gate (reconcile, rollout, drain, explain, dry
 * run) weighs the same things.
 */
export function placementIndexOptions(state: ControlState): IndexOptions {
  const commits = new Map<string, string>();
  for (const [name, d] of state.deployments) {
    if (d.model_commit != null) commits.set(name, d.model_commit);
  }
  const caches = new Map<string, NodeModelCache>();
  const now = state.now();
  for (const [node, report] of state.modelCaches) {
    caches.set(node, nodeModelCache(report, state.diskFull.holds(node, report.room_bytes, now)));
  }
  return { models: state.modelFacts.all(), commits, caches };
}
