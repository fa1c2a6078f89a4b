/**
 * A node's model cache as the fleet page shows it (docs/ui.md, issue #25
 * item 5), from the last report its agent's heartbeat carried: the room a
 * new revision has, and the revisions it holds or fetches, downloads first,
 * then most recently used, as the agent orders them. A few are listed; the
 * rest (and those the report itself left out) are counted, so a row stays
 * one glance and the page stays small on a large fleet.
 *
 * @module
 */
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { shortCommit } from "../deployment/model_revision.ts";
import { downloadPercent } from "../protocol/shard_download.ts";

/** The most revisions a node's row lists. */
export const CACHE_REVISIONS_SHOWN = 3;

/** One revision in a node's row. */
export interface CacheRevisionCell {
  /** `org/name@abc1234`. */
  name: string;
  /** As the agent reports it: `complete`, `downloading` or `partial`. */
  state: "complete" | "downloading" | "partial";
  /** Its bytes (the download's total while it is fetched). */
  bytes: number;
  /** Percent on disk while not complete; null when complete or of unknown size. */
  percent: number | null;
  /** Kept from eviction by a pinned deployment. */
  pinned: boolean;
}

/** A node's model cache in its row. */
export interface NodeCache {
  /** Bytes a new revision may take under the high watermark; null: the agent could not tell. */
  room_bytes: number | null;
  /** Bytes of the revisions the report lists complete. */
  held_bytes: number;
  /** Revisions held complete: those the report lists, and those it left out (held, least recently used). */
  complete: number;
  /** The first {@link CACHE_REVISIONS_SHOWN} revisions. */
  revisions: CacheRevisionCell[];
  /** Revisions not listed here: past the row's few, and those the report left out. */
  more: number;
}

/** The row's view of a node's last model cache report; null when its agent reports none. */
export function nodeCache(report: ModelCacheReport | undefined): NodeCache | null {
  if (report === undefined) return null;
  const complete = report.revisions.filter((r) => r.state === "complete");
  return {
    room_bytes: report.room_bytes,
    held_bytes: complete.reduce((n, r) => n + r.bytes, 0),
    complete: complete.length + report.omitted,
    revisions: report.revisions.slice(0, CACHE_REVISIONS_SHOWN).map((r) => ({
      name: `${r.repo}@${shortCommit(r.commit)}`,
      state: r.state,
      bytes: r.bytes,
      percent: r.state === "complete"
        ? null
        : downloadPercent({ bytes_done: r.bytes_done, bytes_total: r.bytes }),
      pinned: r.pinned,
    })),
    more: Math.max(0, report.revisions.length - CACHE_REVISIONS_SHOWN) + report.omitted,
  };
}
