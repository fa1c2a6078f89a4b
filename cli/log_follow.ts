/**
 * `llmgw logs -f`: the agent answers the last N lines of a shard's log, so
 * following it means asking again and printing only what is new.
 *
 * @module
 */

/**
 * The lines of `next` that `prev` had not shown: `next` is the log's tail
 * now, `prev` its tail before. The longest end of `prev` that starts `next`
 * is the overlap; no overlap means the log moved past the whole window (or
 * was restarted), and all of `next` is new. Identical repeated lines can
 * make the overlap look longer than it was; each is then printed once.
 */
export function newLogLines(prev: readonly string[], next: readonly string[]): string[] {
  for (let k = Math.min(prev.length, next.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k; i++) {
      if (prev[prev.length - k + i] !== next[i]) {
        same = false;
        break;
      }
    }
    if (same) return next.slice(k);
  }
  return [...next];
}
