/**
 * Disk watermarks for the model cache (`--cache-high`, `--cache-low`):
 * evicts, least recently used first, the revisions that no shard uses or
 * is about to use and that no deployment pins, once the disk is used above
 * the high watermark; and answers how much room a new revision has, for
 * placement. The plan is eviction_plan.ts; this file does the deleting.
 *
 * A revision is deleted snapshot first (its links), then the blobs no
 * remaining revision links, then its refs and memos: an engine never finds
 * a link to a deleted blob in a snapshot that is still listed.
 *
 * @module
 */
import { type CacheEventSink, emit } from "./cache_events.ts";
import type { CacheFs } from "./cache_fs.ts";
import type { CacheLayout } from "./cache_layout.ts";
import { type CachedRevision, listRevisions, revisionKey } from "./cache_revisions.ts";
import { planEviction, roomUnderHighWatermark, type Watermarks } from "./eviction_plan.ts";
import { formatBytes } from "./disk_space.ts";

/** What must stay. */
export interface KeepSet {
  /** Revisions (`repo@commit`) a shard uses or is about to use, or a deployment pins. */
  revisions: ReadonlySet<string>;
}

/** What {@link CacheEviction} needs from its cache. */
export interface EvictionDeps {
  fs: CacheFs;
  layout: CacheLayout;
  /** True while the cache is fetching or linking a revision of `repo` (never evicted then). */
  busy: (repo: string) => boolean;
  onEvent?: CacheEventSink;
}

/** Eviction over one cache. */
export class CacheEviction {
  readonly #deps: EvictionDeps;

  /** Eviction over `deps.layout.root`. */
  constructor(deps: EvictionDeps) {
    this.#deps = deps;
  }

  #keep(keep: KeepSet): (r: CachedRevision) => boolean {
    return (r) => keep.revisions.has(revisionKey(r.repo, r.commit)) || this.#deps.busy(r.repo);
  }

  /**
   * Evicts what the watermarks call for and answers the revisions evicted
   * (each also an `evicted` event); nothing while the disk is under the
   * high watermark.
   */
  async evict(keep: KeepSet, marks: Watermarks): Promise<CachedRevision[]> {
    const { fs, layout } = this.#deps;
    const revisions = await listRevisions(fs, layout);
    const usage = await fs.diskUsage(layout.root);
    const plan = planEviction(revisions, usage, marks, this.#keep(keep));
    const remaining = new Set(revisions);
    for (const r of plan.evict) {
      // Checked again: a download of the repository may have begun meanwhile.
      if (this.#deps.busy(r.repo)) continue;
      remaining.delete(r);
      const freed = await this.#remove(r, [...remaining]);
      const used = usage.totalBytes - usage.freeBytes;
      emit(this.#deps.onEvent, {
        kind: "evicted",
        repo: r.repo,
        commit: r.commit,
        bytes: freed,
        reason: `disk ${formatBytes(used)} of ${formatBytes(usage.totalBytes)} used, over the ` +
          `high watermark of ${marks.highPercent}%`,
      });
    }
    return plan.evict.filter((r) => !remaining.has(r));
  }

  /** Bytes a new revision may take before the disk passes the high watermark, after evicting all it may. */
  async room(keep: KeepSet, marks: Watermarks): Promise<number> {
    const { fs, layout } = this.#deps;
    const revisions = await listRevisions(fs, layout);
    return roomUnderHighWatermark(
      revisions,
      await fs.diskUsage(layout.root),
      marks,
      this.#keep(keep),
    );
  }

  /** Deletes `r`; answers the bytes of the blobs no revision in `remaining` links. */
  async #remove(r: CachedRevision, remaining: CachedRevision[]): Promise<number> {
    const { fs, layout } = this.#deps;
    await fs.removeTree(layout.snapshotDir(r.repo, r.commit));
    let freed = 0;
    for (const [key, size] of r.blobs) {
      if (key.startsWith("file:")) {
        freed += size;
        continue;
      }
      if (remaining.some((o) => o.repo === r.repo && o.blobs.has(key))) continue;
      await fs.remove(layout.blobPathOfKey(r.repo, key));
      await fs.remove(layout.verifiedPathOfKey(r.repo, key));
      freed += size;
    }
    for (const ref of r.refs) await fs.remove(layout.refPath(r.repo, ref));
    await fs.remove(layout.usedPath(r.repo, r.commit));
    return freed;
  }
}
