/**
 * Loading progress from engine log lines (design §9.3): people want to see a
 * 20-minute load move.
 *
 * @module
 */
import type { ProgressPattern } from "../engines/types.ts";

/** Where loading stands. */
export interface LoadingProgress {
  /** 0-100, when known. */
  percent: number | null;
  /** Checkpoint shards loaded, when known. */
  done: number | null;
  /** Checkpoint shards in all, when known. */
  total: number | null;
}

/** Compiles a plugin's patterns once; a pattern that does not compile is skipped. */
export function compilePatterns(patterns: readonly ProgressPattern[]): RegExp[] {
  const out: RegExp[] = [];
  for (const p of patterns) {
    try {
      out.push(new RegExp(p.regex));
    } catch {
      // A plugin's bad pattern costs progress reporting, never the shard.
    }
  }
  return out;
}

/** Reads progress from one line, or null when no pattern matches. */
export function matchProgress(line: string, patterns: readonly RegExp[]): LoadingProgress | null {
  for (const re of patterns) {
    const g = re.exec(line)?.groups;
    if (g === undefined) continue;
    const num = (v: string | undefined) =>
      v === undefined || !/^\d+(\.\d+)?$/.test(v) ? null : Number(v);
    const done = num(g.done);
    const total = num(g.total);
    let percent = num(g.percent);
    if (percent === null && done !== null && total !== null && total > 0) {
      percent = Math.round((100 * done) / total);
    }
    if (percent === null && done === null) continue;
    return { percent, done, total };
  }
  return null;
}
