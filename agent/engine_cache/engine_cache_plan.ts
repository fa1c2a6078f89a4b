/**
 * Which engine compile and JIT cache directories to evict (issue #25 item
 * 7; the directories: engines/compile_cache.ts). Pure. A directory no shard
 * uses or is about to use goes:
 *
 * 1. when its model revision has left the model cache: compiled graphs are
 *    useless without the weights ({@link revisionEvictions}: its record is
 *    enough, nothing is walked to decide);
 * 2. when the file system holding the directories is used above the model
 *    cache's high watermark (`--cache-high`) and evicting unused
 *    directories brings it back to it ({@link planPressure}): those of an
 *    engine version no longer installed on the host first, then least
 *    recently used ({@link pressureOrder}), until usage is at or under the
 *    low watermark (`--cache-low`). The keeper sizes them in that order and
 *    only as far as needed.
 *
 * When even every unused directory together would leave usage over the
 * high watermark, the pressure comes from elsewhere (models in use or
 * pinned, logs, images): only directories of an engine version no longer
 * installed go; the rest stay, since evicting them would only make every
 * start cold without relieving the disk.
 *
 * A directory in use is never evicted, whatever the disk says.
 *
 * @module
 */
import type { CompileCacheKeyInput } from "../../engines/compile_cache.ts";
import type { DiskUsage } from "../model_cache/cache_fs.ts";
import type { Watermarks } from "../model_cache/eviction_plan.ts";
import { formatBytes } from "../../text/bytes.ts";

/** One key directory as listed: its record, not its size. */
export interface EngineCacheEntry {
  /** Its path, `<root>/<engine>/<key>`. */
  dir: string;
  /** Its key, from its record; null when it has none (made before records were kept). */
  key: CompileCacheKeyInput | null;
  /** Last engine start that used it, ms (the directory's mtime without a record). */
  lastUsedMs: number;
}

/** A directory with the bytes under it. */
export interface SizedEntry extends EngineCacheEntry {
  bytes: number;
  /** False when its walk was cut short (tree_bytes.ts): `bytes` is then a lower bound. */
  complete: boolean;
}

/** What the plan weighs besides the entries. */
export interface EngineCacheView {
  /** Directories a shard of this host uses or is about to use. */
  inUse: ReadonlySet<string>;
  /**
   * Revisions (`repo@commit`) the model cache holds; null when the agent
   * keeps no model cache (engines fetch their own weights: nothing follows
   * a revision then).
   */
  held: ReadonlySet<string> | null;
  /**
   * Engine name → installed version; null while the agent has not asked its
   * engines yet. An engine left out (its probe failed) is not known to be gone.
   */
  installed: Readonly<Record<string, string>> | null;
  /** The file system holding the directories. */
  usage: DiskUsage;
  /** The model cache's watermarks. */
  marks: Watermarks;
}

/** Why a directory goes, in one word. */
export type EngineCacheEvictionCause = "revision_evicted" | "disk_pressure";

/** One directory to evict. */
export interface EngineCacheEviction {
  entry: EngineCacheEntry;
  cause: EngineCacheEvictionCause;
  /** Why, in words, for the event. */
  reason: string;
}

/** Whether `e`'s engine version is known to differ from the one installed. */
export function staleVersion(
  e: EngineCacheEntry,
  installed: EngineCacheView["installed"],
): boolean {
  if (installed === null || e.key === null || e.key.engine_version === null) return false;
  // A probe that failed or timed out leaves the engine out: unknown, not uninstalled.
  if (!Object.hasOwn(installed, e.key.engine)) return false;
  return installed[e.key.engine] !== e.key.engine_version;
}

/** The unused directories whose model revision left the model cache. */
export function revisionEvictions(
  entries: readonly EngineCacheEntry[],
  view: Pick<EngineCacheView, "inUse" | "held">,
): EngineCacheEviction[] {
  const out: EngineCacheEviction[] = [];
  if (view.held === null) return out;
  for (const e of entries) {
    const k = e.key;
    if (view.inUse.has(e.dir) || k === null || k.revision === null) continue;
    const revision = `${k.model}@${k.revision}`;
    if (view.held.has(revision)) continue;
    out.push({
      entry: e,
      cause: "revision_evicted",
      reason: `${revision} is no longer in the model cache`,
    });
  }
  return out;
}

/** The unused directories, in the order disk pressure takes them: stale versions, then least recently used. */
export function pressureOrder(
  entries: readonly EngineCacheEntry[],
  view: Pick<EngineCacheView, "inUse" | "installed">,
): EngineCacheEntry[] {
  const stale = (e: EngineCacheEntry) => staleVersion(e, view.installed) ? 0 : 1;
  return entries.filter((e) => !view.inUse.has(e.dir)).sort((a, b) =>
    stale(a) - stale(b) || a.lastUsedMs - b.lastUsedMs ||
    (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0)
  );
}

/** Bytes to free: to be at or under the high watermark, and to reach the low one. */
export interface PressureNeed {
  toHigh: number;
  toLow: number;
}

/** What usage asks of the engine caches; null when it is at or under the high watermark. */
export function pressureNeed(usage: DiskUsage, marks: Watermarks): PressureNeed | null {
  const toHigh = overBy(usage, marks.highPercent);
  if (toHigh <= 0) return null;
  return { toHigh, toLow: overBy(usage, marks.lowPercent) };
}

/** Whether usage is at or under the low watermark: pressure evictions have done enough. */
export function atLowWatermark(usage: DiskUsage, marks: Watermarks): boolean {
  return overBy(usage, marks.lowPercent) <= 0;
}

/** Bytes used beyond `percent` of the disk (negative when under it). */
function overBy(usage: DiskUsage, percent: number): number {
  return usage.totalBytes - usage.freeBytes - (usage.totalBytes * percent) / 100;
}

/** What disk pressure evicts, and what it could not do. */
export interface PressurePlan {
  evictions: EngineCacheEviction[];
  /**
   * Set when every unused directory together would leave usage over the
   * high watermark: the pressure comes from elsewhere. `evictableBytes` is
   * what they hold.
   */
  elsewhere: { evictableBytes: number } | null;
  /**
   * The sizes found so far are not enough and some candidates were not
   * sized yet, or only in part (a walk cut short): the caches may yet
   * relieve the disk, so the next sweep goes on.
   */
  unsized: boolean;
}

/**
 * The pressure evictions among `sized`, a prefix of {@link pressureOrder}'s
 * candidates (`candidates` of them in all) with their sizes. A size whose
 * walk was cut short counts as the lower bound it is: enough to decide that
 * the caches relieve the disk, never that they cannot.
 */
export function planPressure(
  sized: readonly SizedEntry[],
  candidates: number,
  view: Pick<EngineCacheView, "usage" | "marks" | "installed">,
): PressurePlan {
  const none: PressurePlan = { evictions: [], elsewhere: null, unsized: false };
  const need = pressureNeed(view.usage, view.marks);
  if (need === null) return none;
  const { usage, marks } = view;
  const pressure = `disk ${formatBytes(usage.totalBytes - usage.freeBytes)} of ${
    formatBytes(usage.totalBytes)
  } used, over the high watermark of ${marks.highPercent}%`;
  const evict = (e: SizedEntry): EngineCacheEviction => {
    const gone = staleVersion(e, view.installed)
      ? `; ${e.key!.engine} ${e.key!.engine_version} is no longer installed (now: ${
        view.installed![e.key!.engine]
      })`
      : "";
    return { entry: e, cause: "disk_pressure", reason: pressure + gone };
  };
  const sum = sized.reduce((n, e) => n + e.bytes, 0);
  if (sum < need.toHigh) {
    // Not enough to relieve the disk: only what no installed engine can use goes.
    const stale = sized.filter((e) => staleVersion(e, view.installed)).map(evict);
    const all = sized.length >= candidates && sized.every((e) => e.complete);
    return {
      evictions: stale,
      elsewhere: all ? { evictableBytes: sum } : null,
      unsized: !all,
    };
  }
  const out: EngineCacheEviction[] = [];
  let freed = 0;
  for (const e of sized) {
    if (freed >= need.toLow) break;
    out.push(evict(e));
    freed += e.bytes;
  }
  return { ...none, evictions: out };
}
