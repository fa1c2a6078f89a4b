/**
 * Durations on the command line: `90s`, `30m`, `12h`, `7d`, and `0`
 * (`--ttl`, `--timeout`). One grammar for every flag that takes one.
 *
 * @module
 */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `text` in milliseconds, or null when it is not a duration such as `90s`, `30m`, `12h`, `7d` or `0`. */
export function durationMs(text: string): number | null {
  if (text === "0") return 0;
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text);
  if (m === null) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return Number.isSafeInteger(ms) ? ms : null;
}
