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
 * @module
 */
import type { ByteSource } from "../models/byte_source.ts";
import type { DownloadSource } from "../protocol/cold_start_receipt.ts";

/** Per snapshot, the bytes each source streamed. */
export class SourceTallies {
  readonly #counting = new Map<string, Map<string, DownloadSource>>();
  readonly #done = new Map<string, DownloadSource[]>();
  // The same wrapper for the same source: the cache is asked for sources every chunk.
  readonly #wrapped = new WeakMap<ByteSource, Map<string, ByteSource>>();

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
    const count = (n: number) => {
      let tally = this.#counting.get(snapshot);
      if (tally === undefined) this.#counting.set(snapshot, tally = new Map());
      const entry = tally.get(source.name) ?? { kind: source.kind, name: source.name, bytes: 0 };
      entry.bytes += n;
      tally.set(source.name, entry);
    };
    return {
      kind: source.kind,
      name: source.name,
      read: async (repo, commit, file, start, end, signal) => {
        const stream = await source.read(repo, commit, file, start, end, signal);
        return stream.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(piece, out) {
              count(piece.byteLength);
              out.enqueue(piece);
            },
          }),
        );
      },
    };
  }

  /**
   * The snapshot is complete: what was counted since the last completion
   * becomes its answer. A completion with nothing counted (a second shard's
   * wait on the same download) keeps the answer before.
   */
  complete(snapshot: string): void {
    const tally = this.#counting.get(snapshot);
    this.#counting.delete(snapshot);
    if (tally === undefined || tally.size === 0) return;
    this.#done.set(snapshot, [...tally.values()].sort((a, b) => b.bytes - a.bytes));
  }

  /** The sources of the snapshot's last completed download, most bytes first; empty when none. */
  supplied(snapshot: string): DownloadSource[] {
    return (this.#done.get(snapshot) ?? []).map((s) => ({ ...s }));
  }
}
