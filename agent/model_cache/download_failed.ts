/**
 * How a file's download gives up (agent/model_cache/blob_download.ts): the
 * error, and which of its causes are final. Only a hub's refusal is final
 * (review of issue #25 follow-up, ops item 3): the hub says what exists and
 * who may read it, while a peer or a path only holds copies, and a peer that
 * holds nothing yet (it restarted, or began late) may hold the file later.
 *
 * @module
 */
import type { SourceKind } from "../../models/byte_source.ts";
import type { RepoFile } from "../../models/repo_snapshot.ts";

/** A download that gave up: every source failed, or the content never matched. */
export class DownloadFailedError extends Error {
  /** The file's path in the repository. */
  readonly file: string;
  /**
   * False when the hub refused the file for good (unknown repo, revision or
   * file; gated) and no other source served it, or every source sent bytes
   * that failed the hash: trying again later will not help, so the replica
   * fails with the source's answer.
   */
  readonly retryable: boolean;
  /** `hash_mismatch` when every fetch's content failed its hash; null otherwise. */
  readonly kind: "hash_mismatch" | null;
  /** `message` names the file and the last failure. */
  constructor(
    file: string,
    message: string,
    retryable = true,
    kind: "hash_mismatch" | null = null,
  ) {
    super(message);
    this.name = "DownloadFailedError";
    this.file = file;
    this.retryable = retryable;
    this.kind = kind;
  }
}

/** A source's refusal of a file for good: its answer, and what kind of source said it. */
export interface Refusal {
  why: string;
  kind: SourceKind;
}

/**
 * Whether a source's error is final for this file on that source: it says
 * `retryable: false` (HubError in models/hub_errors.ts does; so do peers).
 */
export function isFinal(e: unknown): boolean {
  return (e as { retryable?: unknown })?.retryable === false;
}

/** No source is assigned at all. */
export function noSource(repo: string, file: RepoFile): DownloadFailedError {
  return new DownloadFailedError(
    file.path,
    `Cannot fetch ${repo} ${file.path}: no source holds it`,
  );
}

/** A chunk whose every assigned source used its tries (retryable: the sources may come back). */
export function triesFailed(
  repo: string,
  file: RepoFile,
  range: string,
  tries: number,
  last: string,
): DownloadFailedError {
  return new DownloadFailedError(
    file.path,
    `Cannot fetch ${repo} ${file.path} bytes ${range}: ${tries} tries failed, the last on ${last}`,
  );
}

/**
 * Every source assigned refused the file: final when a hub was among them,
 * retryable (the download is asked again later) when only peers or paths were.
 */
export function refusedEverywhere(
  repo: string,
  file: RepoFile,
  refused: ReadonlyMap<string, Refusal>,
): DownloadFailedError {
  return new DownloadFailedError(
    file.path,
    `Cannot fetch ${repo} ${file.path}: ` +
      [...refused].map(([name, r]) => `${name} refused it: ${r.why}`).join("; "),
    ![...refused.values()].some((r) => r.kind === "hub"),
  );
}
