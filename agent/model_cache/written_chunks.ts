/**
 * How far this agent has written each chunk it is downloading right now
 * (issue #25 item 3's pipelining, docs/models.md "Sources"): the downloader
 * (blob_download.ts) tells it each piece it wrote, the peer server
 * (agent/peer_server.ts) streams those bytes to a follower as they land
 * instead of answering `range_pending` until the whole chunk is recorded.
 * Pure bookkeeping in memory: no file is read or polled here.
 *
 * - **Contiguous from the chunk's start.** A try writes its chunk in order
 *   from where the last try stopped, so `written` is one offset: bytes
 *   `start` … `written - 1` are in the part file. The downloader advances it
 *   only after the write returned (pwrite, then advance), so a reader that
 *   reads below it never reads a hole; those bytes are in the page cache.
 * - **Waiting is a promise**, resolved by the writer's next advance, never a
 *   poll.
 * - **A try that ends without its chunk** (its source failed or stalled, the
 *   download stopped) ends every reader of that chunk with a
 *   {@link ChunkAbandonedError}: the next try may begin again elsewhere, and
 *   a stream never goes on over bytes that may be written again. A new try
 *   registers anew, with the bytes already written kept.
 *
 * @module
 */

/** A reader's chunk ended without all of its bytes: ask again (retryable). */
export class ChunkAbandonedError extends Error {
  /** Asked again, the range may be served (by the next try, or another source). */
  readonly retryable = true;
  /** `message` names the chunk and why its try ended. */
  constructor(message: string) {
    super(message);
    this.name = "ChunkAbandonedError";
  }
}

/** Where one try of one chunk stands. */
export type ChunkTryState = "writing" | "complete" | "abandoned";

interface Waiter {
  want: number;
  resolve: (written: number) => void;
  reject: (e: unknown) => void;
}

/** One try of chunk `start` … `end - 1` of one part file. */
export class ChunkTry {
  /** The chunk's first byte. */
  readonly start: number;
  /** One past the chunk's last byte. */
  readonly end: number;
  #written: number;
  #state: ChunkTryState = "writing";
  #why = "";
  readonly #waiters = new Set<Waiter>();
  readonly #forget: () => void;

  /** Use {@link WrittenChunks.begin}. */
  constructor(start: number, end: number, written: number, forget: () => void) {
    if (!(Number.isSafeInteger(start) && start >= 0 && end > start && Number.isSafeInteger(end))) {
      throw new RangeError(`Cannot track chunk ${start}-${end}: expected 0 ≤ start < end`);
    }
    if (!(Number.isSafeInteger(written) && written >= start && written <= end)) {
      throw new RangeError(
        `Cannot track chunk ${start}-${end} written up to ${written}: outside the chunk`,
      );
    }
    this.start = start;
    this.end = end;
    this.#written = written;
    this.#forget = forget;
  }

  /** One past the last byte written, contiguous from {@link start}. */
  get written(): number {
    return this.#written;
  }

  /** Whether it is writing, has its chunk recorded, or ended without it. */
  get state(): ChunkTryState {
    return this.#state;
  }

  /**
   * Writer: bytes up to `to` (exclusive) are written; wakes the readers it
   * satisfies. Nothing once the try ended: a newer try of the chunk may have
   * abandoned it under a writer still running, whose write is not an error
   * of its source. An offset outside the chunk or behind the mark throws.
   */
  advance(to: number): void {
    if (!(Number.isSafeInteger(to) && to >= this.#written && to <= this.end)) {
      throw new RangeError(
        `Cannot advance chunk ${this.start}-${this.end} from ${this.#written} to ${to}`,
      );
    }
    if (this.#state !== "writing") return;
    this.#written = to;
    for (const w of this.#waiters) {
      if (w.want <= to) this.#settle(w).resolve(to);
    }
  }

  /** Writer: every byte is written, synced and recorded; the record serves it from now on. */
  complete(): void {
    if (this.#state !== "writing") return;
    if (this.#written !== this.end) {
      throw new RangeError(
        `Cannot complete chunk ${this.start}-${this.end}: written up to ${this.#written}`,
      );
    }
    this.#state = "complete";
    this.#forget();
    for (const w of this.#waiters) this.#settle(w).resolve(this.end);
  }

  /** Writer: the try ended without its chunk; every reader errors. No effect once complete. */
  abandon(why: string): void {
    if (this.#state !== "writing") return;
    this.#state = "abandoned";
    this.#why = why;
    this.#forget();
    for (const w of this.#waiters) this.#settle(w).reject(this.#abandoned());
  }

  /**
   * Reader: resolves with {@link written} once it is at least `want` (at
   * most {@link end}); rejects with a {@link ChunkAbandonedError} once the
   * try is abandoned (at once if it is), or with `signal`'s reason.
   */
  reach(want: number, signal?: AbortSignal): Promise<number> {
    if (this.#state === "abandoned") return Promise.reject(this.#abandoned());
    if (signal?.aborted) return Promise.reject(signal.reason);
    const target = Math.min(want, this.end);
    if (this.#written >= target) return Promise.resolve(this.#written);
    return new Promise((resolve, reject) => {
      const drop = () => this.#settle(waiter).reject(signal?.reason);
      const waiter: Waiter = {
        want: target,
        resolve: (n) => {
          signal?.removeEventListener("abort", drop);
          resolve(n);
        },
        reject: (e) => {
          signal?.removeEventListener("abort", drop);
          reject(e);
        },
      };
      this.#waiters.add(waiter);
      signal?.addEventListener("abort", drop, { once: true });
    });
  }

  /** Readers waiting now. */
  get waiting(): number {
    return this.#waiters.size;
  }

  #settle(w: Waiter): Waiter {
    this.#waiters.delete(w);
    return w;
  }

  #abandoned(): ChunkAbandonedError {
    return new ChunkAbandonedError(
      `the download of bytes ${this.start}-${
        this.end - 1
      } here stopped at byte ${this.#written}: ${this.#why}`,
    );
  }
}

interface NextWaiter {
  part: string;
  start: number;
  resolve: (t: ChunkTry) => void;
}

/** The tries under way of every part file this agent writes, by part file path. */
export class WrittenChunks {
  readonly #files = new Map<string, Map<number, ChunkTry>>();
  readonly #next = new Set<NextWaiter>();

  /**
   * A try of chunk `start` … `end - 1` of `part` begins, bytes `start` …
   * `written - 1` already written by the tries before it. A try still
   * registered for that chunk is abandoned (its readers error).
   */
  begin(part: string, start: number, end: number, written: number): ChunkTry {
    // First: its end may forget the file's map.
    this.#files.get(part)?.get(start)?.abandon("a new try of the chunk began");
    const tries = this.#files.get(part) ?? new Map<number, ChunkTry>();
    this.#files.set(part, tries);
    const t: ChunkTry = new ChunkTry(start, end, written, () => {
      if (tries.get(start) !== t) return;
      tries.delete(start);
      if (tries.size === 0 && this.#files.get(part) === tries) this.#files.delete(part);
    });
    tries.set(start, t);
    for (const w of this.#next) {
      if (w.part === part && w.start === start) {
        this.#next.delete(w);
        w.resolve(t);
      }
    }
    return t;
  }

  /**
   * Reader: the try of `after`'s chunk of `part` that follows `after` (an
   * ended one): the one registered now, or the next to begin. Rejects with
   * `signal`'s reason once it aborts first.
   */
  nextTry(part: string, after: ChunkTry, signal: AbortSignal): Promise<ChunkTry> {
    const now = this.#files.get(part)?.get(after.start);
    if (now !== undefined && now !== after) return Promise.resolve(now);
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const drop = () => {
        this.#next.delete(waiter);
        reject(signal.reason);
      };
      const waiter: NextWaiter = {
        part,
        start: after.start,
        resolve: (t) => {
          signal.removeEventListener("abort", drop);
          resolve(t);
        },
      };
      this.#next.add(waiter);
      signal.addEventListener("abort", drop, { once: true });
    });
  }

  /** The tries writing `part` now, by their chunk's first byte (a copy). */
  writing(part: string): Map<number, ChunkTry> {
    return new Map(this.#files.get(part));
  }
}
