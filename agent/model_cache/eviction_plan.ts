/**
 * Which cached revisions to evict, as a kubelet collects images: when the
 * cache's disk is used above the high watermark (`--cache-high`, a percent
 * of the file system), revisions no shard uses or is about to use, and not
 * pinned, go least recently used first until usage is at or under the low
 * watermark (`--cache-low`). A blob is freed only when every revision that
 * links it is evicted. Pure.
 *
 * @module
 */
import type { DiskUsage } from "./cache_fs.ts";
import type { CachedRevision } from "./cache_revisions.ts";

/** The two watermarks, percents of the cache file system's size. */
export interface Watermarks {
  highPercent: number;
  lowPercent: number;
}

/** The defaults: evict above 90 % used, down to 80 %. */
export const DEFAULT_WATERMARKS: Watermarks = { highPercent: 90, lowPercent: 80 };

/** A `--cache-high` / `--cache-low` value that cannot be read. */
export class WatermarkError extends Error {
  /** `message` names the flag and what was wrong. */
  constructor(message: string) {
    super(message);
    this.name = "WatermarkError";
  }
}

/** A percent like `90%` or `90` (0 < value ≤ 100). */
export function parseWatermark(text: string, flag: string): number {
  const value = text.trim();
  if (value === "") throw new WatermarkError(`Cannot parse ${flag}: value is empty`);
  const m = /^(\d+(?:\.\d+)?)%?$/.exec(value);
  const n = m === null ? NaN : Number(m[1]);
  if (!(n > 0 && n <= 100)) {
    throw new WatermarkError(
      `Cannot parse ${flag}: ${
        JSON.stringify(value)
      } is not a percent of the disk in (0, 100], e.g. 90%`,
    );
  }
  return n;
}

/** Refuses a low watermark that is not under the high one. */
export function checkWatermarks(marks: Watermarks): Watermarks {
  if (!(marks.lowPercent < marks.highPercent)) {
    throw new WatermarkError(
      `Cannot use --cache-low ${marks.lowPercent}% with --cache-high ${marks.highPercent}%: ` +
        "the low watermark must be under the high one",
    );
  }
  return marks;
}

/** What to evict and what it frees. */
export interface EvictionPlan {
  evict: CachedRevision[];
  freedBytes: number;
}

const blobId = (r: CachedRevision, key: string) => `${r.repo}\0${key}`;

/** Evictable revisions, least recently used first. */
function candidates(
  revisions: readonly CachedRevision[],
  keep: (r: CachedRevision) => boolean,
): CachedRevision[] {
  return revisions.filter((r) => !keep(r)).sort((a, b) =>
    a.lastUsedMs - b.lastUsedMs || (`${a.repo}@${a.commit}` < `${b.repo}@${b.commit}` ? -1 : 1)
  );
}

/**
 * Evicts `candidates` in order while `more()` says so; answers the plan.
 * A blob's bytes count once every revision linking it is in the plan.
 */
function evictWhile(
  revisions: readonly CachedRevision[],
  order: CachedRevision[],
  more: (freed: number) => boolean,
): EvictionPlan {
  const links = new Map<string, number>();
  for (const r of revisions) {
    for (const key of r.blobs.keys()) {
      links.set(blobId(r, key), (links.get(blobId(r, key)) ?? 0) + 1);
    }
  }
  const evict: CachedRevision[] = [];
  let freedBytes = 0;
  for (const r of order) {
    if (!more(freedBytes)) break;
    evict.push(r);
    for (const [key, size] of r.blobs) {
      const left = links.get(blobId(r, key))! - 1;
      links.set(blobId(r, key), left);
      if (left === 0) freedBytes += size;
    }
  }
  return { evict, freedBytes };
}

/** The plan for a disk in `usage`: nothing while usage is at or under the high watermark. */
export function planEviction(
  revisions: readonly CachedRevision[],
  usage: DiskUsage,
  marks: Watermarks,
  keep: (r: CachedRevision) => boolean,
): EvictionPlan {
  const used = usage.totalBytes - usage.freeBytes;
  if (used <= (usage.totalBytes * marks.highPercent) / 100) return { evict: [], freedBytes: 0 };
  const target = (usage.totalBytes * marks.lowPercent) / 100;
  return evictWhile(revisions, candidates(revisions, keep), (freed) => used - freed > target);
}

/**
 * Bytes the cache could take before its disk passes the high watermark,
 * once every evictable revision is evicted: what placement compares a
 * model's size with (`insufficient_disk`).
 */
export function roomUnderHighWatermark(
  revisions: readonly CachedRevision[],
  usage: DiskUsage,
  marks: Watermarks,
  keep: (r: CachedRevision) => boolean,
): number {
  const used = usage.totalBytes - usage.freeBytes;
  const all = evictWhile(revisions, candidates(revisions, keep), () => true);
  return Math.max(
    0,
    Math.floor((usage.totalBytes * marks.highPercent) / 100 - used + all.freedBytes),
  );
}
