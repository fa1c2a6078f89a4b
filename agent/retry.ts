/**
 * Retry timing for control-plane calls (design §10): exponential backoff,
 * capped, with jitter so that thousands of agents that lost the control
 * plane at the same moment do not come back in lockstep.
 *
 * @module
 */
import { backoffDelay, type BackoffPolicy } from "../supervisor/backoff.ts";

/** The default: 1 s, doubling, at most 30 s. */
export const DEFAULT_RETRY: BackoffPolicy = { initialMs: 1_000, maxMs: 30_000, factor: 2 };

/**
 * The delay before retry number `attempt` (1 = after the first failure):
 * the capped exponential delay, scaled by a random factor in [0.5, 1)
 * ("equal jitter": never less than half the backoff, never more than it).
 */
export function retryDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_RETRY,
  random: () => number = Math.random,
): number {
  const base = backoffDelay(Math.max(1, attempt), policy);
  return Math.round(base * (0.5 + 0.5 * random()));
}

/**
 * Waits `ms`, or less when `signal` aborts first (then it resolves too:
 * the caller checks why it woke). Leaves no timer behind.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}
