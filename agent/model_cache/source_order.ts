/**
 * Which source the next chunk of a download asks (issue #25 item 3). The
 * sources are those assigned now, read again for every chunk, so a re-plan
 * of the control plane reaches a download under way: a source added ahead
 * is asked for the next chunk, a source removed is asked for none (chunks
 * already on it finish there). Sources that failed during this download go
 * after the others, the most recent failure last; those that refused the
 * file for good are skipped. Pure: live_sources.ts is its shell.
 *
 * @module
 */

/** Anything a download can ask, known by its name (a ByteSource). */
export interface NamedSource {
  /** Its name: sources are matched by name, since a re-read assignment may give new objects. */
  readonly name: string;
}

/**
 * The failure memory, kept to the names still `assigned`: a source that
 * left the plan and comes back later is the control plane's new decision,
 * not a failed source.
 */
export function keepAssigned(
  assigned: readonly NamedSource[],
  failed: readonly string[],
): string[] {
  const names = new Set(assigned.map((s) => s.name));
  return failed.filter((n) => names.has(n));
}

/** `assigned` in the order to ask: those not `failed` as assigned, then the failed ones, oldest failure first. */
export function sourceOrder<T extends NamedSource>(
  assigned: readonly T[],
  failed: readonly string[],
): T[] {
  const byName = new Map(assigned.map((s) => [s.name, s]));
  const down = new Set(failed);
  const later = failed.flatMap((n) => byName.get(n) ?? []);
  return [...assigned.filter((s) => !down.has(s.name)), ...later];
}

/** Names of the sources that refused a file for good (a Set, or a Map to their answers). */
export interface Refusals {
  /** Whether the source named `name` refused it. */
  has(name: string): boolean;
}

/** The source for the next try of a chunk: the first in {@link sourceOrder} not in `refused`. */
export function nextSource<T extends NamedSource>(
  assigned: readonly T[],
  failed: readonly string[],
  refused: Refusals,
): T | undefined {
  return sourceOrder(assigned, failed).find((s) => !refused.has(s.name));
}

/**
 * The failure memory once `name` failed a try: it goes last when it heads
 * the order. A source already moved (another chunk failed on it first)
 * stays where it is, so one outage moves it once, not once per chunk.
 */
export function afterFailure(
  assigned: readonly NamedSource[],
  failed: readonly string[],
  name: string,
): string[] {
  const kept = keepAssigned(assigned, failed);
  if (sourceOrder(assigned, kept)[0]?.name !== name) return kept;
  return [...kept.filter((n) => n !== name), name];
}

/**
 * The failure memory once the whole file's content did not match: the
 * sources that `served` its bytes go last, in their current order.
 */
export function afterMismatch(
  assigned: readonly NamedSource[],
  failed: readonly string[],
  served: ReadonlySet<string>,
): string[] {
  const kept = keepAssigned(assigned, failed);
  const blamed = sourceOrder(assigned, kept).filter((s) => served.has(s.name)).map((s) => s.name);
  return [...kept.filter((n) => !served.has(n)), ...blamed];
}
