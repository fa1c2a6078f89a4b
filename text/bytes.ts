/**
 * Byte counts and durations as operators read them: `1.5 GiB`, `800 B`,
 * `1.2 GiB/s`, `4m10s`. One owner for the model cache's messages, the CLI
 * and the dashboard.
 *
 * @module
 */

/** Bytes as people read them: `1.5 GiB`, `800 B` (powers of 1024). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** A rate in bytes per second: `1.2 GiB/s`. */
export function formatRate(bytesPerSecond: number): string {
  return `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

/** Whole seconds as `31s`, `4m10s`, `2h05m`. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
