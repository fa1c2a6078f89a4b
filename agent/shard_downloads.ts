/**
 * What the agent's fetcher (agent/model_fetch.ts) remembers of each shard's
 * download for the shard's report (`download` while `downloading`): the
 * snapshot each shard fetches, and the last progress seen of each snapshot,
 * so a report between two tries still shows how far it got.
 *
 * Bounded for an agent that runs for months through many rollouts (issue
 * #25): a shard is forgotten once the desired state no longer lists it
 * ({@link ShardDownloads.retain}, at every desired-state apply), and a
 * snapshot's last progress once no shard remembered fetches it, or once it
 * is evicted from the cache (its figures then say bytes that are gone). The
 * cold-start receipt needs none of it: a fetch answers its own receipt.
 *
 * @module
 */
import type { DownloadProgress } from "../supervisor/model_fetcher.ts";
import type { ProgressReport } from "./model_cache/download_progress.ts";

/** A snapshot a shard fetches, with its bytes in all. */
export interface ShardSnapshot {
  repo: string;
  commit: string;
  bytes: number;
}

/** The shards' downloads, as the fetcher remembers them between reports. */
export class ShardDownloads {
  /** The snapshot each shard is fetching (or last fetched), by shard id. */
  readonly #snapshots = new Map<string, ShardSnapshot>();
  /** The last progress seen of each snapshot (`repo@commit`). */
  readonly #last = new Map<string, DownloadProgress>();

  /** Shard `shard` fetches `snapshot` now; the one it fetched before is forgotten if no other shard does. */
  fetching(shard: string, snapshot: ShardSnapshot): void {
    const before = this.#snapshots.get(shard);
    this.#snapshots.set(shard, { ...snapshot });
    if (before !== undefined) this.#dropUnused(keyOf(before));
  }

  /**
   * Shard `shard`'s download: as the cache's `now` reports it while under
   * way, else the last seen, else nothing done of its bytes; null when the
   * shard fetched nothing (or was forgotten).
   */
  progress(shard: string, now: readonly ProgressReport[]): DownloadProgress | null {
    const s = this.#snapshots.get(shard);
    if (s === undefined) return null;
    const key = keyOf(s);
    const p = now.find((p) => p.repo === s.repo && p.commit === s.commit);
    if (p !== undefined) {
      this.#last.set(key, {
        model: s.repo,
        commit: s.commit,
        bytes_done: p.bytesDone,
        bytes_total: p.bytesTotal,
        rate_bytes_per_second: p.rateBytesPerSecond,
        eta_seconds: p.etaSeconds,
        sources: p.sources,
      });
    }
    return this.#last.get(key) ?? {
      model: s.repo,
      commit: s.commit,
      bytes_done: 0,
      bytes_total: s.bytes,
      rate_bytes_per_second: 0,
      eta_seconds: null,
      sources: [],
    };
  }

  /**
   * Only `shards` (ids) are desired now: every other shard is forgotten,
   * and the last progress of snapshots no remembered shard fetches.
   */
  retain(shards: Iterable<string>): void {
    const keep = new Set(shards);
    for (const id of [...this.#snapshots.keys()]) {
      if (!keep.has(id)) this.#snapshots.delete(id);
    }
    const used = new Set([...this.#snapshots.values()].map(keyOf));
    for (const key of [...this.#last.keys()]) if (!used.has(key)) this.#last.delete(key);
  }

  /** `repo@commit` left the cache: its last progress would show bytes no longer here. */
  evicted(repo: string, commit: string): void {
    this.#last.delete(`${repo}@${commit}`);
  }

  /** How many shards and snapshots it remembers (tests check the bound). */
  get size(): { shards: number; snapshots: number } {
    return { shards: this.#snapshots.size, snapshots: this.#last.size };
  }

  #dropUnused(key: string): void {
    for (const s of this.#snapshots.values()) if (keyOf(s) === key) return;
    this.#last.delete(key);
  }
}

function keyOf(s: ShardSnapshot): string {
  return `${s.repo}@${s.commit}`;
}
