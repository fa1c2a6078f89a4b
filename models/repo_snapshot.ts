/**
 * A model revision as llmgw knows it once its source answered: the commit a
 * revision (branch, tag or commit) resolved to, and every file with its size
 * and content hashes. The hub's revision API lists the same facts
 * (`siblings` with `size`, `blobId` and `lfs.sha256`); a local path and a
 * peer describe themselves in this shape too.
 *
 * @module
 */

/** One file of a model revision. */
export interface RepoFile {
  /** Path inside the repository, `/`-separated (`model-00001-of-00004.safetensors`). */
  path: string;
  /** Size in bytes of the content (for an LFS file, of the file itself, not its pointer). */
  size: number;
  /**
   * The git blob id: SHA-1 of `blob <size>\0` followed by the content, as git
   * stores small files (for an LFS file, the id of its pointer, so not a
   * hash of the content).
   */
  blobId: string;
  /** SHA-256 of the content for a file kept in LFS; absent for a small file kept in git. */
  sha256?: string;
}

/** A resolved model revision: every replica of a deployment revision serves this commit. */
export interface RepoSnapshot {
  /** The hub id (`org/name`). */
  repo: string;
  /** The 40-hex commit the revision resolved to. */
  commit: string;
  /** Every file of the commit, sorted by path. */
  files: RepoFile[];
}

/**
 * The name of a file's content in the cache (`blobs/<key>`), as the hub's
 * own client names it: the SHA-256 for an LFS file (the hub's
 * `X-Linked-Etag`), the git blob id for a small file (its `ETag`).
 */
export function blobKey(file: RepoFile): string {
  return file.sha256 ?? file.blobId;
}

/** The total size in bytes of a snapshot's files. */
export function snapshotBytes(snapshot: RepoSnapshot): number {
  return snapshot.files.reduce((sum, f) => sum + f.size, 0);
}
