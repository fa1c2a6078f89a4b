/**
 * A clock for tests: time moves only when the test says so.
 *
 * @module
 */
import type { Clock } from "../time/clock.ts";

/** A clock that stands still until {@link FakeClock.advance}. */
export class FakeClock implements Clock {
  #now: number;

  /** Starts at `start` ms since the epoch. */
  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  /** The current fake time. */
  now(): number {
    return this.#now;
  }

  /** Moves time forward by `ms`. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`Cannot advance the clock by ${ms} ms`);
    this.#now += ms;
  }
}
