/**
 * The agent's {@link ModelFetcher} (issue #25 items 2, 4): before a shard's
 * engine starts, its model is put on this host, and the engine is launched
 * from the directory this answers (the launch's `model_path`) with the hub
 * switched off (agent/prepare_shard.ts).
 *
 * - A hub id: the launch's commit when the control plane resolved one, else
 *   its revision, else `main`, resolved with the hub's revision API, then
 *   fetched into the model cache (agent/model_cache/) from the hub (`HF_ENDPOINT`,
 *   with `HF_TOKEN`). Shards of this node that need the same snapshot share
 *   one download (the cache's shared blob jobs) and one revision lookup.
 * - A local or shared path (absolute, or `file://`): used in place after a
 *   check that it is present here and holds files; never copied.
 *
 * Failures are {@link ModelFetchError}s saying whether a later try may help:
 * the hub unreachable or a source gone may; an unknown repo, revision or
 * file, a gated repo, an unsafe name or a disk too small may not (the shard
 * then fails for good with the hub's answer, the disk's numbers).
 *
 * @module
 */
import { HubError } from "../models/hub_errors.ts";
import type { HubClient } from "../models/hub_client.ts";
import { localModelDir } from "../models/facts_source.ts";
import { COMMIT_PATTERN, DEFAULT_REVISION } from "../models/hub_protocol.ts";
import type { RepoSnapshot } from "../models/repo_snapshot.ts";
import type { ByteSource } from "../models/byte_source.ts";
import { errorMessage } from "../text/error_message.ts";
import type { DesiredLaunch } from "../engines/types.ts";
import { type DesiredShard, INSUFFICIENT_DISK_FAILURE } from "../protocol/agent_protocol.ts";
import {
  type DownloadProgress,
  type FetchedModel,
  type ModelFetcher,
  ModelFetchError,
} from "../supervisor/model_fetcher.ts";
import { DownloadFailedError } from "./model_cache/download_failed.ts";
import { UnsafePathError } from "./model_cache/cache_layout.ts";
import { InsufficientDiskError } from "./model_cache/disk_space.ts";
import type { ModelCache } from "./model_cache/model_cache.ts";
import type { CacheEvent } from "./model_cache/cache_events.ts";
import { SnapshotListings } from "./snapshot_listings.ts";
import { SourceTallies } from "./source_tally.ts";
import { ShardDownloads } from "./shard_downloads.ts";

/** The seams of a {@link CacheModelFetcher}. */
export interface ModelFetchOptions {
  /** The agent's model cache. */
  cache: ModelCache;
  /** The hub (or mirror) it fetches from. */
  hub: HubClient;
  /** Reads a local model directory's entries (tests give a fake). */
  listDir?: (path: string) => Promise<{ name: string; size: number }[]>;
  /**
   * The sources of a model revision, the hub among them (issue #25 item 3:
   * the peers the control plane assigned, agent/assigned_sources.ts); the
   * hub alone by default. Asked again for every chunk of a download, so a
   * re-plan reaches a download under way: keep it cheap.
   */
  sources?: (model: string, commit: string, hub: ByteSource) => ByteSource[];
}

/**
 * Where a hub model is read: the commit the control plane resolved the
 * deployment's revision to (`model_commit`, issue #25 item 1), else the
 * deployment's revision (`model_revision`: resolution pending), else `main`,
 * resolved here. A revision that is itself a commit is read as a commit.
 */
export function launchRevision(launch: DesiredLaunch): { commit?: string; revision: string } {
  const named = launch.model_commit ?? launch.model_revision ?? DEFAULT_REVISION;
  return COMMIT_PATTERN.test(named) ? { commit: named, revision: named } : { revision: named };
}

/** Puts shards' models on this host through the model cache. */
export class CacheModelFetcher implements ModelFetcher {
  readonly #cache: ModelCache;
  readonly #hub: HubClient;
  readonly #listDir: (path: string) => Promise<{ name: string; size: number }[]>;
  readonly #sources: NonNullable<ModelFetchOptions["sources"]>;
  /** Revision lookups under way, shared by the shards asking for the same one. */
  readonly #resolving = new Map<string, Promise<RepoSnapshot>>();
  /** Each shard's snapshot and each snapshot's last progress, for the shards' reports. */
  readonly #downloads = new ShardDownloads();
  /** Bytes the last completed download of each snapshot fetched (0: all were here). */
  readonly #fetched = new Map<string, number>();
  /** The lists of the snapshots this cache completed. */
  readonly #listings: SnapshotListings;
  /** Which sources supplied each snapshot's bytes (the receipt's and the event's "from …"). */
  readonly #tallies = new SourceTallies();

  /** A fetcher over `options.cache` and `options.hub`. */
  constructor(options: ModelFetchOptions) {
    this.#cache = options.cache;
    this.#hub = options.hub;
    this.#listDir = options.listDir ?? listDir;
    this.#listings = new SnapshotListings(options.cache.layout);
    this.#sources = options.sources ?? ((_model, _commit, hub) => [hub]);
  }

  /** {@inheritDoc ModelFetcher.fetch} */
  async fetch(shard: DesiredShard, signal: AbortSignal): Promise<FetchedModel> {
    const model = shard.launch.model;
    const local = localModelDir(model);
    if (local !== null) return { path: await this.#checkLocal(local), bytes: 0 };
    const { commit, revision } = launchRevision(shard.launch);
    const snapshot = await this.#snapshot(model, commit, revision, signal);
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    // A shard stopped meanwhile may be forgotten already: it is not remembered again.
    signal.throwIfAborted();
    this.#downloads.fetching(shard.id, {
      repo: snapshot.repo,
      commit: snapshot.commit,
      bytes: total,
    });
    // A ref is written for a branch or tag, not for a commit asked by its hash.
    const path = await this.#ensure(
      model,
      snapshot,
      commit === undefined ? revision : undefined,
      signal,
    );
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const bytes = this.#fetched.get(key) ?? 0;
    return bytes === 0 ? { path, bytes } : { path, bytes, sources: this.#tallies.supplied(key) };
  }

  /**
   * Fetches `model`@`commit` into the cache without a shard (`llmgw models
   * pull`, a rollout's pre-pull: agent/model_pulls.ts), through the same
   * lookup, sources and download as a shard's model; answers its snapshot
   * directory.
   */
  async pull(model: string, commit: string, signal: AbortSignal): Promise<string> {
    return await this.#ensure(
      model,
      await this.#snapshot(model, commit, commit, signal),
      undefined,
      signal,
    );
  }

  /** Puts `model`'s `snapshot` in the cache from its sources; `revision` names the ref to write, if any. */
  async #ensure(
    model: string,
    snapshot: RepoSnapshot,
    revision: string | undefined,
    signal: AbortSignal,
  ): Promise<string> {
    let path: string;
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const ended = this.#tallies.begin(key);
    try {
      const hub = this.#hub.byteSource();
      const sources = () => this.#tallies.wrap(key, this.#sources(model, snapshot.commit, hub));
      path = await this.#cache.ensureSnapshot(snapshot, sources, { revision, signal });
    } catch (e) {
      throw fetchError(e);
    } finally {
      ended();
    }
    // Its list, so the next start of this commit needs no hub (snapshot_listings.ts).
    await this.#listings.write(snapshot).catch(() => {});
    return path;
  }

  /**
   * Sees the cache's events (the agent passes each on): what each completed
   * download fetched and from where; an evicted snapshot's figures are dropped.
   */
  cacheEvent(e: CacheEvent): void {
    this.#tallies.cacheEvent(e);
    if (e.kind === "completed") this.#fetched.set(`${e.repo}@${e.commit}`, e.bytes);
    if (e.kind === "evicted") {
      this.#fetched.delete(`${e.repo}@${e.commit}`);
      this.#downloads.evicted(e.repo, e.commit);
    }
  }

  /**
   * The shards the desired state lists now (the agent calls this at every
   * apply): what the others' downloads left is forgotten (shard_downloads.ts).
   */
  retain(shards: Iterable<string>): void {
    this.#downloads.retain(shards);
  }

  /** How many shards and snapshots the reports' memory holds (tests check the bound). */
  get remembered(): { shards: number; snapshots: number } {
    return this.#downloads.size;
  }

  /** {@inheritDoc ModelFetcher.progress} */
  progress(shard: DesiredShard): DownloadProgress | null {
    return this.#downloads.progress(shard.id, this.#cache.progress());
  }

  /**
   * The snapshot to fetch: a commit whose list this cache kept asks no hub;
   * else the hub's revision API; and when the hub cannot be reached, the
   * list of the commit asked, or of the one `refs/<revision>` points at, if
   * kept (as huggingface_hub resolves a branch offline).
   */
  async #snapshot(
    repo: string,
    commit: string | undefined,
    revision: string,
    signal: AbortSignal,
  ): Promise<RepoSnapshot> {
    const kept = commit === undefined ? null : await this.#listings.read(repo, commit);
    if (kept !== null) return kept;
    try {
      return await this.#resolve(repo, commit ?? revision, signal);
    } catch (e) {
      const error = fetchError(e);
      if (!error.retryable) throw error;
      const known = commit ?? await this.#listings.ref(repo, revision);
      const offline = known === null ? null : await this.#listings.read(repo, known);
      if (offline === null) throw error;
      return offline;
    }
  }

  /** The snapshot `revision` of `repo` is now; lookups for the same one share a request. */
  async #resolve(repo: string, revision: string, signal: AbortSignal): Promise<RepoSnapshot> {
    const key = `${repo}@${revision}`;
    let lookup = this.#resolving.get(key);
    if (lookup === undefined) {
      // Not the caller's signal: another shard may be waiting on the same lookup.
      lookup = this.#hub.resolveRevision(repo, revision).finally(() => this.#resolving.delete(key));
      this.#resolving.set(key, lookup);
    }
    try {
      return await abortable(lookup, signal);
    } catch (e) {
      throw fetchError(e);
    }
  }

  /** A local model's directory, after a check that it is here and holds files. */
  async #checkLocal(dir: string): Promise<string> {
    let entries: { name: string; size: number }[];
    try {
      entries = await this.#listDir(dir);
    } catch (e) {
      const why = e instanceof Deno.errors.NotFound
        ? "no such directory on this host"
        : `cannot read it: ${errorMessage(e)}`;
      throw new ModelFetchError(`Cannot use local model ${dir}: ${why}`, false);
    }
    const bytes = entries.reduce((n, e) => n + e.size, 0);
    if (entries.length === 0 || bytes === 0) {
      throw new ModelFetchError(
        `Cannot use local model ${dir}: it holds no files on this host`,
        false,
      );
    }
    return dir;
  }
}

/** The fetch error for what the hub or the cache threw: final or retryable, with its message. */
export function fetchError(e: unknown): ModelFetchError {
  if (e instanceof ModelFetchError) return e;
  if (e instanceof InsufficientDiskError) {
    return new ModelFetchError(e.message, false, INSUFFICIENT_DISK_FAILURE, e);
  }
  if (e instanceof UnsafePathError) return new ModelFetchError(e.message, false, null, e);
  if (e instanceof HubError || e instanceof DownloadFailedError) {
    return new ModelFetchError(e.message, e.retryable, null, e);
  }
  return new ModelFetchError(errorMessage(e), true, null, e);
}

/** `p`, or the signal's reason once it aborts (`p` itself runs on). */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** The regular files directly in `dir` (a model's files: config, weights, tokenizer) with sizes. */
async function listDir(dir: string): Promise<{ name: string; size: number }[]> {
  const out: { name: string; size: number }[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) continue;
    // A link (a hub-cache snapshot's entries are links) counts by its target.
    const stat = await Deno.stat(`${dir}/${entry.name}`);
    if (stat.isFile) out.push({ name: entry.name, size: stat.size });
  }
  return out;
}
