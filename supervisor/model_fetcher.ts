/**
 * The seam through which the supervisor has a shard's model put on this host
 * before its engine starts (issue #25 items 2, 4): the agent implements it
 * over its model cache (agent/model_fetch.ts); the supervisor only drives it
 * from the shard's `downloading` state (shard_machine.ts) and reports what it
 * says. Without one (tests, a bare supervisor) shards start at once from the
 * launch's `model`.
 *
 * @module
 */
import type { ShardDownload } from "../protocol/shard_download.ts";
import type { DownloadSource } from "../protocol/cold_start_receipt.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";

/** A model put on this host. */
export interface FetchedModel {
  /** The directory the engine is launched from (the launch's `model_path`). */
  path: string;
  /** Bytes fetched for it now (0 when every file was already here). */
  bytes: number;
  /** Which sources supplied those bytes, most first (issue #25 item 3); absent when unknown. */
  sources?: DownloadSource[];
}

/** What a download looks like now, without the supervisor's own retry count and error. */
export type DownloadProgress = Omit<ShardDownload, "last_error" | "failures">;

/** Puts shards' models on this host. */
export interface ModelFetcher {
  /**
   * Makes `shard`'s model present and verified on this host and answers its
   * directory. Rejects with {@link ModelFetchError}; a rejection of another
   * kind counts as retryable. Aborting `signal` stops the download (what was
   * fetched stays for the next try).
   */
  fetch(shard: DesiredShard, signal: AbortSignal): Promise<FetchedModel>;
  /** The shard's download as it stands (the last one seen, after a failure); null before any. */
  progress(shard: DesiredShard): DownloadProgress | null;
}

/** Why a shard's model could not be put on this host. */
export class ModelFetchError extends Error {
  /** True when a later try may succeed (hub unreachable, a source died). */
  readonly retryable: boolean;
  /** The report's `last_failure.kind` (e.g. `insufficient_disk`); null when none applies. */
  readonly kind: string | null;
  /**
   * `message` says what failed and where (never a token); `cause` is the
   * error it stands for (a pull's failure kind is read from it).
   */
  constructor(message: string, retryable: boolean, kind: string | null = null, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "ModelFetchError";
    this.retryable = retryable;
    this.kind = kind;
  }
}
