/**
 * Which engine compile and JIT cache directories to evict (issue #25 item
 * 7; the directories: engines/compile_cache.ts). Pure. A directory no shard
 * uses or is about to use goes:
 *
 * 1. when its model revision has left the model cache: compiled graphs are
 *    useless without the weights;
 * 2. when the disk holding the directories is used above the model cache's
 *    high watermark (`--cache-high`): those of an engine version no longer
 *    installed on the host first, then least recently used, until usage is
 *    at or under the low watermark (`--cache-low`).
 *
 * A directory in use is never evicted, whatever the disk says.
 *
 * @module
 */
import type { CompileCacheKeyInput } from "../../engines/compile_cache.ts";
import type { DiskUsage } from "../model_cache/cache_fs.ts";
import type { Watermarks } from "../model_cache/eviction_plan.ts";
import { formatBytes } from "../../text/bytes.ts";

/** One key directory as read from disk. */
export interface EngineCacheEntry {
  /** Its path, `<root>/<engine>/<key>`. */
  dir: string;
  /** Its key, from its record; null when it has none (made before records were kept). */
  key: CompileCacheKeyInput | null;
  /** Bytes under it. */
  bytes: number;
  /** Last engine start that used it, ms (the directory's mtime without a record). */
  lastUsedMs: number;
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
  /** Engine name → installed version; null while the agent has not asked its engines yet. */
  installed: Readonly<Record<string, string>> | null;
  /** The disk holding the directories. */
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

/** Whether `e`'s engine version is no longer the one installed (unknown versions never are). */
export function staleVersion(
  e: EngineCacheEntry,
  installed: EngineCacheView["installed"],
): boolean {
  if (installed === null || e.key === null || e.key.engine_version === null) return false;
  return installed[e.key.engine] !== e.key.engine_version;
}

/** The directories to evict, in the order to evict them. */
export function planEngineCacheEviction(
  entries: readonly EngineCacheEntry[],
  view: EngineCacheView,
): EngineCacheEviction[] {
  const out: EngineCacheEviction[] = [];
  const free = entries.filter((e) => !view.inUse.has(e.dir));
  const rest: EngineCacheEntry[] = [];
  for (const e of free) {
    const k = e.key;
    if (view.held !== null && k !== null && k.revision !== null) {
      const revision = `${k.model}@${k.revision}`;
      if (!view.held.has(revision)) {
        out.push({
          entry: e,
          cause: "revision_evicted",
          reason: `${revision} is no longer in the model cache`,
        });
        continue;
      }
    }
    rest.push(e);
  }
  const { usage, marks } = view;
  const used = usage.totalBytes - usage.freeBytes;
  let freed = out.reduce((n, o) => n + o.entry.bytes, 0);
  if (used - freed <= (usage.totalBytes * marks.highPercent) / 100) return out;
  const target = (usage.totalBytes * marks.lowPercent) / 100;
  const stale = (e: EngineCacheEntry) => staleVersion(e, view.installed) ? 0 : 1;
  rest.sort((a, b) =>
    stale(a) - stale(b) || a.lastUsedMs - b.lastUsedMs ||
    (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0)
  );
  const pressure = `disk ${formatBytes(used)} of ${formatBytes(usage.totalBytes)} used, over ` +
    `the high watermark of ${marks.highPercent}%`;
  for (const e of rest) {
    if (used - freed <= target) break;
    const gone = staleVersion(e, view.installed)
      ? `; ${e.key!.engine} ${e.key!.engine_version} is no longer installed (now: ${
        view.installed![e.key!.engine] ?? "none"
      })`
      : "";
    out.push({ entry: e, cause: "disk_pressure", reason: pressure + gone });
    freed += e.bytes;
  }
  return out;
}
