/**
 * What a pull's final failure is called in the heartbeat (issue #25 items
 * 5, 8): a short kind an operator can filter on, read from the error the
 * fetch failed with (agent/model_fetch.ts `fetchError` keeps it as the
 * cause), beside the error's own words, which `llmgw models pulls` shows.
 *
 * @module
 */
import {
  HubAuthError,
  HubEntryNotFoundError,
  HubGatedError,
  HubRepoNotFoundError,
  HubRevisionNotFoundError,
} from "../models/hub_errors.ts";
import { FETCH_FAILED_KIND } from "../protocol/model_admin.ts";
import { ModelFetchError } from "../supervisor/model_fetcher.ts";
import { DownloadFailedError } from "./model_cache/download_failed.ts";
import { UnsafePathError } from "./model_cache/cache_layout.ts";

/**
 * The kind of a final fetch failure: `repo_not_found`,
 * `revision_not_found`, `file_not_found`, `gated`, `token_refused`,
 * `insufficient_disk`, `hash_mismatch`, `unsafe_path`, `download_refused`
 * (every source refused a file) or `fetch_failed` (anything else).
 */
export function pullFailureKind(e: unknown): string {
  if (e instanceof ModelFetchError && e.kind !== null) return e.kind;
  const cause = e instanceof ModelFetchError ? e.cause : e;
  if (cause instanceof HubRepoNotFoundError) return "repo_not_found";
  if (cause instanceof HubRevisionNotFoundError) return "revision_not_found";
  if (cause instanceof HubEntryNotFoundError) return "file_not_found";
  if (cause instanceof HubGatedError) return "gated";
  if (cause instanceof HubAuthError) return "token_refused";
  if (cause instanceof UnsafePathError) return "unsafe_path";
  if (cause instanceof DownloadFailedError) return cause.kind ?? "download_refused";
  return FETCH_FAILED_KIND;
}
