/**
 * Following a log that is read as a window of its last lines (the agent's
 * `GET /v1/shards/:id/logs`): what a new read adds to what was shown. With
 * positions (`log_id` and `first`, from agents that give them) the answer is
 * exact; without, the overlap of the two windows stands in for them.
 *
 * @module
 */

/** One read of a log: its lines and, when the agent says, where they are in the log. */
export interface LogWindow {
  /** The lines, oldest first. */
  lines: readonly string[];
  /** The log's identity; another one means the log began again. */
  log_id?: string | null;
  /** The position in the log of `lines[0]`. */
  first?: number | null;
}

/** What a read adds. */
export interface LogAdvance {
  /** The lines not shown before, oldest first. */
  lines: string[];
  /**
   * Whether lines may have passed unseen before `lines`: the window moved
   * past them between two reads, or the log began again.
   */
  gap: boolean;
  /** How many passed unseen, when positions tell; null when they do not. */
  missed: number | null;
  /** True when the log began again (another identity): `lines` is the new log's window. */
  restarted: boolean;
}

/**
 * The lines of `next` that `prev` had not shown. With positions on both
 * reads the answer is exact. Without, the longest end of `prev` that starts
 * `next` is the overlap, and no overlap means the whole of `next` is new
 * (and lines may have been missed); identical repeated lines can make that
 * overlap look longer than it was, which positions cannot.
 */
export function advanceLog(prev: LogWindow | null, next: LogWindow): LogAdvance {
  if (prev === null) return { lines: [...next.lines], gap: false, missed: 0, restarted: false };
  const { first: a, log_id: idA } = prev;
  const { first: b, log_id: idB } = next;
  if (typeof a === "number" && typeof b === "number" && idA && idB) {
    if (idA !== idB) return { lines: [...next.lines], gap: true, missed: null, restarted: true };
    const skip = a + prev.lines.length - b;
    return skip >= 0
      ? { lines: next.lines.slice(skip), gap: false, missed: 0, restarted: false }
      : { lines: [...next.lines], gap: true, missed: -skip, restarted: false };
  }
  const fresh = next.lines.length - overlap(prev.lines, next.lines);
  return {
    lines: next.lines.slice(next.lines.length - fresh),
    gap: prev.lines.length > 0 && fresh === next.lines.length && fresh > 0,
    missed: null,
    restarted: false,
  };
}

/** The longest k such that the last k lines of `prev` are the first k of `next`. */
function overlap(prev: readonly string[], next: readonly string[]): number {
  for (let k = Math.min(prev.length, next.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k && same; i++) same = prev[prev.length - k + i] === next[i];
    if (same) return k;
  }
  return 0;
}
