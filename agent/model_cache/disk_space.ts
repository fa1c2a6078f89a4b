/**
 * The cache's disk is full, or would be: checked before a download starts
 * (bytes still to fetch vs bytes free) and raised when a write fails with
 * ENOSPC midway, after the partial files were removed.
 *
 * @module
 */
import { formatBytes } from "../../text/bytes.ts";

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

// The one owner of byte formatting; callers here import it from this file too.
export { formatBytes } from "../../text/bytes.ts";
