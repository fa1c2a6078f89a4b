/**
 * What a host's cache already holds of a snapshot. A blob is complete when
 * it exists with the file's size and its hash was checked once: by us when
 * we wrote it, or on first use of a blob found in an existing hub cache.
 * The check is remembered in `<root>/.llmgw/verified/` (size and mtime), so
 * a restart does not hash 140 GB again.
 *
 * @module
 */
import { dirname } from "node:path";
import { expectedHash } from "../../models/file_hash.ts";
import { blobKey, type RepoFile, type RepoSnapshot } from "../../models/repo_snapshot.ts";
import type { CacheFs, CacheStat } from "./cache_fs.ts";
import { blobLinkTarget, type CacheLayout, checkCommit, checkRepoFile } from "./cache_layout.ts";

/** One file's state in the cache. */
export type BlobState =
  | "complete"
  /** Right size, hash not checked yet (an existing hub cache's blob). */
  | "unverified"
  | "missing";

/** The memo line of a verified blob: its size and mtime when checked. */
function memo(stat: CacheStat): string {
  return `${stat.size} ${stat.mtimeMs}\n`;
}

/** Records that the blob at its path, as it is now, matched its hash. */
export async function rememberVerified(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  file: RepoFile,
): Promise<void> {
  const stat = await fs.lstat(layout.blobPath(repo, file));
  if (stat === null) return;
  const path = layout.verifiedPath(repo, file);
  await fs.mkdirp(dirname(path));
  await fs.writeTextAtomic(path, memo(stat));
}

/**
 * The state of `file`'s blob without reading its content: `missing` when
 * absent or of another size (a file of the wrong size under the final name
 * is never used), `complete` when its check is remembered.
 */
export async function blobState(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  file: RepoFile,
): Promise<BlobState> {
  const stat = await fs.lstat(layout.blobPath(repo, file));
  if (stat === null || !stat.isFile || stat.size !== file.size) return "missing";
  const seen = await fs.readText(layout.verifiedPath(repo, file));
  return seen === memo(stat) ? "complete" : "unverified";
}

/**
 * Hashes an unverified blob once: true (and remembered) on a match; on a
 * mismatch the blob is removed, so it is fetched again, and false returned.
 */
export async function verifyExisting(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  file: RepoFile,
): Promise<boolean> {
  const path = layout.blobPath(repo, file);
  const { hash, want } = expectedHash(file);
  for await (const piece of await fs.readStream(path)) hash.update(piece);
  if (hash.hex() === want) {
    await rememberVerified(fs, layout, repo, file);
    return true;
  }
  await fs.remove(path);
  return false;
}

/** Whether `snapshots/<commit>/<path>` is the relative link to the file's blob. */
export async function isLinked(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  commit: string,
  file: RepoFile,
): Promise<boolean> {
  return (await fs.readLink(layout.snapshotPath(repo, commit, file))) === blobLinkTarget(file);
}

/** What a cache holds of a snapshot. */
export interface SnapshotHoldings {
  /** Files whose blob is complete or unverified (right size). */
  present: RepoFile[];
  /** Files to fetch. */
  missing: RepoFile[];
  /** Bytes of the missing files, each blob once. */
  missingBytes: number;
  /** Every file is present and linked in `snapshots/<commit>/`. */
  holds: boolean;
}

/**
 * What the cache holds of `snapshot`, by size and links only (cheap: no
 * hashing), for placement's "this node holds the revision". Refuses a
 * snapshot whose names are unsafe (see cache_layout.ts).
 */
export async function inspectSnapshot(
  fs: CacheFs,
  layout: CacheLayout,
  snapshot: RepoSnapshot,
): Promise<SnapshotHoldings> {
  const { repo, commit } = snapshot;
  checkCommit(commit, repo);
  for (const file of snapshot.files) checkRepoFile(file, repo);
  const present: RepoFile[] = [];
  const missing: RepoFile[] = [];
  const seen = new Map<string, boolean>();
  let linked = true;
  for (const file of snapshot.files) {
    const key = blobKey(file);
    let here = seen.get(key);
    if (here === undefined) {
      here = (await blobState(fs, layout, repo, file)) !== "missing";
      seen.set(key, here);
    }
    (here ? present : missing).push(file);
    if (here && linked) linked = await isLinked(fs, layout, repo, commit, file);
  }
  return {
    present,
    missing,
    missingBytes: [...new Map(missing.map((f) => [blobKey(f), f.size])).values()]
      .reduce((n, size) => n + size, 0),
    holds: missing.length === 0 && linked,
  };
}
