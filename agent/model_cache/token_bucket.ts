/**
 * The agent's one download rate limit (`--download-rate`): a token bucket
 * in bytes that every chunk of every download takes from before it writes,
 * so N parallel chunks share the rate rather than each getting it. Time
 * comes from an injected clock and sleep, so a test moves it by hand.
 *
 * @module
 */
import type { Clock } from "../../time/clock.ts";

/** Waits `ms` or until `signal` aborts; resolves either way. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** A byte budget refilled at a fixed rate. */
export interface RateLimiter {
  /** Resolves once `bytes` may be used; rejects with the signal's reason when it aborts first. */
  take(bytes: number, signal?: AbortSignal): Promise<void>;
}

/** No limit. */
export const unlimited: RateLimiter = { take: () => Promise.resolve() };

/**
 * A bucket of `bytesPerSecond`, holding at most one second's worth (the
 * burst), starting full. Takers are served in arrival order, so a large
 * take is not starved by small ones.
 */
export class TokenBucket implements RateLimiter {
  readonly #rate: number;
  readonly #capacity: number;
  readonly #clock: Clock;
  readonly #sleep: Sleep;
  #tokens: number;
  #at: number;
  #queue: Promise<void> = Promise.resolve();

  /** A bucket of `bytesPerSecond` on `clock`, waiting with `sleep`. */
  constructor(bytesPerSecond: number, clock: Clock, sleep: Sleep) {
    if (!(bytesPerSecond > 0) || !Number.isFinite(bytesPerSecond)) {
      throw new RangeError(`Cannot limit downloads to ${bytesPerSecond} bytes/s`);
    }
    this.#rate = bytesPerSecond;
    this.#capacity = bytesPerSecond;
    this.#clock = clock;
    this.#sleep = sleep;
    this.#tokens = bytesPerSecond;
    this.#at = clock.now();
  }

  #refill(): void {
    const now = this.#clock.now();
    const elapsed = Math.max(0, now - this.#at);
    this.#tokens = Math.min(this.#capacity, this.#tokens + (elapsed * this.#rate) / 1000);
    this.#at = now;
  }

  take(bytes: number, signal?: AbortSignal): Promise<void> {
    const turn = this.#queue.then(() => this.#takeNow(bytes, signal));
    // The next taker waits for this one whether it succeeds or aborts.
    this.#queue = turn.catch(() => {});
    return turn;
  }

  async #takeNow(bytes: number, signal?: AbortSignal): Promise<void> {
    let left = bytes;
    // Bounded: each round either takes tokens or waits for them to refill.
    for (let round = 0; left > 0; round++) {
      signal?.throwIfAborted();
      this.#refill();
      const part = Math.min(left, this.#capacity);
      if (this.#tokens >= part) {
        this.#tokens -= part;
        left -= part;
        continue;
      }
      if (round > 1_000_000) throw new Error("Cannot take from the download rate limit: no refill");
      const waitMs = Math.ceil(((part - this.#tokens) * 1000) / this.#rate);
      await this.#sleep(Math.max(1, waitMs), signal);
    }
  }
}
