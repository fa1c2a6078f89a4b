/**
 * What this cache may serve a peer of one blob (issue #25 item 3): a blob
 * under its final name only once its hash was checked (the verified memo),
 * and, while it is still downloading, the bytes of the chunks its record
 * names (synced before they were recorded) and of the chunks being written
 * now (written_chunks.ts: streamed as they land), so a chain of hosts does
 * not wait for whole files, or whole chunks. Anything else is not served:
 * unverified content under its final name never leaves the host.
 *
 * @module
 */
import type { RepoFile } from "../../models/repo_snapshot.ts";
import type { CacheFs } from "./cache_fs.ts";
import { blobState } from "./cache_inspect.ts";
import { type CacheLayout, checkBlobKey, repoFolderName, UnsafePathError } from "./cache_layout.ts";
import { parseRecord } from "./chunk_record.ts";
import type { ChunkTry, WrittenChunks } from "./written_chunks.ts";

/** Where a held range is read from. */
export interface HeldRange {
  /** The file to read: the verified blob, or the part file being written. */
  path: string;
  /** Whether it is the part file (served from its chunk record). */
  partial: boolean;
  /**
   * The chunks of the range being written now, by first byte (none for a
   * verified blob, or a range of recorded chunks only): their bytes are
   * read only below each one's `written`, waiting for more.
   */
  writing: ChunkTry[];
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

/** What {@link holding} reads besides the disk. */
export interface HoldingOptions {
  /** The chunks being written now (absent: only recorded chunks are served). */
  written?: WrittenChunks;
  /** Waits out {@link SETTLE_MS} (tests inject one). */
  settle?: (ms: number) => Promise<void>;
}

/**
 * Where bytes `first` … `last` of `file` of `repo` can be read, if this
 * cache may serve them now: every chunk they touch recorded, or being
 * written by a try that has not failed.
 */
export async function holding(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  file: RepoFile,
  first: number,
  last: number,
  options: HoldingOptions = {},
): Promise<Holding> {
  const settle = options.settle ?? ((ms) => new Promise<void>((r) => setTimeout(r, ms)));
  // Looked at before the record is read: a try that completes in between is then still held
  // here (complete: all its bytes written), never missed by both.
  const tries = options.written?.writing(layout.partPath(repo, file)) ?? new Map();
  let state = await blobState(fs, layout, repo, file);
  const record = await fs.readText(layout.chunksPath(repo, file));
  if (state === "unverified" && record === null) {
    // Either renamed into place a moment ago, its memo not yet written, or a
    // blob of an existing hub cache never used here (not served until hashed).
    await settle(SETTLE_MS);
    state = await blobState(fs, layout, repo, file);
  }
  if (state === "complete") {
    return { path: layout.blobPath(repo, file), partial: false, writing: [] };
  }
  if (record === null) return "not_held";
  const header = HEADER.exec(record);
  if (header === null || Number(header[1]) !== file.size) return "range_pending";
  const chunkBytes = Number(header[2]);
  const done = parseRecord(record, file.size, chunkBytes);
  if (done === null || chunkBytes <= 0) return "range_pending";
  const writing: ChunkTry[] = [];
  for (let i = Math.floor(first / chunkBytes); i <= Math.floor(last / chunkBytes); i++) {
    if (done.has(i)) continue;
    const start = i * chunkBytes;
    const t = tries.get(start);
    // Not begun (or between tries, or of another round's chunk size): ask again shortly.
    if (t?.state === "abandoned" || t?.end !== Math.min(file.size, start + chunkBytes)) {
      return "range_pending";
    }
    writing.push(t);
  }
  return { path: layout.partPath(repo, file), partial: true, writing };
}
