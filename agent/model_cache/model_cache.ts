/**
 * The agent's model cache (`--model-cache DIR`): given a resolved model
 * revision and the sources that can serve it, it makes
 * `snapshots/<commit>/` hold every file, verified, in the hub cache's own
 * layout, and answers the directory an engine is launched from with
 * `HF_HUB_OFFLINE=1`. docs/models.md, "The model cache", tells the whole
 * story; the parts are:
 *
 * - cache_layout.ts: the paths, and the checks of every name a source gives;
 * - cache_inspect.ts: what the host already holds (hashed once per blob);
 * - blob_download.ts: one blob, chunked, resumed, verified, renamed;
 *   download_failed.ts: how it gives up, and what is final; stall_limit.ts:
 *   a try's bound on a silent source;
 * - blob_jobs.ts: one job per blob, shared by the snapshots needing it;
 * - live_sources.ts, source_order.ts: which source each chunk asks, the
 *   assignment read again for every chunk;
 * - token_bucket.ts, chunk_slots.ts: the agent's rate and connections,
 *   shared by every download;
 * - written_chunks.ts: how far each chunk under way is written, for the
 *   peer server to stream;
 * - download_progress.ts, cache_events.ts: what the agent reports;
 * - cache_revisions.ts, cache_eviction.ts: what it holds, and the watermarks.
 *
 * A snapshot whose request is aborted leaves its part files for the next
 * request to resume.
 *
 * @module
 */
import { dirname } from "node:path";
import { blobKey, type RepoFile, type RepoSnapshot } from "../../models/repo_snapshot.ts";
import { errorMessage } from "../../text/error_message.ts";
import { type Clock, systemClock } from "../../time/clock.ts";
import type { BackoffPolicy } from "../../supervisor/backoff.ts";
import { sleep as realSleep } from "../retry.ts";
import type { BlobFetchSettings } from "./blob_download.ts";
import { BlobJobs } from "./blob_jobs.ts";
import { type CacheEventSink, emit } from "./cache_events.ts";
import { type CacheFs, denoCacheFs, isNoSpace, tempSibling } from "./cache_fs.ts";
import {
  blobState,
  inspectSnapshot,
  isLinked,
  rememberVerified,
  verifyExisting,
} from "./cache_inspect.ts";
import { CacheEviction } from "./cache_eviction.ts";
import { blobLinkTarget, CacheLayout } from "./cache_layout.ts";
import { type CachedRevision, listRevisions, markUsed } from "./cache_revisions.ts";
import { parseRecord, planChunks } from "./chunk_record.ts";
import { ChunkSlots } from "./chunk_slots.ts";
import { InsufficientDiskError } from "./disk_space.ts";
import { LiveSources, type SourceList } from "./live_sources.ts";
import { SOURCE_BACKOFF } from "./source_order.ts";
import { DownloadProgress, type ProgressReport } from "./download_progress.ts";
import { DEFAULT_STALL_MS } from "./stall_limit.ts";
import { type Sleep, TokenBucket, unlimited } from "./token_bucket.ts";
import type { WrittenChunks } from "./written_chunks.ts";

/** How the cache works; only `root` is required. */
export interface ModelCacheOptions {
  /** The cache directory (`--model-cache`), absolute. */
  root: string;
  /** `--download-rate` in bytes/s; null or absent for no limit. */
  rateBytesPerSecond?: number | null;
  /** Bytes per ranged read (default 16 MiB). */
  chunkBytes?: number;
  /** Chunks fetched at once across every download (default 8). */
  concurrency?: number;
  /** Tries of one chunk per source (default 3). */
  attemptsPerSource?: number;
  /** Whole-file fetches when a hash does not match (default 3). */
  verifyAttempts?: number;
  /** Backoff between tries of a chunk (default 0.5 s doubling to 30 s). */
  retryPolicy?: BackoffPolicy;
  /** The longest a chunk's try waits on its source for a byte (default 60 s, stall_limit.ts). */
  stallMs?: number;
  /** Told every chunk's written bytes, for the peer server to stream them (written_chunks.ts). */
  written?: WrittenChunks;
  /** Receives every event. */
  onEvent?: CacheEventSink;
  /** Seams for tests; `stallSleep` waits out `stallMs` (default a real timer, not `sleep`). */
  stallSleep?: Sleep;
  fs?: CacheFs;
  clock?: Clock;
  sleep?: Sleep;
  random?: () => number;
}

/** Options of one {@link ModelCache.ensureSnapshot}. */
export interface EnsureOptions {
  /** The branch or tag the commit was resolved from: written to `refs/<revision>`. */
  revision?: string;
  /** Stops the download; its part files stay for the next call to resume. */
  signal?: AbortSignal;
}

/** The default chunk: 16 MiB, in huggingface_hub's and hf_transfer's range. */
export const DEFAULT_CHUNK_BYTES = 16 * 2 ** 20;

/** One agent's model cache. */
export class ModelCache {
  /** The layout of its directory. */
  readonly layout: CacheLayout;
  readonly #fs: CacheFs;
  readonly #clock: Clock;
  readonly #settings: BlobFetchSettings;
  readonly #onEvent?: CacheEventSink;
  readonly #jobs: BlobJobs;
  readonly #progress = new Map<string, DownloadProgress>();
  readonly #ensuring = new Map<string, number>();
  /** Watermark eviction over this cache; never touches a repository being fetched. */
  readonly eviction: CacheEviction;

  /** A cache over `options.root`. */
  constructor(options: ModelCacheOptions) {
    this.layout = new CacheLayout(options.root);
    this.#fs = options.fs ?? denoCacheFs;
    this.#clock = options.clock ?? systemClock;
    this.#onEvent = options.onEvent;
    const sleep = options.sleep ?? realSleep;
    const rate = options.rateBytesPerSecond ?? null;
    this.#settings = {
      fs: this.#fs,
      layout: this.layout,
      chunkBytes: options.chunkBytes ?? DEFAULT_CHUNK_BYTES,
      slots: new ChunkSlots(options.concurrency ?? 8),
      limiter: rate === null ? unlimited : new TokenBucket(rate, this.#clock, sleep),
      sleep,
      attemptsPerSource: options.attemptsPerSource ?? 3,
      retryPolicy: options.retryPolicy ?? { initialMs: 500, maxMs: 30_000, factor: 2 },
      random: options.random ?? Math.random,
      verifyAttempts: options.verifyAttempts ?? 3,
      stall: { ms: options.stallMs ?? DEFAULT_STALL_MS, sleep: options.stallSleep ?? realSleep },
      written: options.written,
      onEvent: options.onEvent,
    };
    this.#jobs = new BlobJobs(this.#settings, async (target) => {
      await rememberVerified(this.#fs, this.layout, target.repo, target.file);
    });
    this.eviction = new CacheEviction({
      fs: this.#fs,
      layout: this.layout,
      busy: (repo) => this.#ensuring.has(repo),
      onEvent: options.onEvent,
    });
  }

  /** Every revision the cache holds, with its blobs, refs and last use. */
  revisions(): Promise<CachedRevision[]> {
    return listRevisions(this.#fs, this.layout);
  }

  /** Records a use of `repo`@`commit` now (a shard started on it): eviction takes the least recent first. */
  markUsed(repo: string, commit: string): Promise<void> {
    return markUsed(this.#fs, this.layout, repo, commit, this.#clock.now());
  }

  /** The directory an engine is launched from: `<root>/models--org--name/snapshots/<commit>`. */
  snapshotDir(repo: string, commit: string): string {
    return this.layout.snapshotDir(repo, commit);
  }

  /** Whether every file of `snapshot` is here (right size) and linked: cheap, no hashing. */
  async holdsRevision(snapshot: RepoSnapshot): Promise<boolean> {
    return (await inspectSnapshot(this.#fs, this.layout, snapshot)).holds;
  }

  /** The progress of every download under way. */
  progress(): ProgressReport[] {
    return [...this.#progress.values()].map((p) => p.report());
  }

  /**
   * Makes `snapshots/<commit>/` hold every file of `snapshot`, verified,
   * fetching what is missing from `sources` (in preference order; a
   * function is asked again for every chunk, so a new assignment reaches
   * the download under way), and answers its path. Rejects with
   * {@link UnsafePathError} before touching anything when a name is unsafe,
   * {@link InsufficientDiskError} when the disk cannot hold it (partial
   * files removed), DownloadFailedError when the sources fail, or the
   * signal's reason (part files kept).
   */
  async ensureSnapshot(
    snapshot: RepoSnapshot,
    sources: SourceList,
    options: EnsureOptions = {},
  ): Promise<string> {
    const repo = snapshot.repo;
    this.#ensuring.set(repo, (this.#ensuring.get(repo) ?? 0) + 1);
    try {
      return await this.#ensure(snapshot, sources, options);
    } finally {
      const n = this.#ensuring.get(repo)! - 1;
      if (n > 0) this.#ensuring.set(repo, n);
      else this.#ensuring.delete(repo);
    }
  }

  async #ensure(
    snapshot: RepoSnapshot,
    sources: SourceList,
    options: EnsureOptions,
  ): Promise<string> {
    const { repo, commit } = snapshot;
    const signal = options.signal ?? new AbortController().signal;
    if (options.revision !== undefined) this.layout.refPath(repo, options.revision);
    const held = await inspectSnapshot(this.#fs, this.layout, snapshot);
    const missing = await this.#missingBlobs(snapshot, held.present, held.missing);
    const what = `${repo}@${commit}`;
    const total = missing.reduce((n, f) => n + f.size, 0);
    const key = what;
    if (missing.length > 0) {
      const needed = total - (await this.#bytesOnDisk(repo, missing));
      const free = await this.#fs.freeBytes(this.layout.root);
      if (needed > free) {
        const error = new InsufficientDiskError(this.layout.root, what, needed, free);
        emit(this.#onEvent, { kind: "failed", repo, commit, error: error.message });
        throw error;
      }
      const progress = new DownloadProgress(repo, commit, total, this.#clock);
      this.#progress.set(key, progress);
      emit(this.#onEvent, { kind: "started", repo, commit, files: missing.length, bytes: total });
      try {
        await this.#fetchAll(snapshot, missing, sources, progress, signal);
      } finally {
        this.#progress.delete(key);
      }
    }
    for (const file of snapshot.files) await this.#link(repo, commit, file);
    if (options.revision !== undefined && options.revision !== commit) {
      const ref = this.layout.refPath(repo, options.revision);
      if ((await this.#fs.readText(ref)) !== commit) {
        await this.#fs.mkdirp(dirname(ref));
        await this.#fs.mkdirp(this.layout.tempDir());
        // The hub's client writes the bare commit, no newline. Written aside
        // first, so a crash leaves no stray file that reads as a ref.
        const temp = tempSibling(`${this.layout.tempDir()}/ref`);
        await this.#fs.writeTextAtomic(temp, commit);
        await this.#fs.rename(temp, ref);
      }
    }
    await this.markUsed(repo, commit);
    const path = this.snapshotDir(repo, commit);
    emit(this.#onEvent, { kind: "completed", repo, commit, bytes: total, path });
    return path;
  }

  /** One file per missing blob: absent ones, and existing ones whose first hash check failed. */
  async #missingBlobs(
    snapshot: RepoSnapshot,
    present: RepoFile[],
    missing: RepoFile[],
  ): Promise<RepoFile[]> {
    const { repo, commit } = snapshot;
    const out = new Map(missing.map((f) => [blobKey(f), f]));
    for (const file of present) {
      const key = blobKey(file);
      if (out.has(key) || (await blobState(this.#fs, this.layout, repo, file)) === "complete") {
        continue;
      }
      if (!(await verifyExisting(this.#fs, this.layout, repo, file))) {
        emit(this.#onEvent, {
          kind: "mismatch",
          repo,
          commit,
          file: file.path,
          sources: ["cache"],
          want: blobKey(file),
          got: "(removed)",
        });
        out.set(key, file);
      }
    }
    return [...out.values()];
  }

  /** Bytes of `files` already in part files, per their records. */
  async #bytesOnDisk(repo: string, files: RepoFile[]): Promise<number> {
    let bytes = 0;
    for (const file of files) {
      const chunkBytes = this.#settings.chunkBytes;
      const done = parseRecord(
        await this.#fs.readText(this.layout.chunksPath(repo, file)),
        file.size,
        chunkBytes,
      );
      if (done === null) continue;
      for (const c of planChunks(file.size, chunkBytes)) {
        if (done.has(c.index)) bytes += c.end - c.start;
      }
    }
    return bytes;
  }

  async #fetchAll(
    snapshot: RepoSnapshot,
    missing: RepoFile[],
    sources: SourceList,
    progress: DownloadProgress,
    signal: AbortSignal,
  ): Promise<void> {
    const { repo, commit } = snapshot;
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    let first: { error: unknown; file: string } | null = null;
    // Shared by the snapshot's files (see downloadBlob); backoffs on the cache's clock, jittered.
    const live = new LiveSources(sources, this.#clock, SOURCE_BACKOFF, this.#settings.random);
    await Promise.allSettled(
      missing.map((file) =>
        this.#jobs.join({ repo, commit, file }, live, progress, both).catch((error) => {
          // One file that cannot be fetched fails the snapshot: stop the rest.
          if (!both.aborted) first = { error, file: file.path };
          stop.abort(error);
        })
      ),
    );
    signal.throwIfAborted();
    if (first === null) return;
    const { error, file } = first as { error: unknown; file: string };
    if (isNoSpace(error)) {
      for (const f of missing) {
        if (this.#jobs.running(repo, f)) continue;
        await this.#fs.remove(this.layout.partPath(repo, f));
        await this.#fs.remove(this.layout.chunksPath(repo, f));
      }
      const left = missing.reduce((n, f) => n + f.size, 0) - progress.report().bytesDone;
      const disk = new InsufficientDiskError(
        this.layout.root,
        `${repo}@${commit}`,
        Math.max(0, left),
        await this.#fs.freeBytes(this.layout.root),
      );
      emit(this.#onEvent, { kind: "failed", repo, commit, file, error: disk.message });
      throw disk;
    }
    emit(this.#onEvent, { kind: "failed", repo, commit, file, error: errorMessage(error) });
    throw error;
  }

  /**
   * `snapshots/<commit>/<path>` → its blob, made in `.llmgw/tmp/` and
   * renamed into place: a relative target means the same after the move, and
   * a crash between the two steps leaves no stray entry in a snapshot.
   */
  async #link(repo: string, commit: string, file: RepoFile): Promise<void> {
    if (await isLinked(this.#fs, this.layout, repo, commit, file)) return;
    const path = this.layout.snapshotPath(repo, commit, file);
    await this.#fs.mkdirp(dirname(path));
    await this.#fs.mkdirp(this.layout.tempDir());
    const temp = tempSibling(`${this.layout.tempDir()}/link`);
    await this.#fs.symlink(blobLinkTarget(file), temp);
    try {
      await this.#fs.rename(temp, path);
    } finally {
      await this.#fs.remove(temp);
    }
  }
}
