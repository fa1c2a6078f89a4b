/**
 * The one polling helper for tests: wait for a condition, never for a fixed
 * time standing in for it (issue #12).
 *
 * @module
 */
import { AssertionError } from "node:assert";

/** What a probe answers while the condition does not hold yet. */
export type Pending = null | undefined | false;

/** How {@link until} waits. */
export interface UntilOptions {
  /** How long to wait in all, in milliseconds (default 10 000). */
  timeoutMs?: number;
  /** The pause between two probes, in milliseconds (default 50). */
  intervalMs?: number;
  /** The state the wait gave up on, appended to the timeout's message. */
  describe?: () => string;
}

/** Thrown by {@link until} when its condition did not hold by the deadline. */
export class WaitTimeoutError extends Error {
  override name = "WaitTimeoutError";
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * The bound on a spawned `deno run` process's start-up, to its first line:
 * with test files in parallel on 2 cores, loading llmgw's module graph has
 * taken over 10 s (issue #24 item 9). An upper bound, never a timing.
 */
export const START_TIMEOUT_MS = 60_000;
const DEFAULT_INTERVAL_MS = 50;

type Outcome<T> =
  | { kind: "value"; value: T | Pending }
  | { kind: "error"; error: unknown }
  | { kind: "running" };

/**
 * Calls `probe` every `intervalMs` until it answers something other than
 * null, undefined or false, and returns that answer (0 and "" count as
 * answers).
 *
 * A probe that throws is retried: the error is taken for "not yet" (a server
 * still starting) and the last one is reported at the deadline. An
 * `AssertionError` is the exception: an assertion inside a probe is the
 * test's verdict, so it fails the wait at once.
 *
 * Bounded in time and in count: each probe races the deadline (a hung probe
 * is abandoned), and at most `ceil(timeoutMs / intervalMs) + 1` probes run,
 * so a clock that stands still cannot make it spin.
 *
 * @throws {WaitTimeoutError} "timed out after N ms waiting for WHAT", with
 * the last probe's error and `describe()` when given.
 */
export async function until<T>(
  what: string,
  probe: () => T | Pending | Promise<T | Pending>,
  options: UntilOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
  positive(what, "timeoutMs", timeoutMs);
  positive(what, "intervalMs", intervalMs);
  const maxProbes = Math.ceil(timeoutMs / intervalMs) + 1;
  const deadline = Date.now() + timeoutMs;
  let last: Outcome<T> = { kind: "running" };
  let lastError: { error: unknown } | undefined;
  for (let probes = 1; probes <= maxProbes; probes++) {
    // The last probe may start at the deadline: it still gets one interval.
    last = await settle(probe, Math.max(deadline - Date.now(), intervalMs));
    if (last.kind === "value" && !isPending(last.value)) return last.value as T;
    if (last.kind === "error") {
      if (last.error instanceof AssertionError) throw last.error;
      lastError = { error: last.error };
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0 || last.kind === "running") break;
    await sleep(Math.min(intervalMs, remaining));
  }
  throw timedOut(what, timeoutMs, last, lastError, options.describe);
}

function positive(what: string, name: string, ms: number): void {
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new RangeError(
      `Cannot wait for ${what}: ${name} must be a positive number of milliseconds, got ${ms}`,
    );
  }
}

function isPending(v: unknown): v is Pending {
  return v === null || v === undefined || v === false;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs one probe, for at most `withinMs`; its timer is cleared either way. */
async function settle<T>(
  probe: () => T | Pending | Promise<T | Pending>,
  withinMs: number,
): Promise<Outcome<T>> {
  const run = (async (): Promise<Outcome<T>> => {
    try {
      return { kind: "value", value: await probe() };
    } catch (error) {
      return { kind: "error", error };
    }
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<Outcome<T>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: "running" }), withinMs);
  });
  try {
    return await Promise.race([run, hung]);
  } finally {
    clearTimeout(timer);
  }
}

function timedOut<T>(
  what: string,
  timeoutMs: number,
  last: Outcome<T>,
  lastError: { error: unknown } | undefined,
  describe: (() => string) | undefined,
): WaitTimeoutError {
  const notes: string[] = [];
  if (last.kind === "running") notes.push("the last probe was still running");
  if (lastError !== undefined) notes.push(`last error: ${String(lastError.error)}`);
  if (describe !== undefined) {
    try {
      notes.push(describe());
    } catch (e) {
      notes.push(`describe() threw: ${String(e)}`);
    }
  }
  const tail = notes.length > 0 ? ` (${notes.join("; ")})` : "";
  return new WaitTimeoutError(
    `timed out after ${timeoutMs} ms waiting for ${what}${tail}`,
    lastError === undefined ? undefined : { cause: lastError.error },
  );
}
