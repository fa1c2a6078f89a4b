/**
 * The Hugging Face Hub's wire protocol, as llmgw speaks it: URL templates,
 * header names, error codes and the revision API's answer. Both sides use
 * this one file: the client (`models/hub_client.ts`) and the fake hub
 * (`dev/fake_hub/`), so the fake cannot drift from what the client expects.
 * Sources for each fact: docs/models.md, "The hub's protocol, as llmgw
 * speaks it". It imports nothing, so the fake hub runs with `--no-config`.
 *
 * @module
 */

/** The public hub, used when `HF_ENDPOINT` is not set. */
export const DEFAULT_HUB_ENDPOINT = "https://huggingface.co";

/** The branch a revision defaults to. */
export const DEFAULT_REVISION = "main";

/** The commit the answer belongs to, on every resolve answer (errors too). */
export const HEADER_REPO_COMMIT = "X-Repo-Commit";
/** The content's ETag (an LFS file's SHA-256) when the answer redirects. */
export const HEADER_LINKED_ETAG = "X-Linked-Etag";
/** The content's size when the answer redirects (its own length is the redirect's). */
export const HEADER_LINKED_SIZE = "X-Linked-Size";
/** Why the hub refused: one of {@link HubErrorCode}. */
export const HEADER_ERROR_CODE = "X-Error-Code";
/** The hub's own words for a refusal. */
export const HEADER_ERROR_MESSAGE = "X-Error-Message";

/** The `X-Error-Code` values llmgw tells apart (huggingface_hub's `hf_raise_for_status`). */
export type HubErrorCode = "RepoNotFound" | "RevisionNotFound" | "EntryNotFound" | "GatedRepo";

/** The hub's `X-Error-Message` for a token it does not know (any repo, 401). */
export const INVALID_CREDENTIALS_MESSAGE = "Invalid credentials in Authorization header";

/** A full commit id: 40 lowercase hex digits. */
export const COMMIT_PATTERN = /^[0-9a-f]{40}$/;

/** A hub repo id: `org/name`, each part of letters, digits, `-`, `_` and `.`. */
export const REPO_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** One file in the revision API's answer with `?blobs=true`. */
export interface ApiSibling {
  /** The path inside the repo. */
  rfilename: string;
  /** The content's size in bytes (an LFS file's real size, not its pointer's). */
  size: number;
  /** The git blob id (for an LFS file, its pointer's). */
  blobId: string;
  /** For an LFS file: its content's SHA-256 and size, and the pointer's size. */
  lfs?: { sha256: string; size: number; pointerSize: number };
}

/** The part of `GET /api/models/{repo}/revision/{revision}?blobs=true` llmgw reads. */
export interface ApiModelRevision {
  /** The repo id. */
  id: string;
  /** The commit the revision resolved to. */
  sha: string;
  /** `false`, or how access is granted (`"auto"`, `"manual"`). */
  gated: false | "auto" | "manual";
  /** Whether only some accounts see the repo. */
  private: boolean;
  /** Every file of the commit. */
  siblings: ApiSibling[];
}

/** Percent-encodes each `/`-separated part of a path (huggingface_hub's `quote(filename)`). */
export function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

/** The revision API's path for `repo` at `revision` (the revision encoded whole, `/` too). */
export function revisionApiPath(repo: string, revision: string): string {
  return `/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
}

/** `/{repo}/resolve/{revision}/{file}`: where a file's bytes are asked for. */
export function resolvePath(repo: string, revision: string, file: string): string {
  return `/${repo}/resolve/${encodeURIComponent(revision)}/${encodePath(file)}`;
}

/** The value inside an ETag, without `W/` and quotes (huggingface_hub's `_normalize_etag`). */
export function normalizeEtag(etag: string | null): string | null {
  if (etag === null) return null;
  return etag.replace(/^W\//, "").replace(/^"|"$/g, "");
}

/** A parsed `Content-Range: bytes first-last/total` (inclusive `last`). */
export interface ContentRange {
  /** The first byte sent. */
  first: number;
  /** The last byte sent (inclusive). */
  last: number;
  /** The whole file's size, or null for `*`. */
  total: number | null;
}

/** Parses a `Content-Range` of a 206; null when it is not `bytes first-last/total`. */
export function parseContentRange(value: string | null): ContentRange | null {
  const m = value?.match(/^bytes (\d+)-(\d+)\/(\d+|\*)$/);
  if (!m) return null;
  const first = Number(m[1]), last = Number(m[2]);
  const total = m[3] === "*" ? null : Number(m[3]);
  if (last < first || (total !== null && last >= total)) return null;
  return { first, last, total };
}
