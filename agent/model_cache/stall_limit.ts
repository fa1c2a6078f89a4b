/**
 * A try's bound on a source that stops sending (review of issue #25
 * follow-up, ops item 2): a chunk's try waits on its source at most
 * {@link DEFAULT_STALL_MS} for its answer and then for each next piece of
 * the body. Past it the try fails with a retryable {@link SourceStalledError},
 * which the download counts as the source's failure (backoff, next source)
 * like a broken transfer, so a half-dead connection (a CDN's TCP stream that
 * went silent, a peer that hung) never holds a file, or a probe of a source
 * that failed before, for good. Only waits on the source count: the agent's
 * own rate limit and disk writes between pieces do not.
 *
 * @module
 */
import type { Sleep } from "./token_bucket.ts";

/**
 * 60 s: six times huggingface_hub's read timeout (`HF_HUB_DOWNLOAD_TIMEOUT`,
 * 10 s), since a peer may hold a range's answer back 20 s while it fetches
 * the range itself (models/peer_byte_source.ts), and a busy CDN pauses; far
 * below the hours a dead TCP connection takes to notice on its own.
 */
export const DEFAULT_STALL_MS = 60_000;

/** How long a try may wait on its source, and the timer that waits it out. */
export interface StallLimit {
  /** The longest wait for the source's answer or its next piece, in ms. */
  ms: number;
  /**
   * Waits out the limit; ends early when its signal aborts. Apart from the
   * backoff's sleep: tests that make backoff instant must not end every try.
   */
  sleep: Sleep;
}

/** A source that sent nothing for a try's {@link StallLimit}: retryable, the source's failure. */
export class SourceStalledError extends Error {
  /** Asked again later (after its backoff), the source may answer. */
  readonly retryable = true;
  /** `message` names the source, the range and the wait. */
  constructor(message: string) {
    super(message);
    this.name = "SourceStalledError";
  }
}

/**
 * The pieces of the stream `open` gives, each awaited at most `limit.ms`;
 * past it, throws a {@link SourceStalledError} with `stalled()`'s words. The
 * signal `open` receives aborts when the pieces end, however they end (the
 * request is dropped), and the stream is cancelled.
 */
export async function* stallLimited(
  open: (signal: AbortSignal) => Promise<ReadableStream<Uint8Array>>,
  limit: StallLimit,
  signal: AbortSignal,
  stalled: () => string,
): AsyncGenerator<Uint8Array, void, undefined> {
  const stop = new AbortController();
  // One listener per try, not a combined signal per piece: a 140 GB file is millions of pieces.
  const wait = new Waits(limit, signal, stalled);
  signal.addEventListener("abort", wait.wake, { once: true });
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  try {
    const opening = open(AbortSignal.any([signal, stop.signal]));
    // A stream that comes after the try gave up on it is dropped unread.
    opening.then(async (s) => {
      if (reader === null && stop.signal.aborted) await s.cancel();
    }).catch(() => {});
    reader = (await wait.within(opening)).getReader();
    for (;;) {
      const { done, value } = await wait.within(reader.read());
      if (done) return;
      yield value;
    }
  } finally {
    signal.removeEventListener("abort", wait.wake);
    stop.abort();
    reader?.cancel().catch(() => {});
  }
}

/** A try's waits on its source, one at a time, each bounded by the limit. */
class Waits {
  readonly #limit: StallLimit;
  readonly #signal: AbortSignal;
  readonly #stalled: () => string;
  /** Ends the current wait's timer. */
  #timer: AbortController | null = null;

  constructor(limit: StallLimit, signal: AbortSignal, stalled: () => string) {
    this.#limit = limit;
    this.#signal = signal;
    this.#stalled = stalled;
  }

  /** The try is stopped: the current wait ends with the signal's reason. */
  readonly wake = (): void => this.#timer?.abort();

  /** `work`, or a {@link SourceStalledError} once the limit passes first (the signal's reason once it aborts). */
  async within<T>(work: Promise<T>): Promise<T> {
    // The work left behind settles later; its rejection is nobody's.
    work.catch(() => {});
    const settled = new AbortController();
    this.#timer = settled;
    const signal = this.#signal;
    const timer =
      (signal.aborted ? Promise.resolve() : this.#limit.sleep(this.#limit.ms, settled.signal))
        .then(() => {
          if (signal.aborted) throw signal.reason;
          if (settled.signal.aborted) return work;
          throw new SourceStalledError(this.#stalled());
        });
    try {
      return await Promise.race([work, timer]);
    } finally {
      this.#timer = null;
      settled.abort();
    }
  }
}
