/**
 * Fetches one file's content into the cache: parallel ranged chunks
 * written at their offsets into a part file beside the blob, each chunk
 * recorded once synced (an interrupted download resumes with the missing
 * chunks only); then the whole file is hashed and only a match is renamed
 * to `blobs/<key>`. No partial or unverified file is ever under the final
 * name.
 *
 * Sources: every try of a chunk takes the head of the sources as assigned
 * at that moment (live_sources.ts), so a re-plan reaches a download under
 * way; a chunk already streaming finishes on its source.
 *
 * Faults: a chunk whose source fails (refused, broken stream, short or
 * long, silent past the stall limit) is retried from where it stopped, on the next source, with backoff,
 * a bounded number of times on each source (counted by name, so a re-plan
 * does not change what the sources that stay have left); the failed source
 * is backed off for the whole download and asked again once its backoff
 * ends (source_order.ts). A hash mismatch deletes the part file and
 * fetches again with the sources that served it asked last for that file. ENOSPC is left
 * to the caller, which removes the partial files (see model_cache.ts).
 *
 * @module
 */
import { dirname } from "node:path";
import { expectedHash } from "../../models/file_hash.ts";
import type { RepoFile } from "../../models/repo_snapshot.ts";
import { errorMessage } from "../../text/error_message.ts";
import { retryDelay } from "../retry.ts";
import type { BackoffPolicy } from "../../supervisor/backoff.ts";
import { type CacheEventSink, emit } from "./cache_events.ts";
import { type CacheFs, type ChunkWriter, isNoSpace } from "./cache_fs.ts";
import type { CacheLayout } from "./cache_layout.ts";
import { type Chunk, parseRecord, planChunks, recordHeader, recordLine } from "./chunk_record.ts";
import type { ChunkSlots } from "./chunk_slots.ts";
import type { LiveSources } from "./live_sources.ts";
import {
  DownloadFailedError,
  isFinal,
  noSource,
  type Refusal,
  refusedEverywhere,
  triesFailed,
} from "./download_failed.ts";
import { type StallLimit, stallLimited } from "./stall_limit.ts";
import type { RateLimiter, Sleep } from "./token_bucket.ts";
import type { ChunkTry, WrittenChunks } from "./written_chunks.ts";

/** Where a download's progress goes (fanned out to every snapshot waiting for the blob). */
export interface ProgressSink {
  /** Bytes already on disk from before (a resumed part file). */
  resumed(bytes: number): void;
  /** Bytes written (negative when a rejected file is dropped). */
  add(bytes: number): void;
  /** A chunk began (+1) or ended (-1) on `source`. */
  sourceUse(source: string, delta: 1 | -1): void;
}

/** How a blob is fetched; {@link ModelCache} fills it from its options. */
export interface BlobFetchSettings {
  fs: CacheFs;
  layout: CacheLayout;
  /** Bytes per chunk. */
  chunkBytes: number;
  /** The agent's chunk connections. */
  slots: ChunkSlots;
  /** The agent's download rate. */
  limiter: RateLimiter;
  sleep: Sleep;
  /**
   * Tries of one chunk on each source; the chunk gives up once every source
   * assigned has used them (or refused the file).
   */
  attemptsPerSource: number;
  /** Backoff between tries of a chunk. */
  retryPolicy: BackoffPolicy;
  /** Jitter source for the backoff. */
  random: () => number;
  /** Whole-file fetches when the hash does not match. */
  verifyAttempts: number;
  /** The longest a try waits on its source (stall_limit.ts). */
  stall: StallLimit;
  /** Where each chunk's written bytes are told, for the peer server to stream (written_chunks.ts). */
  written?: WrittenChunks;
  onEvent?: CacheEventSink;
}

/** Which file, of which snapshot. */
export interface BlobTarget {
  repo: string;
  commit: string;
  file: RepoFile;
}

/**
 * Fetches `target.file` from `sources` into its blob. `sources` is shared
 * by every file of a snapshot: a source that fails is moved last once, for
 * all of them, so one hub outage is one `source_changed` event, not one per
 * file. Resolves once `blobs/<key>` holds verified content; rejects with
 * {@link DownloadFailedError}, an ENOSPC error, or the signal's reason.
 */
export async function downloadBlob(
  target: BlobTarget,
  sources: LiveSources,
  settings: BlobFetchSettings,
  progress: ProgressSink,
  signal: AbortSignal,
): Promise<void> {
  const { repo, commit, file } = target;
  const { fs, layout } = settings;
  if (sources.order().length === 0) throw noSource(repo, file);
  const part = layout.partPath(repo, file);
  const record = layout.chunksPath(repo, file);
  const blob = layout.blobPath(repo, file);
  await fs.mkdirp(dirname(blob));
  const subject = { repo, commit, file: file.path };
  const refused = new Map<string, Refusal>();
  const blamed = new Set<string>();
  for (let round = 1; round <= settings.verifyAttempts; round++) {
    const chunks = planChunks(file.size, settings.chunkBytes);
    const done = await openPart(fs, part, record, file.size, settings.chunkBytes);
    const onDisk = chunks.filter((c) => done.has(c.index)).reduce((n, c) => n + c.end - c.start, 0);
    progress.resumed(onDisk);
    const served = new Set<string>();
    const missing = chunks.filter((c) => !done.has(c.index));
    const chunkSources = { live: sources, served, refused, demoted: blamed };
    await fetchChunks(target, missing, chunkSources, settings, progress, signal);
    const { hash, want } = expectedHash(file);
    for await (const piece of await fs.readStream(part)) hash.update(piece);
    const got = hash.hex();
    if (got === want) {
      await fs.rename(part, blob);
      await fs.remove(record);
      emit(settings.onEvent, { kind: "verified", ...subject, bytes: file.size });
      return;
    }
    emit(settings.onEvent, { kind: "mismatch", ...subject, sources: [...served], want, got });
    await fs.remove(part);
    await fs.remove(record);
    progress.add(-file.size);
    // The sources that served the rejected bytes go last for the next fetch.
    sources.blame(served);
    for (const name of served) blamed.add(name);
  }
  // Final once every source sent bad bytes: a later try would fetch the same.
  // (Not when the plan now names no source at all: nothing says the next would be as bad.)
  const assigned = sources.order();
  const every = assigned.length > 0 && assigned.every((s) => blamed.has(s.name));
  throw new DownloadFailedError(
    file.path,
    `Cannot fetch ${repo} ${file.path}: its content did not match ${expectedHash(file).want} ` +
      `after ${settings.verifyAttempts} fetches` + (every ? ", from every source" : ""),
    !every,
    every ? "hash_mismatch" : null,
  );
}

/**
 * The chunks already on disk in `part`, per its record; a record that
 * cannot be trusted (absent, torn header, another size) starts both anew.
 */
async function openPart(
  fs: CacheFs,
  part: string,
  record: string,
  size: number,
  chunkBytes: number,
): Promise<Set<number>> {
  const done = parseRecord(await fs.readText(record), size, chunkBytes);
  if (done !== null && (await fs.lstat(part))?.isFile) return done;
  await fs.remove(part);
  await fs.writeTextAtomic(record, recordHeader(size, chunkBytes));
  // Creates the (empty) part file, so a 0-byte file has one to rename.
  (await fs.openAt(part, 0)).close();
  return new Set();
}

/** Fetches `chunks` in parallel; on the first failure stops the others and rethrows it. */
async function fetchChunks(
  target: BlobTarget,
  chunks: readonly Chunk[],
  sources: ChunkSources,
  settings: BlobFetchSettings,
  progress: ProgressSink,
  signal: AbortSignal,
): Promise<void> {
  const stop = new AbortController();
  const both = AbortSignal.any([signal, stop.signal]);
  const results = await Promise.allSettled(chunks.map(async (chunk) => {
    try {
      await fetchChunk(target, chunk, sources, settings, progress, both);
    } catch (e) {
      stop.abort(e);
      throw e;
    }
  }));
  signal.throwIfAborted();
  // The first failure, not the aborts it caused in the other chunks.
  if (stop.signal.aborted) throw stop.signal.reason;
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/** The sources of one file's fetch. */
interface ChunkSources {
  /** The assigned sources and their failures, shared by the snapshot's files. */
  live: LiveSources;
  /** Names of the sources that served bytes of this fetch. */
  served: Set<string>;
  /** Names of the sources that refused this file for good, with their answer. */
  refused: Map<string, Refusal>;
  /** Names of the sources that served bytes of this file that failed its hash: asked last. */
  demoted: ReadonlySet<string>;
}

async function fetchChunk(
  target: BlobTarget,
  chunk: Chunk,
  { live, served, refused, demoted }: ChunkSources,
  settings: BlobFetchSettings,
  progress: ProgressSink,
  signal: AbortSignal,
): Promise<void> {
  const { repo, commit, file } = target;
  const { fs, layout } = settings;
  const part = layout.partPath(repo, file);
  const release = await settings.slots.acquire(signal);
  try {
    let pos = chunk.start;
    const subject = { repo, commit, file: file.path };
    // Counted per source name, not against the sources assigned now: a re-plan
    // that leaves fewer must not use up the tries of those that stay.
    const tries = new Map<string, number>();
    const spent = (name: string) => (tries.get(name) ?? 0) >= settings.attemptsPerSource;
    const skipped = { has: (name: string) => refused.has(name) || spent(name) };
    let last = "";
    for (let attempt = 1;; attempt++) {
      const { source, assigned, reassigned, at } = live.look(skipped, demoted);
      if (reassigned !== null) {
        emit(settings.onEvent, {
          kind: "source_changed",
          ...subject,
          ...reassigned,
          reason: reassigned.cause === "assignment"
            ? `the assignment changed: ${reassigned.to} is asked first`
            : `${reassigned.to}'s backoff after a failure ended: it is asked first again`,
        });
      }
      if (source === undefined) {
        if (assigned === 0) throw noSource(repo, file);
        // A re-plan during the backoff left only sources that used their tries.
        if (live.order().some((s) => spent(s.name))) {
          throw triesFailed(repo, file, `${pos}-${chunk.end}`, attempt - 1, last);
        }
        throw refusedEverywhere(repo, file, refused);
      }
      const from = pos;
      progress.sourceUse(source.name, 1);
      let writer: ChunkWriter | null = null;
      // This try's written bytes, shown to the peer server (written_chunks.ts).
      let shown: ChunkTry | undefined;
      // Whether this try told the download something about its source (served, or failed).
      let told = false;
      try {
        writer = await fs.openAt(part, pos);
        shown = settings.written?.begin(part, chunk.start, chunk.end, pos);
        const pieces = stallLimited(
          (s) => source.read(repo, commit, file, pos, chunk.end, s),
          settings.stall,
          signal,
          () =>
            `${source.name} sent nothing of ${file.path} for ${
              settings.stall.ms / 1000
            } s, at byte ${pos}`,
        );
        for await (const piece of pieces) {
          if (pos + piece.length > chunk.end) {
            throw new Error(
              `${source.name} sent more than the ${chunk.end - from} bytes asked of ${file.path}`,
            );
          }
          await settings.limiter.take(piece.length, signal);
          await writer.write(piece);
          pos += piece.length;
          // Only after the write returned: a peer reading below it never reads a hole.
          shown?.advance(pos);
          progress.add(piece.length);
          served.add(source.name);
        }
        if (pos < chunk.end) {
          throw new Error(
            `${source.name} ended ${file.path} bytes ${from}-${chunk.end} early, at byte ${pos}`,
          );
        }
        await writer.sync();
        await fs.appendSynced(layout.chunksPath(repo, file), recordLine(chunk.index));
        shown?.complete();
        live.succeeded(source, at);
        told = true;
        return;
      } catch (e) {
        // Before the backoff: a follower streaming this chunk errors now, not after the sleep.
        shown?.abandon(signal.aborted ? "the download stopped" : errorMessage(e));
        if (signal.aborted) throw signal.reason;
        if (isNoSpace(e)) throw e;
        const error = errorMessage(e);
        emit(settings.onEvent, {
          kind: "chunk_failed",
          ...subject,
          source: source.name,
          range: `${from}-${chunk.end}`,
          attempt,
          error,
        });
        if (isFinal(e)) {
          // No retry of a typo or a gated repo on this source; the next may hold the file.
          refused.set(source.name, { why: error, kind: source.kind });
          const next = live.peek(skipped, demoted);
          if (next !== undefined) {
            emit(settings.onEvent, {
              kind: "source_changed",
              ...subject,
              from: source.name,
              to: next.name,
              cause: "failure",
              reason: error,
            });
          }
          continue;
        }
        tries.set(source.name, (tries.get(source.name) ?? 0) + 1);
        last = `${source.name}: ${error}`;
        // Backed off for every file of the download, whatever this chunk does next.
        const moved = live.failed(source, at);
        told = true;
        if (live.peek(skipped, demoted) === undefined) {
          throw triesFailed(repo, file, `${from}-${chunk.end}`, attempt, last);
        }
        if (moved !== null) {
          emit(settings.onEvent, {
            kind: "source_changed",
            ...subject,
            ...moved,
            cause: "failure",
            reason: error,
          });
        }
        await settings.sleep(retryDelay(attempt, settings.retryPolicy, settings.random), signal);
        signal.throwIfAborted();
      } finally {
        shown?.abandon("the download stopped");
        writer?.close();
        progress.sourceUse(source.name, -1);
        // A refusal of this file, a stop, a full disk: no word on the source, a probe it was is over.
        if (!told) live.released(source, at);
      }
    }
  } finally {
    release();
  }
}
