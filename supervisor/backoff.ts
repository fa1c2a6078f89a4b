/**
 * Restart delays after a crash (design §9.1): exponential, capped.
 *
 * @module
 */

/** Backoff settings. */
export interface BackoffPolicy {
  /** Delay after the first crash. */
  initialMs: number;
  /** The most any delay may be. */
  maxMs: number;
  /** Growth per consecutive crash. */
  factor: number;
}

/** The default: 1 s, doubling, at most 5 minutes. */
export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 300_000, factor: 2 };

/** The delay before restart number `attempt` (1 = after the first crash). */
export function backoffDelay(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  if (attempt < 1) return 0;
  return Math.min(policy.maxMs, policy.initialMs * policy.factor ** (attempt - 1));
}
