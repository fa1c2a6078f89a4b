/**
 * The control plane's clock: injected, so services can be tested with a fake
 * one and no test waits for real time to pass.
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
