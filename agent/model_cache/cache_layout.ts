/**
 * Where a model revision's files live in the agent's model cache: the
 * Hugging Face hub cache's own layout, so a host's `~/.cache/huggingface/hub`
 * is reused and an engine started with `HF_HUB_OFFLINE=1` reads our files as
 * its own (docs/models.md, "The model cache"):
 *
 * ```
 * <root>/models--org--name/blobs/<sha256 or git blob id>
 * <root>/models--org--name/refs/<revision>            (holds the commit)
 * <root>/models--org--name/snapshots/<commit>/<path>  -> ../../blobs/<key>
 * ```
 *
 * Every name that comes from a source (repo id, commit, revision, file path,
 * blob key) is checked here before it becomes a path, so nothing a hub or a
 * peer says can write outside the repository's folder. Pure: no file system.
 *
 * @module
 */
import { blobKey, type RepoFile } from "../../models/repo_snapshot.ts";

/** A name from a source that cannot be used as a path in the cache. */
export class UnsafePathError extends Error {
  /** `message` says which name, of what, and why. */
  constructor(message: string) {
    super(message);
    this.name = "UnsafePathError";
  }
}

const REPO_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const COMMIT = /^[0-9a-f]{40}$/;
const BLOB_KEY = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Suffix of a blob being written, beside its final name (see {@link CacheLayout.partPath}). */
export const PART_SUFFIX = ".llmgw.incomplete";
/** Suffix of the record of a part file's finished chunks. */
export const CHUNKS_SUFFIX = ".llmgw.chunks";

/**
 * The folder name of a model repository, as huggingface_hub's
 * `repo_folder_name` builds it: `models--org--name`. Refuses an id that is
 * not `name` or `org/name` of letters, digits, `.`, `_`, `-` (the hub's
 * rule), or that holds `--`, the separator.
 */
export function repoFolderName(repo: string): string {
  const parts = repo.split("/");
  const bad = parts.length > 2 || repo.includes("--") ||
    parts.some((p) => !REPO_PART.test(p) || p === "." || p === "..");
  if (bad) {
    throw new UnsafePathError(
      `Cannot use repository id ${JSON.stringify(repo)}: expected name or org/name ` +
        `of letters, digits, '.', '_' and '-' (no "--")`,
    );
  }
  return ["models", ...parts].join("--");
}

/** Refuses anything but a full 40-hex commit. */
export function checkCommit(commit: string, repo: string): void {
  if (!COMMIT.test(commit)) {
    throw new UnsafePathError(
      `Cannot use commit ${JSON.stringify(commit)} of ${repo}: expected 40 lowercase hex digits`,
    );
  }
}

/**
 * The `/`-separated segments of a path from a source, refused when it is
 * empty, absolute, holds a backslash, NUL, or an empty, `.` or `..` segment.
 */
function segments(path: string, what: string): string[] {
  const why = path === ""
    ? "it is empty"
    : path.startsWith("/")
    ? "it is absolute"
    : path.includes("\\")
    ? "it holds a backslash"
    : path.includes("\0")
    ? "it holds a NUL byte"
    : path.split("/").some((s) => s === "..")
    ? 'a ".." segment leaves its folder'
    : path.split("/").some((s) => s === "" || s === ".")
    ? 'it has an empty or "." segment'
    : null;
  if (why !== null) throw new UnsafePathError(`Cannot use ${what} ${JSON.stringify(path)}: ${why}`);
  return path.split("/");
}

/** Refuses a blob key that is not a 40-hex git blob id or a 64-hex SHA-256. */
export function checkBlobKey(key: string, of: string): void {
  if (!BLOB_KEY.test(key)) {
    throw new UnsafePathError(
      `Cannot use blob key ${JSON.stringify(key)} of ${of}: ` +
        "expected a 40-hex git blob id or a 64-hex SHA-256",
    );
  }
}

/** Refuses a file whose path or blob key could leave the snapshot or the blobs folder. */
export function checkRepoFile(file: RepoFile, repo: string): void {
  segments(file.path, `file path of ${repo}`);
  checkBlobKey(blobKey(file), `${repo} ${file.path}`);
  if (!Number.isSafeInteger(file.size) || file.size < 0) {
    throw new UnsafePathError(`Cannot use size ${file.size} of ${repo} ${file.path}`);
  }
}

/** Paths in one cache directory; every method checks the names it is given. */
export class CacheLayout {
  /** The cache's root (`--model-cache`), absolute. */
  readonly root: string;

  /** A layout rooted at `root` (no trailing slash needed). */
  constructor(root: string) {
    this.root = root.replace(/\/+$/, "") || "/";
  }

  /** `<root>/models--org--name`. */
  repoDir(repo: string): string {
    return `${this.root}/${repoFolderName(repo)}`;
  }

  /** `<repo>/blobs/<key>`: the verified content, under its final name. */
  blobPath(repo: string, file: RepoFile): string {
    checkRepoFile(file, repo);
    return this.blobPathOfKey(repo, blobKey(file));
  }

  /** {@link blobPath} by the blob's key alone (eviction knows keys from links). */
  blobPathOfKey(repo: string, key: string): string {
    checkBlobKey(key, repo);
    return `${this.repoDir(repo)}/blobs/${key}`;
  }

  /**
   * Where a blob is written before it is verified. Not huggingface_hub's own
   * `<key>.incomplete`: it resumes an `.incomplete` by appending at its end,
   * and ours is written at chunk offsets with holes, so its resume would
   * move a file with holes under the final name (docs/models.md).
   */
  partPath(repo: string, file: RepoFile): string {
    return this.blobPath(repo, file) + PART_SUFFIX;
  }

  /** The record of which chunks of the part file are written and synced. */
  chunksPath(repo: string, file: RepoFile): string {
    return this.blobPath(repo, file) + CHUNKS_SUFFIX;
  }

  /** `<repo>/snapshots/<commit>`: the directory an engine is launched from. */
  snapshotDir(repo: string, commit: string): string {
    checkCommit(commit, repo);
    return `${this.repoDir(repo)}/snapshots/${commit}`;
  }

  /** `<repo>/snapshots/<commit>/<path>`: the symlink to the file's blob. */
  snapshotPath(repo: string, commit: string, file: RepoFile): string {
    checkRepoFile(file, repo);
    return `${this.snapshotDir(repo, commit)}/${file.path}`;
  }

  /** `<repo>/refs/<revision>` (a branch or tag; `refs/pr/1` nests, as the hub's client does). */
  refPath(repo: string, revision: string): string {
    segments(revision, `revision of ${repo}`);
    return `${this.repoDir(repo)}/refs/${revision}`;
  }

  /** Temporary entries before their rename into place (same file system as everything else). */
  tempDir(): string {
    return `${this.root}/.llmgw/tmp`;
  }

  /** Where the agent remembers when a revision was last used (eviction is least recently used first). */
  usedPath(repo: string, commit: string): string {
    checkCommit(commit, repo);
    return `${this.root}/.llmgw/used/${repoFolderName(repo)}/${commit}`;
  }

  /** Where the agent remembers that an existing blob's hash was checked. */
  verifiedPath(repo: string, file: RepoFile): string {
    checkRepoFile(file, repo);
    return this.verifiedPathOfKey(repo, blobKey(file));
  }

  /** {@link verifiedPath} by the blob's key alone. */
  verifiedPathOfKey(repo: string, key: string): string {
    checkBlobKey(key, repo);
    return `${this.root}/.llmgw/verified/${repoFolderName(repo)}/${key}`;
  }
}

/** The repository id of a cache folder (`models--org--name` → `org/name`); null for another folder. */
export function repoOfFolder(folder: string): string | null {
  if (!folder.startsWith("models--")) return null;
  const repo = folder.slice("models--".length).split("--").join("/");
  try {
    return repoFolderName(repo) === folder ? repo : null;
  } catch {
    return null;
  }
}

/**
 * The symlink target of a snapshot entry, relative as huggingface_hub's
 * `_create_symlink` makes it: `../../blobs/<key>`, one more `../` per folder
 * the file is nested in, so the cache can be moved or mounted elsewhere.
 */
export function blobLinkTarget(file: RepoFile): string {
  const depth = file.path.split("/").length - 1;
  return `${"../".repeat(2 + depth)}blobs/${blobKey(file)}`;
}
