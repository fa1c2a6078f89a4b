/**
 * How far a snapshot's download is, readable at any moment (the agent puts
 * it in its heartbeat): bytes done of total, a moving rate, the ETA it
 * implies, and the sources serving it now. Fed by the downloads, read on
 * an injected clock.
 *
 * @module
 */
import type { Clock } from "../../time/clock.ts";

/** A snapshot of one download's progress. */
export interface ProgressReport {
  /** The hub id. */
  repo: string;
  /** The commit. */
  commit: string;
  /** Bytes on disk (fetched now or before a restart) of the files still to fetch. */
  bytesDone: number;
  /** Bytes of the files still to fetch when the download started. */
  bytesTotal: number;
  /** Bytes per second over the last {@link RATE_WINDOW_MS}; 0 before any sample. */
  rateBytesPerSecond: number;
  /** Seconds left at that rate; null while the rate is 0. */
  etaSeconds: number | null;
  /** Names of the sources serving a chunk now, sorted. */
  sources: string[];
}

/** The window of the moving rate. */
export const RATE_WINDOW_MS = 10_000;

/** One download's progress; its methods are called by the download, {@link report} by anyone. */
export class DownloadProgress {
  readonly repo: string;
  readonly commit: string;
  readonly #clock: Clock;
  #total: number;
  #done = 0;
  #samples: { at: number; done: number }[] = [];
  #sources = new Map<string, number>();

  /** Progress of `repo`@`commit`, `total` bytes to fetch. */
  constructor(repo: string, commit: string, total: number, clock: Clock) {
    this.repo = repo;
    this.commit = commit;
    this.#total = total;
    this.#clock = clock;
    this.#sample();
  }

  #sample(): void {
    const at = this.#clock.now();
    this.#samples.push({ at, done: this.#done });
    // Keep one sample older than the window, so the rate spans all of it.
    while (this.#samples.length > 2 && this.#samples[1].at <= at - RATE_WINDOW_MS) {
      this.#samples.shift();
    }
  }

  /** Bytes already on disk when the download began (a resumed part file): done, not rate. */
  resumed(bytes: number): void {
    this.#done += bytes;
    for (const s of this.#samples) s.done += bytes;
  }

  /** `bytes` more were written (negative when a failed range is dropped). */
  add(bytes: number): void {
    this.#done = Math.max(0, this.#done + bytes);
    this.#sample();
  }

  /** A chunk began (`+1`) or ended (`-1`) on `source`. */
  sourceUse(source: string, delta: 1 | -1): void {
    const n = (this.#sources.get(source) ?? 0) + delta;
    if (n > 0) this.#sources.set(source, n);
    else this.#sources.delete(source);
  }

  /** The progress now. */
  report(): ProgressReport {
    const now = this.#clock.now();
    // The oldest sample kept is the last one at or before the window's start.
    const oldest = this.#samples[0];
    const span = now - oldest.at;
    const rate = span > 0 ? Math.max(0, ((this.#done - oldest.done) * 1000) / span) : 0;
    const left = Math.max(0, this.#total - this.#done);
    return {
      repo: this.repo,
      commit: this.commit,
      bytesDone: Math.min(this.#done, this.#total),
      bytesTotal: this.#total,
      rateBytesPerSecond: Math.round(rate),
      etaSeconds: rate > 0 ? Math.ceil(left / rate) : left === 0 ? 0 : null,
      sources: [...this.#sources.keys()].sort(),
    };
  }
}
