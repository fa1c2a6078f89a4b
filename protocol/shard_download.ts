/**
 * A shard's model download as its agent reports it (issue #25 item 5): the
 * shard is `downloading` until its model's files are in the agent's model
 * cache, verified, and only then is its engine started. What an operator
 * watches in `llmgw get replicas` and `describe replica`: bytes done of
 * total, the moving rate and the ETA it implies, the sources serving it,
 * and the last error of a download that is being retried.
 *
 * Bounded by protocol/report_bounds.ts; agent/reports.ts clips to the same
 * bounds before a heartbeat leaves.
 *
 * @module
 */
import { z } from "zod";
import { REPORT_BOUNDS } from "./report_bounds.ts";
import type { Assert, Same } from "./same_type.ts";
import { formatRate, formatSeconds } from "../text/bytes.ts";

/** One shard's model download (see the module). */
export interface ShardDownload {
  /** The model: a hub id, or the local path checked. */
  model: string;
  /** The commit being fetched; null until the revision is resolved (and for a local path). */
  commit: string | null;
  /** Bytes on disk of the files still to fetch when the download began. */
  bytes_done: number;
  /** Bytes of those files; 0 until the file list is known. */
  bytes_total: number;
  /** Bytes per second over the last seconds; 0 before any sample. */
  rate_bytes_per_second: number;
  /** Seconds left at that rate; null while the rate is 0. */
  eta_seconds: number | null;
  /** The sources serving a chunk now (names, never a token), sorted. */
  sources: string[];
  /** Why the last try failed, while the agent waits to try again; null otherwise. */
  last_error: string | null;
  /** Tries that failed so far (0 while the first runs). */
  failures: number;
}

/** {@link ShardDownload} on the wire. */
export const ShardDownloadSchema = z.object({
  model: z.string().min(1).max(REPORT_BOUNDS.downloadModel),
  commit: z.string().min(1).max(REPORT_BOUNDS.downloadCommit).nullable(),
  bytes_done: z.number().int().min(0),
  bytes_total: z.number().int().min(0),
  rate_bytes_per_second: z.number().min(0),
  eta_seconds: z.number().min(0).nullable(),
  sources: z.array(z.string().min(1).max(REPORT_BOUNDS.downloadSource)).max(
    REPORT_BOUNDS.downloadSources,
  ),
  last_error: z.string().max(REPORT_BOUNDS.reason).nullable(),
  failures: z.number().int().min(0),
});

// `deno check` fails here when the interface and the schema drift apart.
type _ShardDownloadMatchesSchema = Assert<
  Same<z.output<typeof ShardDownloadSchema>, ShardDownload>
>;

/**
 * The download in a few words, as `llmgw get replicas` and the dashboard
 * show it: `42% 1.2 GiB/s ETA 31s`, `42% retrying (2 failed)` between
 * tries, `resolving` before the file list is known.
 */
export function downloadSummary(d: ShardDownload): string {
  const pct = downloadPercent(d);
  const done = pct === null ? "resolving" : `${pct}%`;
  if (d.last_error !== null) return `${done} retrying (${d.failures} failed)`;
  if (d.rate_bytes_per_second <= 0) return done;
  const eta = d.eta_seconds === null ? "" : ` ETA ${formatSeconds(d.eta_seconds)}`;
  return `${done} ${formatRate(d.rate_bytes_per_second)}${eta}`;
}

/** Percent done, 0-100 (floored), or null before the total is known. */
export function downloadPercent(
  d: Pick<ShardDownload, "bytes_done" | "bytes_total">,
): number | null {
  if (d.bytes_total <= 0) return null;
  return Math.min(100, Math.floor((d.bytes_done * 100) / d.bytes_total));
}
