/**
 * The clock every loop reads (control plane, agent, supervisor): injected, so
 * a test moves time itself ({@link FakeClock} in tests/fake_clock.ts) and
 * none waits for real time to pass. A leaf: it imports nothing.
 *
 * @module
 */

/** Milliseconds since the epoch, as `Date.now()` counts them. */
export interface Clock {
  /** The current time in ms. */
  now(): number;
}

/** The system clock. */
export const systemClock: Clock = { now: () => Date.now() };
