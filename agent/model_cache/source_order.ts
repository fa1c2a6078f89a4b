/**
 * Which source the next chunk of a download asks (issue #25 item 3). The
 * sources are those assigned now, read again for every chunk, so a re-plan
 * of the control plane reaches a download under way: a source added ahead
 * is asked for the next chunk, a source removed is asked for none (chunks
 * already on it finish there).
 *
 * A source that fails a try is backed off ({@link SOURCE_BACKOFF}: 2 s,
 * doubling per failure in a row, at most 60 s, jittered): until then it is asked only
 * after the others, those whose backoff ends first first. Then it takes its
 * place in the assignment again, and one try (a probe) finds out whether it
 * is back: while the probe runs the others are asked first; a failed probe
 * doubles the backoff, a try that succeeds forgets its failures. A failure
 * of a try that began before the source's last counted failure is the same
 * outage (eight chunks cut by one restart count once). A source that
 * refused a file for good is skipped for that file (the caller's
 * `refused`); sources that served a file whose hash did not match go last
 * for the rest of that file (`demoted`) and count one failure. Pure:
 * live_sources.ts is its shell.
 *
 * @module
 */
import type { BackoffPolicy } from "../../supervisor/backoff.ts";
import { retryDelay } from "../retry.ts";

/** Anything a download can ask, known by its name (a ByteSource). */
export interface NamedSource {
  /** Its name: sources are matched by name, since a re-read assignment may give new objects. */
  readonly name: string;
}

/** What a download remembers of a source that failed; none for a healthy one. */
export interface SourceHealth {
  /** The source's name. */
  readonly name: string;
  /** Failures in a row, one outage counted once. */
  readonly failures: number;
  /** When the last counted failure happened (ms). */
  readonly at: number;
  /** When its backoff ends (ms). */
  readonly until: number;
  /** A try begun after the backoff ended is under way: its answer is awaited. */
  readonly probing: boolean;
}

/**
 * A failed source's backoff: 2 s after the first failure in a row, doubling,
 * at most 60 s; jittered as every retry is (agent/retry.ts `retryDelay`:
 * half to all of it), so agents cut by one outage do not probe in lockstep.
 */
export const SOURCE_BACKOFF: BackoffPolicy = { initialMs: 2_000, maxMs: 60_000, factor: 2 };

/** The jitter source that leaves every backoff whole (the default of the pure functions). */
export const NO_JITTER = (): number => 1;

/**
 * The health kept to the names still `assigned`: a source that left the
 * plan and comes back later is the control plane's new decision, not a
 * failed source.
 */
export function keepAssigned(
  assigned: readonly NamedSource[],
  health: readonly SourceHealth[],
): SourceHealth[] {
  const names = new Set(assigned.map((s) => s.name));
  return health.filter((h) => names.has(h.name));
}

/** Whether `h` is asked after the healthy sources at `now` (a probe under way counts, unless `probes`). */
function waiting(h: SourceHealth | undefined, now: number, probes = false): h is SourceHealth {
  return h !== undefined && (h.until > now || (h.probing && !probes));
}

/**
 * `assigned` in the order to ask them at `now`: the sources not backed off
 * in the assignment's order, then the backed-off ones, the backoff ending
 * first first; the `demoted` (for this file) after all of them. With
 * `probes`, a source whose probe is under way counts as in its place (the
 * order the download tells: its head).
 */
export function sourceOrder<T extends NamedSource>(
  assigned: readonly T[],
  health: readonly SourceHealth[],
  now: number,
  demoted: ReadonlySet<string> = NONE,
  probes = false,
): T[] {
  const byName = new Map(health.map((h) => [h.name, h]));
  const ready = assigned.filter((s) => !waiting(byName.get(s.name), now, probes));
  const later = assigned.filter((s) => waiting(byName.get(s.name), now, probes))
    .sort((a, b) => byName.get(a.name)!.until - byName.get(b.name)!.until);
  const order = [...ready, ...later];
  return [
    ...order.filter((s) => !demoted.has(s.name)),
    ...order.filter((s) => demoted.has(s.name)),
  ];
}

const NONE: ReadonlySet<string> = new Set();

/** Names of the sources that refused a file for good (a Set, or a Map to their answers). */
export interface Refusals {
  /** Whether the source named `name` refused it. */
  has(name: string): boolean;
}

/** The source for the next try of a chunk: the first in {@link sourceOrder} not in `refused`. */
export function nextSource<T extends NamedSource>(
  assigned: readonly T[],
  health: readonly SourceHealth[],
  now: number,
  refused: Refusals,
  demoted: ReadonlySet<string> = NONE,
): T | undefined {
  return sourceOrder(assigned, health, now, demoted).find((s) => !refused.has(s.name));
}

/** The health once a try on `name` begins at `now`: the first after its backoff is its probe. */
export function afterPick(health: readonly SourceHealth[], name: string, now: number) {
  return health.map((h) =>
    h.name === name && h.until <= now && !h.probing ? { ...h, probing: true } : h
  );
}

/**
 * The health once a try on `name`, begun at `startedAt`, failed at `now`:
 * one failure more and a longer backoff (scaled by `random`, as
 * `retryDelay` does), unless the try began before its last counted failure
 * (the same outage, counted already).
 *
 * A last-resort try (every other source refused or spent) that fails while
 * a probe runs ends the probe's mark too: the probe's own answer then comes
 * from a try begun before this counted failure, so it changes nothing, and
 * the next probe waits for the new, longer backoff. At most one probe more
 * per backoff, on a source already failing: kept simple on purpose.
 */
export function afterFailure(
  assigned: readonly NamedSource[],
  health: readonly SourceHealth[],
  name: string,
  startedAt: number,
  now: number,
  policy: BackoffPolicy = SOURCE_BACKOFF,
  random: () => number = NO_JITTER,
): SourceHealth[] {
  const kept = keepAssigned(assigned, health);
  const h = kept.find((x) => x.name === name);
  if (h !== undefined && startedAt <= h.at) return kept;
  return [...kept.filter((x) => x.name !== name), failure(h, name, now, policy, random)];
}

function failure(
  h: SourceHealth | undefined,
  name: string,
  now: number,
  policy: BackoffPolicy,
  random: () => number,
): SourceHealth {
  const failures = (h?.failures ?? 0) + 1;
  const until = now + retryDelay(failures, policy, random);
  return { name, failures, at: now, until, probing: false };
}

/** The health once a try on `name` begun at `startedAt` succeeded: begun after its last failure, it is healthy. */
export function afterSuccess(
  health: readonly SourceHealth[],
  name: string,
  startedAt: number,
): SourceHealth[] {
  return health.filter((h) => h.name !== name || startedAt <= h.at);
}

/**
 * The health once a try on `name` ended with no word on the source (the
 * file refused for good, the download stopped): a probe it was is over,
 * and the next try probes again.
 */
export function afterRelease(
  health: readonly SourceHealth[],
  name: string,
  startedAt: number,
): SourceHealth[] {
  return health.map((h) =>
    h.name === name && h.probing && startedAt > h.at ? { ...h, probing: false } : h
  );
}

/**
 * The health once a file's content did not match: each source that
 * `served` its bytes counts one failure (bad bytes are not an outage that
 * other chunks share).
 */
export function afterMismatch(
  assigned: readonly NamedSource[],
  health: readonly SourceHealth[],
  served: ReadonlySet<string>,
  now: number,
  policy: BackoffPolicy = SOURCE_BACKOFF,
  random: () => number = NO_JITTER,
): SourceHealth[] {
  const kept = keepAssigned(assigned, health);
  const blamed = assigned.filter((s) => served.has(s.name)).map((s) =>
    failure(kept.find((h) => h.name === s.name), s.name, now, policy, random)
  );
  return [...kept.filter((h) => !served.has(h.name)), ...blamed];
}
