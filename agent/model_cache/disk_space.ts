/**
 * The cache's disk is full, or would be: checked before a download starts
 * (bytes still to fetch vs bytes free) and raised when a write fails with
 * ENOSPC midway, after the partial files were removed.
 *
 * @module
 */

/** Not enough room in the model cache for a snapshot. */
export class InsufficientDiskError extends Error {
  /** Bytes the download still needed. */
  readonly neededBytes: number;
  /** Bytes free on the cache's file system when it was checked. */
  readonly freeBytes: number;

  /** `where` is the cache directory; `what` the snapshot (`org/name@commit`). */
  constructor(where: string, what: string, neededBytes: number, freeBytes: number) {
    super(
      `Cannot fetch ${what} into ${where}: needs ${formatBytes(neededBytes)} more, ` +
        `${formatBytes(freeBytes)} free (insufficient_disk)`,
    );
    this.name = "InsufficientDiskError";
    this.neededBytes = neededBytes;
    this.freeBytes = freeBytes;
  }
}

/** Bytes as people read them: `1.5 GiB`, `800 B`. */
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
