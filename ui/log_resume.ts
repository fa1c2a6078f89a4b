/**
 * Stable ids for a shard's log lines, and resuming from one (docs/ui.md),
 * pure. The agent's log API answers the last N lines of a shard's in-memory
 * tail and where they start in the log; the dashboard polls it and numbers
 * the lines it has not seen (protocol/log_window.ts: by position, or, from an
 * agent that gives none, by the longest overlap between the lines it holds
 * and the head of the new answer). Each line gets the id `EPOCH.SEQ`: SEQ
 * counts lines since the window was made, EPOCH names the window, so an id
 * from another window (a restarted control plane) is never taken for one of
 * this window's.
 *
 * Without positions, a tail that repeats one line exactly cannot be told
 * from the same tail unchanged; such repeats show once the log moves on to
 * another line.
 *
 * @module
 */
import { advanceLog } from "../protocol/log_window.ts";

/** A line with its id's sequence number. */
export interface LogLine {
  /** Position in the window, from 1. */
  seq: number;
  /** The text. */
  text: string;
}

/** The lines known of one shard's log. */
export interface LogWindow {
  /** Names this window in ids. */
  epoch: string;
  /** The shard whose log this is: a new placement's shard starts a new log. */
  shard: string | null;
  /** The sequence number the next new line gets. */
  next: number;
  /** The last lines, oldest first, at most `keep`. */
  lines: LogLine[];
  /** Where the last answer was in the log, when the agent said. */
  last?: LogPosition | null;
}

/** Where an answer of the agent is in its log (absent from older agents). */
export interface LogPosition {
  /** The log's identity on its agent. */
  log_id: string;
  /** The position of the answer's first line. */
  first: number;
  /** How many lines the answer had. */
  count: number;
}

/** What one answer of the agent added. */
export interface Advance {
  /** The window after it. */
  window: LogWindow;
  /** Lines new in it, oldest first. */
  added: LogLine[];
  /**
   * Whether lines may have been missed before `added`: none of the answer
   * overlaps what was known, so the log may have moved more than a whole
   * answer between two polls (or its shard changed).
   */
  gap: boolean;
}

/** An empty window. */
export function emptyWindow(epoch: string): LogWindow {
  return { epoch, shard: null, next: 1, lines: [] };
}

/** The id of a line of a window, as SSE sends it. */
export function lineId(epoch: string, seq: number): string {
  return `${epoch}.${seq}`;
}

/**
 * How many lines at the end of `tail` are new after `known`: the fewest
 * such that the rest of `tail` equals the end of `known`.
 */
export function newLineCount(
  known: readonly string[],
  tail: readonly string[],
): number {
  return advanceLog({ lines: known }, { lines: tail }).lines.length;
}

/**
 * Takes one answer of the agent (the shard's last lines) into the window,
 * keeping its last `keep` lines.
 */
export function advance(
  window: LogWindow,
  shard: string,
  tail: readonly string[],
  keep: number,
  position: { log_id: string; first: number } | null = null,
): Advance {
  const sameShard = window.shard === null || window.shard === shard;
  const known = sameShard ? window.lines.map((l) => l.text) : [];
  const last = sameShard ? window.last ?? null : null;
  // By position when both answers have one; else by overlap with every line held.
  const step = advanceLog(
    last !== null && position !== null
      ? { log_id: last.log_id, first: last.first, lines: known.slice(-last.count) }
      : known.length === 0
      ? null
      : { lines: known },
    { lines: tail, log_id: position?.log_id, first: position?.first },
  );
  const added = step.lines.map((text, i) => ({ seq: window.next + i, text }));
  const gap = !sameShard || step.gap;
  const lines = [...window.lines, ...added].slice(-keep);
  return {
    window: {
      epoch: window.epoch,
      shard,
      next: window.next + added.length,
      lines,
      last: position === null ? null : { ...position, count: tail.length },
    },
    added,
    gap,
  };
}

/** Where a reader resumes. */
export interface Resume {
  /** The lines to send, oldest first. */
  lines: LogLine[];
  /** Whether lines it had not seen are gone from the window (or its id was another window's). */
  gap: boolean;
}

/**
 * The lines a reader that last saw `lastEventId` has not seen: every line
 * after it when the id is this window's, else the whole window. No line is
 * sent twice and none skipped while it is still in the window.
 */
export function resumeAfter(
  window: LogWindow,
  lastEventId: string | null | undefined,
): Resume {
  if (lastEventId === null || lastEventId === undefined || lastEventId === "") {
    return { lines: window.lines, gap: false };
  }
  const m = /^(.+)\.(\d{1,15})$/.exec(lastEventId);
  if (m === null || m[1] !== window.epoch) {
    return { lines: window.lines, gap: true };
  }
  const seen = Number(m[2]);
  if (seen >= window.next) return { lines: window.lines, gap: true };
  const first = window.lines[0]?.seq ?? window.next;
  return {
    lines: window.lines.filter((l) => l.seq > seen),
    gap: seen + 1 < first,
  };
}
