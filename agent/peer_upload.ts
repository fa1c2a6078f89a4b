/**
 * One upload of the peer server (agent/peer_server.ts): the bytes of a
 * range read from an open file, those of chunks still being written only
 * once written (agent/model_cache/written_chunks.ts), and a chunk whose try
 * fails followed to its next try (docs/models.md "Streaming a chunk as it
 * is written"). Nothing is buffered: bytes are read from the file (the page
 * cache holds what was just written), 1 MiB at most at a time.
 *
 * @module
 */
import {
  ChunkAbandonedError,
  type ChunkTry,
  type WrittenChunks,
} from "./model_cache/written_chunks.ts";

/** Bytes read from disk per step of an upload. */
const READ_BYTES = 1 << 20;

/**
 * Bytes a streamed upload waits for before it reads again (or the chunk's
 * end): one wake per 256 KiB rather than per network piece, 5 ms at 400
 * Mbit/s, and the follower's own piece size (models/byte_slice.ts).
 */
const STREAM_STEP = 256 * 1024;

/** The chunks of an upload's range being written when it was admitted, and their part file. */
export interface UploadWriting {
  /** The part file the tries write. */
  part: string;
  /** The tries, by first byte; an abandoned one is replaced by its chunk's next try. */
  tries: ChunkTry[];
}

/** What an upload reads besides its file, and where it counts. */
export interface UploadContext {
  /** The chunks of the range being written. */
  writing: UploadWriting;
  /** The agent's chunks under way (absent: a failed try ends the upload at once). */
  written: WrittenChunks | undefined;
  /** How long a failed try's upload waits for the chunk's next try. */
  nextTryWaitMs: number;
  /** Counters: bytes sent, uploads waiting now. */
  stats: { bytesServed: number; waiting: number };
}

/**
 * The bytes `start` … `end - 1` of an open file, those of the chunks being
 * written only once written; `release` runs once when it ends either way
 * (done, failed, or cancelled by the follower), after the file is closed.
 */
export function peerUpload(
  handle: Deno.FsFile,
  start: number,
  end: number,
  release: () => void,
  ctx: UploadContext,
): ReadableStream<Uint8Array> {
  let pos = start;
  let closed = false;
  // Ends a wait for bytes when the follower goes away.
  const gone = new AbortController();
  const close = () => {
    if (closed) return;
    closed = true;
    gone.abort();
    handle.close();
    release();
  };
  return new ReadableStream<Uint8Array>({
    start: async () => {
      try {
        await handle.seek(start, Deno.SeekMode.Start);
      } catch (e) {
        close();
        throw e;
      }
    },
    pull: async (controller) => {
      try {
        const upTo = await readable(pos, Math.min(end, pos + READ_BYTES), ctx, gone.signal);
        if (closed) return;
        const buffer = new Uint8Array(upTo - pos);
        const n = await handle.read(buffer);
        if (n === null || n === 0) throw new Error(`file ended at byte ${pos}, before ${end}`);
        pos += n;
        ctx.stats.bytesServed += n;
        controller.enqueue(buffer.subarray(0, n));
        if (pos >= end) {
          close();
          controller.close();
        }
      } catch (e) {
        close();
        controller.error(e);
      }
    },
    cancel: () => close(),
  }, { highWaterMark: 0 });
}

/**
 * How far from `pos` (below `limit`) the file may be read now: up to the
 * next chunk being written; within one, up to what it has written, once
 * that is {@link STREAM_STEP} past `pos` (or the chunk's or the range's
 * end). A try abandoned is replaced in `ctx.writing` by the chunk's next
 * one; rejects when there is none in time.
 */
async function readable(
  pos: number,
  limit: number,
  ctx: UploadContext,
  gone: AbortSignal,
): Promise<number> {
  const tries = ctx.writing.tries;
  // Bounded: each turn waits for a new try, at most nextTryWaitMs, or ends.
  while (true) {
    const i = tries.findIndex((t) => t.end > pos);
    if (i < 0) return limit;
    const next = tries[i];
    if (next.start > pos) return Math.min(limit, next.start);
    const want = Math.min(limit, next.end, pos + STREAM_STEP);
    const waits = next.state === "abandoned" || (next.state === "writing" && next.written < want);
    if (waits) ctx.stats.waiting++;
    try {
      return Math.min(limit, await next.reach(want, gone));
    } catch (e) {
      if (!(e instanceof ChunkAbandonedError)) throw e;
      tries[i] = await followingTry(ctx, next, pos, gone, e);
    } finally {
      if (waits) ctx.stats.waiting--;
    }
  }
}

/**
 * The try after `ended` of its chunk, once it begins at or past `pos`
 * (same round: the bytes below were never written again); `cause` when
 * none begins within `nextTryWaitMs`; an error when one begins below `pos`
 * (a new round, which may write other bytes there).
 */
async function followingTry(
  ctx: UploadContext,
  ended: ChunkTry,
  pos: number,
  gone: AbortSignal,
  cause: ChunkAbandonedError,
): Promise<ChunkTry> {
  if (ctx.written === undefined) throw cause;
  const late = new AbortController();
  const timer = setTimeout(() => late.abort(cause), ctx.nextTryWaitMs);
  let next: ChunkTry;
  try {
    next = await ctx.written.nextTry(ctx.writing.part, ended, AbortSignal.any([gone, late.signal]));
  } catch (e) {
    throw gone.aborted ? e : cause;
  } finally {
    clearTimeout(timer);
  }
  if (next.written < pos) {
    throw new ChunkAbandonedError(
      `the download of bytes ${ended.start}-${
        ended.end - 1
      } here began again from byte ${next.written}, below byte ${pos} already sent`,
    );
  }
  return next;
}
