/**
 * A node's model cache report as its agent sends it, holding one revision.
 *
 * @module
 */
import type { CachedRevisionReport, ModelCacheReport } from "../protocol/model_cache_report.ts";

/** The revision a report holds and the room it reports. */
export interface HeldRevision {
  repo: string;
  commit: string;
  /** The revision's size. */
  bytes: number;
  state: CachedRevisionReport["state"];
  /** How much of `bytes` is written. */
  bytesDone: number;
  /** The room left in the cache; null where the agent does not know it. */
  roomBytes: number | null;
}

/** A cache report holding one unpinned, never used revision and nothing else. */
export function cacheHolding(held: HeldRevision): ModelCacheReport {
  return {
    room_bytes: held.roomBytes,
    revisions: [{
      repo: held.repo,
      commit: held.commit,
      bytes: held.bytes,
      state: held.state,
      bytes_done: held.bytesDone,
      last_used: null,
      pinned: false,
    }],
    omitted: 0,
    evicted: [],
  };
}
