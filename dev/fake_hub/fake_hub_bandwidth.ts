/**
 * The origin's bandwidth cap: one token bucket (bytes per second) shared by
 * every answer of the hub and its CDN, so a test can show that N hosts
 * fetching from the origin share one link. The clock and the sleep are
 * injected: tests check what was granted and how long the bucket asked to
 * wait, never the wall clock.
 *
 * @module
 */

/** A token bucket of bytes. */
export class Bandwidth {
  #rate: number | undefined;
  #tokens = 0;
  #last: number;
  #granted = 0;
  #waitedMs = 0;
  #queue: Promise<void> = Promise.resolve();
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;

  /** `bytesPerSecond` undefined: no cap. */
  constructor(
    bytesPerSecond: number | undefined,
    now: () => number = () => performance.now(),
    sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {
    this.#now = now;
    this.#sleep = sleep;
    this.#last = now();
    this.set(bytesPerSecond);
  }

  /** Changes the cap (undefined: none); the bucket starts empty. */
  set(bytesPerSecond: number | undefined): void {
    if (bytesPerSecond !== undefined && !(bytesPerSecond > 0)) {
      throw new RangeError(`Cannot cap bandwidth at ${bytesPerSecond} bytes/s: it must be > 0`);
    }
    this.#rate = bytesPerSecond;
    this.#tokens = 0;
    this.#last = this.#now();
  }

  /** The cap, bytes per second (undefined: none). */
  get rate(): number | undefined {
    return this.#rate;
  }

  /** Bytes let through so far. */
  get granted(): number {
    return this.#granted;
  }

  /** Milliseconds the bucket asked senders to wait, in total. */
  get waitedMs(): number {
    return this.#waitedMs;
  }

  /** Waits until `bytes` may be sent; callers are served in order. */
  take(bytes: number): Promise<void> {
    const turn = this.#queue.then(() => this.#take(bytes));
    this.#queue = turn.catch(() => {});
    return turn;
  }

  async #take(bytes: number): Promise<void> {
    const rate = this.#rate;
    if (rate !== undefined) {
      // A burst of at most a tenth of a second's bytes (never below the chunk asked).
      const burst = Math.max(rate / 10, bytes);
      const now = this.#now();
      this.#tokens = Math.min(burst, this.#tokens + ((now - this.#last) * rate) / 1000);
      this.#last = now;
      this.#tokens -= bytes;
      if (this.#tokens < 0) {
        const waitMs = (-this.#tokens * 1000) / rate;
        this.#waitedMs += waitMs;
        await this.#sleep(waitMs);
      }
    }
    this.#granted += bytes;
  }
}
