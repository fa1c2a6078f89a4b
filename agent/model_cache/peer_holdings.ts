/**
 * What this cache may serve a peer of one blob (issue #25 item 3): a blob
 * under its final name only once its hash was checked (the verified memo),
 * and, while it is still downloading, the bytes of the chunks its record
 * names (synced before they were recorded), so a chain of hosts does not
 * wait for whole files. Anything else is not served: unverified content
 * never leaves the host.
 *
 * @module
 */
import type { RepoFile } from "../../models/repo_snapshot.ts";
import type { CacheFs } from "./cache_fs.ts";
import { blobState } from "./cache_inspect.ts";
import { type CacheLayout, checkBlobKey, repoFolderName, UnsafePathError } from "./cache_layout.ts";
import { parseRecord } from "./chunk_record.ts";

/** Where a held range is read from. */
export interface HeldRange {
  /** The file to read: the verified blob, or the part file being written. */
  path: string;
  /** Whether it is the part file (served from its chunk record). */
  partial: boolean;
}

/** What the cache can do with a request for a range. */
export type Holding = HeldRange | "not_held" | "range_pending";

/**
 * The file a blob request names: its key in repository `repo`, with the
 * size the asker expects.
 *
 * @throws {UnsafePathError} For a repository, key or size that cannot name a blob.
 */
export function requestedBlob(repo: string, key: string, size: number): {
  repo: string;
  file: RepoFile;
} {
  repoFolderName(repo);
  checkBlobKey(key, repo);
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new UnsafePathError(`Cannot use size ${size} of ${repo} blob ${key}`);
  }
  // The key alone names the content; the path only has to be a safe name.
  const file: RepoFile = key.length === 64
    ? { path: key, size, blobId: "0".repeat(40), sha256: key }
    : { path: key, size, blobId: key };
  return { repo, file };
}

/** How long a blob renamed into place may take to be remembered as verified. */
const SETTLE_MS = 200;

const HEADER = /^llmgw-chunks 1 size=(\d+) chunk=(\d+)\n/;

/**
 * Where bytes `first` … `last` of `file` of `repo` can be read, if this
 * cache may serve them now.
 */
export async function holding(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  file: RepoFile,
  first: number,
  last: number,
  settle: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<Holding> {
  let state = await blobState(fs, layout, repo, file);
  const record = await fs.readText(layout.chunksPath(repo, file));
  if (state === "unverified" && record === null) {
    // Either renamed into place a moment ago, its memo not yet written, or a
    // blob of an existing hub cache never used here (not served until hashed).
    await settle(SETTLE_MS);
    state = await blobState(fs, layout, repo, file);
  }
  if (state === "complete") return { path: layout.blobPath(repo, file), partial: false };
  if (record === null) return "not_held";
  const header = HEADER.exec(record);
  if (header === null || Number(header[1]) !== file.size) return "range_pending";
  const chunkBytes = Number(header[2]);
  const done = parseRecord(record, file.size, chunkBytes);
  if (done === null || chunkBytes <= 0) return "range_pending";
  for (let i = Math.floor(first / chunkBytes); i <= Math.floor(last / chunkBytes); i++) {
    if (!done.has(i)) return "range_pending";
  }
  return { path: layout.partPath(repo, file), partial: true };
}
