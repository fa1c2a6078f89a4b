/**
 * A node's model cache report (protocol/model_cache_report.ts) as placement
 * reads it: the revisions it holds, the bytes of those it has in part, and
 * its room. Pure: the control plane (control/model_caches.ts) and
 * `llmgw plan`'s cluster files (cli/plan_model_caches.ts) both use it.
 *
 * @module
 */
import { type ModelCacheReport, revisionName } from "../protocol/model_cache_report.ts";
import type { NodeModelCache } from "./cluster_index.ts";

/**
 * A node's report as placement reads it, with the revisions it is held back
 * from after running out of disk (`backoff`, control/disk_full_backoff.ts).
 */
export function nodeModelCache(
  report: ModelCacheReport,
  backoff: ReadonlyMap<string, string> = new Map(),
): NodeModelCache {
  const holds = new Set<string>();
  const partial = new Map<string, number>();
  for (const r of report.revisions) {
    const name = revisionName(r.repo, r.commit);
    if (r.state === "complete") holds.add(name);
    else partial.set(name, r.bytes_done); // downloading or partial: those bytes need no room
  }
  return { roomBytes: report.room_bytes, holds, partial, backoff };
}
