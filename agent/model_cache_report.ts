/**
 * The agent's model cache, reported and kept under its watermarks (issue
 * #25 item 5). Before a heartbeat (at most every {@link REFRESH_MS}) it
 * evicts what the watermarks call for, keeping every revision a desired
 * shard uses or is about to use and every revision the desired state pins
 * or pulls, then reads what the cache holds and the room a new revision
 * has. The heartbeat carries that, with the evictions not yet delivered
 * (the control plane makes each a `model_evicted` event), the engine
 * cache directories evicted since (agent/engine_cache/, swept after a
 * model eviction without holding the heartbeat; `engine_cache_evicted`),
 * and the desired pulls that failed for good (agent/model_pulls.ts; the
 * control plane marks them `failed`).
 *
 * A shard whose launch names no commit (an older control plane, a revision
 * not yet resolved) keeps every cached revision of its repository: the
 * agent resolved it itself, and which commit it runs is not known here.
 *
 * @module
 */
import type { DesiredShard, DesiredState } from "../protocol/agent_protocol.ts";
import type {
  CachedRevisionReport,
  EngineCacheEvictionReport,
  EvictionReport,
  ModelCacheReport,
  PullFailureReport,
} from "../protocol/model_cache_report.ts";
import type { EngineCacheEvicted } from "./engine_cache/engine_cache_keeper.ts";
import { REPORT_BOUNDS } from "../protocol/report_bounds.ts";
import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log/log.ts";
import { errorMessage } from "../text/error_message.ts";
import type { CacheEvent } from "./model_cache/cache_events.ts";
import type { KeepSet } from "./model_cache/cache_eviction.ts";
import { type CachedRevision, revisionKey } from "./model_cache/cache_revisions.ts";
import type { Watermarks } from "./model_cache/eviction_plan.ts";
import type { ModelCache } from "./model_cache/model_cache.ts";

/** Refreshes (a listing, a statfs, maybe an eviction) come no more often than this. */
export const REFRESH_MS = 10_000;

/** Evictions kept for delivery at most; older ones are dropped (and logged) beyond it. */
const MAX_PENDING_EVICTIONS = 1024;

/** What a {@link ModelCacheReporter} reads. */
export interface ModelCacheReporterOptions {
  /** The cache. */
  cache: Pick<ModelCache, "revisions" | "progress" | "eviction" | "layout">;
  /** `--cache-high` / `--cache-low`. */
  watermarks: Watermarks;
  /** The desired state the agent runs; null before the first. */
  desired: () => Pick<DesiredState, "shards" | "models"> | null;
  /** Times evictions. */
  clock: Clock;
  /** Where a failed refresh goes. */
  log: Logger;
  /** Least time between refreshes (default {@link REFRESH_MS}). */
  refreshMs?: number;
  /**
   * Whether a download of `repo`@`commit` finished here: its last-use
   * record, which the cache writes once every file is linked (and eviction
   * removes). Default: that record on disk.
   */
  finished?: (repo: string, commit: string) => Promise<boolean>;
  /** The desired pulls that failed for good (agent/model_pulls.ts `failures`); none by default. */
  pullFailures?: () => PullFailureReport[];
}

/** What must stay in the cache for `desired`, given what it holds. */
export function keepSet(
  desired: Pick<DesiredState, "shards" | "models"> | null,
  held: readonly CachedRevision[],
): KeepSet {
  const keep = new Set<string>();
  for (const s of desired?.shards ?? []) keepShard(keep, s, held);
  for (const m of desired?.models ?? []) keep.add(revisionKey(m.model, m.commit));
  return { revisions: keep };
}

function keepShard(keep: Set<string>, s: DesiredShard, held: readonly CachedRevision[]): void {
  const { model, model_commit } = s.launch;
  if (model_commit !== undefined) return void keep.add(revisionKey(model, model_commit));
  for (const r of held) if (r.repo === model) keep.add(revisionKey(r.repo, r.commit));
}

/** The cache's report for heartbeats, and its evictions. */
export class ModelCacheReporter {
  readonly #o: ModelCacheReporterOptions;
  #last: Omit<ModelCacheReport, "evicted"> | null = null;
  #lastAt = -Infinity;
  #pending: EvictionReport[] = [];
  #pendingEngine: EngineCacheEvictionReport[] = [];
  #refreshing: Promise<void> | null = null;
  #afterEviction: (() => Promise<unknown>) | null = null;
  /** Revisions the last refresh found finished: a new one is listed again (see #refresh). */
  #done = new Set<string>();

  /** A reporter over `options.cache`. */
  constructor(options: ModelCacheReporterOptions) {
    this.#o = options;
  }

  /**
   * Sees the cache's events: each eviction waits for the next heartbeat; a
   * download that starts, completes or fails is read at the next one, not
   * up to {@link REFRESH_MS} later (placement prefers holders).
   */
  cacheEvent(e: CacheEvent): void {
    if (e.kind === "started" || e.kind === "completed" || e.kind === "failed") {
      this.#lastAt = -Infinity;
    }
    if (e.kind !== "evicted") return;
    this.#pending.push({
      repo: e.repo,
      commit: e.commit,
      bytes: e.bytes,
      at: this.#o.clock.now(),
      reason: e.reason.slice(0, REPORT_BOUNDS.reason),
    });
    if (this.#pending.length > MAX_PENDING_EVICTIONS) {
      const dropped = this.#pending.splice(0, this.#pending.length - MAX_PENDING_EVICTIONS);
      this.#o.log.warn("evictions not reported: the control plane has not heard them", {
        dropped: dropped.length,
      });
    }
  }

  /**
   * The report for the next heartbeat, refreshed first when the last one is
   * older than the refresh interval; null until one could be read.
   */
  async report(): Promise<ModelCacheReport | null> {
    if (this.#o.clock.now() - this.#lastAt >= (this.#o.refreshMs ?? REFRESH_MS)) {
      this.#refreshing ??= this.#refresh().finally(() => this.#refreshing = null);
      await this.#refreshing;
    }
    if (this.#last === null) return null;
    const engine = this.#pendingEngine.slice(0, REPORT_BOUNDS.cacheEvictions);
    const failed = this.#o.pullFailures?.() ?? [];
    return {
      ...this.#last,
      evicted: this.#pending.slice(0, REPORT_BOUNDS.cacheEvictions),
      ...(engine.length === 0 ? {} : { engine_caches_evicted: engine }),
      ...(failed.length === 0 ? {} : { pulls_failed: failed }),
    };
  }

  /** An engine cache directory the agent evicted: it waits for the next heartbeat. */
  engineCacheEvicted(e: EngineCacheEvicted): void {
    const b = REPORT_BOUNDS;
    this.#pendingEngine.push({
      engine: e.engine.slice(0, b.engineCacheKey),
      key: e.key.slice(0, b.engineCacheKey),
      model: e.model?.slice(0, b.downloadModel) ?? null,
      commit: e.revision?.slice(0, b.downloadCommit) ?? null,
      bytes: e.bytes,
      ...(e.atLeast ? { bytes_at_least: true } : {}),
      at: this.#o.clock.now(),
      cause: e.cause,
      reason: e.reason.slice(0, b.reason),
    });
    if (this.#pendingEngine.length > MAX_PENDING_EVICTIONS) {
      const dropped = this.#pendingEngine.length - MAX_PENDING_EVICTIONS;
      this.#pendingEngine.splice(0, dropped);
      this.#o.log.warn(
        "engine cache evictions not reported: the control plane has not heard them",
        {
          dropped,
        },
      );
    }
  }

  /**
   * Starts `hook` after each refresh that evicted a revision, without
   * waiting for it: the engine caches follow their revisions out
   * (agent/engine_cache/), and their evictions reach the heartbeat after.
   * Its failure is logged; the report goes on.
   */
  afterEviction(hook: () => Promise<unknown>): void {
    this.#afterEviction = hook;
  }

  /** The control plane took `report`: its evictions are not sent again. */
  delivered(report: ModelCacheReport): void {
    const sent = new Set<object>([...report.evicted, ...(report.engine_caches_evicted ?? [])]);
    this.#pending = this.#pending.filter((e) => !sent.has(e));
    this.#pendingEngine = this.#pendingEngine.filter((e) => !sent.has(e));
  }

  /**
   * Starts the hook, never awaited: a walk of the engine caches must not
   * hold the heartbeat; what it evicts rides the next one.
   */
  #followEvictions(): void {
    const hook = this.#afterEviction;
    if (hook === null) return;
    Promise.resolve().then(hook).catch((e) =>
      this.#o.log.warn("cannot evict the engine caches of evicted revisions", {
        error: errorMessage(e),
      })
    );
  }

  async #refresh(): Promise<void> {
    const { cache, watermarks, log, clock } = this.#o;
    this.#lastAt = clock.now();
    try {
      const desired = this.#o.desired();
      let held = await cache.revisions();
      const evicted = await cache.eviction.evict(keepSet(desired, held), watermarks);
      if (evicted.length > 0) {
        held = await cache.revisions();
        this.#followEvictions();
      }
      const keep = keepSet(desired, held);
      const room = await cache.eviction.room(keep, watermarks);
      const pinned = new Set(
        (desired?.models ?? []).filter((m) => m.pinned).map((m) => revisionKey(m.model, m.commit)),
      );
      const finished = this.#o.finished ?? ((repo, commit) => recorded(cache, repo, commit));
      const done = new Set<string>();
      for (const r of held) {
        if (await finished(r.repo, r.commit)) done.add(revisionKey(r.repo, r.commit));
      }
      // A download may have finished between the listing and its record's check: the listing
      // then lacks files the record vouches for. The record is written after every file is in
      // place, so a listing made after it was seen is whole.
      if ([...done].some((key) => !this.#done.has(key))) {
        const again = new Map(
          (await cache.revisions()).map((r) => [revisionKey(r.repo, r.commit), r]),
        );
        held = held.flatMap((r) => {
          const now = again.get(revisionKey(r.repo, r.commit));
          return now === undefined ? [] : [now];
        });
      }
      this.#done = done;
      this.#last = { room_bytes: room, ...listed(held, cache.progress(), pinned, done) };
    } catch (e) {
      // The report keeps its last value; placement then reads the room it last heard.
      log.warn("cannot read the model cache for the heartbeat", { error: errorMessage(e) });
    }
  }
}

/** Whether the cache's last-use record of `repo`@`commit` is on disk (a download finished). */
async function recorded(
  cache: Pick<ModelCache, "layout">,
  repo: string,
  commit: string,
): Promise<boolean> {
  try {
    return (await Deno.lstat(cache.layout.usedPath(repo, commit))).isFile;
  } catch {
    return false;
  }
}

/** Downloads first, then the most recently used; the list cut to its bound. */
function listed(
  held: readonly CachedRevision[],
  progress: ReturnType<ModelCache["progress"]>,
  pinned: ReadonlySet<string>,
  done: ReadonlySet<string>,
): Pick<ModelCacheReport, "revisions" | "omitted"> {
  const fetching = new Map(progress.map((p) => [revisionKey(p.repo, p.commit), p]));
  const out: (CachedRevisionReport & { order: number })[] = [];
  for (const p of fetching.values()) {
    const key = revisionKey(p.repo, p.commit);
    out.push({
      repo: p.repo,
      commit: p.commit,
      bytes: p.bytesTotal,
      state: "downloading",
      bytes_done: Math.min(p.bytesDone, p.bytesTotal),
      last_used: null,
      pinned: pinned.has(key),
      order: Infinity,
    });
  }
  for (const r of held) {
    const key = revisionKey(r.repo, r.commit);
    if (fetching.has(key)) continue;
    const bytes = [...r.blobs.values()].reduce((n, b) => n + b, 0);
    out.push({
      repo: r.repo,
      commit: r.commit,
      bytes,
      state: done.has(key) ? "complete" : "partial",
      bytes_done: bytes,
      last_used: r.lastUsedMs > 0 ? r.lastUsedMs : null,
      pinned: pinned.has(key),
      order: r.lastUsedMs,
    });
  }
  out.sort((a, b) =>
    b.order - a.order || (revisionKey(a.repo, a.commit) < revisionKey(b.repo, b.commit) ? -1 : 1)
  );
  const kept = out.slice(0, REPORT_BOUNDS.cacheRevisions).map(({ order: _, ...r }) => r);
  return { revisions: kept, omitted: out.length - kept.length };
}
