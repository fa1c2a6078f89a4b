/**
 * Where the bytes of a model file come from: the hub (or a mirror), a peer
 * agent that holds the file, a shared path. The model cache asks sources for
 * byte ranges and moves a range to the next source when one fails, so every
 * source has this one shape.
 *
 * @module
 */
import type { RepoFile } from "./repo_snapshot.ts";

/** Which kind of place a source is; shown in progress, events and receipts. */
export type SourceKind = "hub" | "peer" | "path";

/** One place that can serve byte ranges of a model revision's files. */
export interface ByteSource {
  /** What it is. */
  readonly kind: SourceKind;
  /** Its name for people: the hub's URL (never with a token), a peer's node id, a path. */
  readonly name: string;
  /**
   * The bytes `start` … `end - 1` (end exclusive) of `file` of `commit` in
   * `repo`. Rejects with an error whose message names the source and the file
   * when the source cannot serve them; the stream errors when the transfer
   * breaks midway. It never yields more than `end - start` bytes.
   */
  read(
    repo: string,
    commit: string,
    file: RepoFile,
    start: number,
    end: number,
    signal: AbortSignal,
  ): Promise<ReadableStream<Uint8Array>>;
}
