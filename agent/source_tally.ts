/**
 * Which sources supplied a model revision's bytes on this host (issue #25
 * item 3, "say where the bytes came from"): the fetcher wraps the sources
 * it hands the model cache, so every byte a source streams is counted
 * against its name, whatever order, retry or re-assignment the cache
 * chooses. Counted per snapshot (`repo@commit`), so the shards of a node
 * that share one download share one tally; frozen when the cache reports
 * the snapshot complete, for the shard's cold-start receipt and the
 * `download_completed` event.
 *
 * Only bytes the download keeps are named (review 1, finding 9): a fetch
 * that begins when none of its snapshot is under way counts from zero, so
 * what a failed or cancelled try streamed is dropped (part files it left
 * are resumed and named by no source: the receipt's sources then add up to
 * less than its bytes, never more); a file whose content failed its hash
 * loses its counts; bytes past the range asked are not counted (the cache
 * refuses them). The answer is forgotten when the snapshot is evicted.
 *
 * @module
 */
import type { ByteSource } from "../models/byte_source.ts";
import type { DownloadSource } from "../protocol/cold_start_receipt.ts";
import type { CacheEvent } from "./model_cache/cache_events.ts";

/** Per file path, per source name, what it streamed. */
type Tally = Map<string, Map<string, DownloadSource>>;

/** Per snapshot, the bytes each source streamed. */
export class SourceTallies {
  readonly #counting = new Map<string, Tally>();
  /** Fetches under way, per snapshot. */
  readonly #runs = new Map<string, number>();
  readonly #done = new Map<string, DownloadSource[]>();
  // The same wrapper for the same source: the cache is asked for sources every chunk.
  readonly #wrapped = new WeakMap<ByteSource, Map<string, ByteSource>>();

  /**
   * A fetch of `snapshot` begins; call the answer once it ended (completed,
   * failed or cancelled). The first of overlapping fetches (two shards of
   * one model) counts from zero; the others join its count.
   */
  begin(snapshot: string): () => void {
    const runs = this.#runs.get(snapshot) ?? 0;
    if (runs === 0) this.#counting.delete(snapshot);
    this.#runs.set(snapshot, runs + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = this.#runs.get(snapshot)! - 1;
      if (left > 0) return void this.#runs.set(snapshot, left);
      this.#runs.delete(snapshot);
      // Not completed (a completion froze its count): nothing of it will be named.
      this.#counting.delete(snapshot);
    };
  }

  /** `sources`, each counting what it streams into the tally of `snapshot` (`repo@commit`). */
  wrap(snapshot: string, sources: readonly ByteSource[]): ByteSource[] {
    return sources.map((s) => {
      let bySnapshot = this.#wrapped.get(s);
      if (bySnapshot === undefined) this.#wrapped.set(s, bySnapshot = new Map());
      let w = bySnapshot.get(snapshot);
      if (w === undefined) bySnapshot.set(snapshot, w = this.#counted(snapshot, s));
      return w;
    });
  }

  #counted(snapshot: string, source: ByteSource): ByteSource {
    const count = (file: string, n: number) => {
      let tally = this.#counting.get(snapshot);
      if (tally === undefined) this.#counting.set(snapshot, tally = new Map());
      let bySource = tally.get(file);
      if (bySource === undefined) tally.set(file, bySource = new Map());
      const entry = bySource.get(source.name) ?? { kind: source.kind, name: source.name, bytes: 0 };
      entry.bytes += n;
      bySource.set(source.name, entry);
    };
    return {
      kind: source.kind,
      name: source.name,
      read: async (repo, commit, file, start, end, signal) => {
        const stream = await source.read(repo, commit, file, start, end, signal);
        let left = end - start;
        return stream.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(piece, out) {
              // A piece past the range is refused by the cache, and so is all after it.
              const fits = piece.byteLength <= left;
              left -= piece.byteLength;
              if (fits) count(file.path, piece.byteLength);
              out.enqueue(piece);
            },
          }),
        );
      },
    };
  }

  /**
   * Sees the model cache's events: a file whose content did not match loses
   * its counts (the cache deleted those bytes); a completed snapshot's count
   * becomes its answer; an evicted snapshot's answer is forgotten.
   */
  cacheEvent(e: CacheEvent): void {
    const snapshot = `${e.repo}@${e.commit}`;
    if (e.kind === "mismatch") this.#counting.get(snapshot)?.delete(e.file);
    else if (e.kind === "completed") this.#complete(snapshot);
    else if (e.kind === "evicted") this.#done.delete(snapshot);
  }

  /**
   * What was counted since the last completion becomes the answer. A
   * completion with nothing counted (a second shard's wait on the same
   * download) keeps the answer before.
   */
  #complete(snapshot: string): void {
    const tally = this.#counting.get(snapshot);
    this.#counting.delete(snapshot);
    const bySource = new Map<string, DownloadSource>();
    for (const file of tally?.values() ?? []) {
      for (const s of file.values()) {
        const entry = bySource.get(s.name) ?? { ...s, bytes: 0 };
        entry.bytes += s.bytes;
        bySource.set(s.name, entry);
      }
    }
    const named = [...bySource.values()].filter((s) => s.bytes > 0);
    if (named.length === 0) return;
    this.#done.set(snapshot, named.sort((a, b) => b.bytes - a.bytes));
  }

  /** The sources of the snapshot's last completed download, most bytes first; empty when none. */
  supplied(snapshot: string): DownloadSource[] {
    return (this.#done.get(snapshot) ?? []).map((s) => ({ ...s }));
  }
}
