/**
 * Commands that wait (`drain`, `rollout status`): read, and read again
 * every interval until a condition holds, the time limit passes or the
 * signal stops it. Bounded by the limit or the signal; `timeoutMs` 0 waits
 * until done (Ctrl-C stops, as kubectl's waits).
 *
 * @module
 */

/** How a wait is paced and bounded. */
export interface WaitOptions {
  /** Between two reads. */
  intervalMs: number;
  /** Give up after this long; 0: no limit. */
  timeoutMs: number;
  /** Ends the wait early (tests; Ctrl-C ends the process anyway). */
  signal?: AbortSignal;
  /** The clock, for the limit. */
  now?: () => number;
}

/** How a wait ended, with the last value read. */
export interface WaitResult<T> {
  /** `done`: the condition held; `timeout`: the limit passed; `stopped`: the signal fired. */
  outcome: "done" | "timeout" | "stopped";
  /** The last value read. */
  value: T;
}

/**
 * Reads until `done(value)`; `seen` is told each value read (to print
 * progress). The first read is at once.
 */
export async function waitUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  o: WaitOptions,
  seen: (value: T) => void = () => {},
): Promise<WaitResult<T>> {
  const now = o.now ?? Date.now;
  const deadline = o.timeoutMs > 0 ? now() + o.timeoutMs : Infinity;
  for (;;) {
    const value = await read();
    seen(value);
    if (done(value)) return { outcome: "done", value };
    if (o.signal?.aborted) return { outcome: "stopped", value };
    if (now() >= deadline) return { outcome: "timeout", value };
    await sleep(Math.min(o.intervalMs, Math.max(0, deadline - now())), o.signal);
  }
}

/** Resolves after `ms`, or at once when the signal fires. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
