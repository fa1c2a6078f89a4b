/**
 * The repos a fake hub serves: each a set of commits (every file with its
 * size, git blob id and, for LFS files, SHA-256, as the revision API lists
 * them) and refs (branches and tags) pointing at commits. A file's bytes come
 * from a function, so a synthetic 2 GiB shard is generated per range rather
 * than held in memory. Hashes are computed once, when a file is made.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { gitBlobHash, sha256Hash } from "../../models/file_hash.ts";
import type { RepoFile } from "../../models/repo_snapshot.ts";

/** Bytes `start` … `end - 1` of a file, in chunks. */
export type ReadRange = (start: number, end: number) => AsyncIterable<Uint8Array>;

/** One file of a commit: its listing and its bytes. */
export interface FakeFile extends RepoFile {
  /** The size of its LFS pointer, for an LFS file. */
  pointerSize?: number;
  /** Its bytes. */
  read: ReadRange;
}

/** A repo as the fake hub serves it. */
export interface FakeRepo {
  /** `org/name`. */
  id: string;
  /** `false`, or how access to a gated repo is granted. */
  gated: false | "auto" | "manual";
  /** Whether it is hidden from those without access. */
  private: boolean;
  /** Tokens granted access to a gated or private repo. */
  grantedTokens: string[];
  /** Branch or tag → commit. */
  refs: Record<string, string>;
  /** Commit → its files, sorted by path. */
  commits: Record<string, FakeFile[]>;
}

/** How a file's content is stored: LFS for weights and anything of 10 MiB or more. */
export function storedInLfs(path: string, size: number): boolean {
  return /\.(safetensors|bin|pt|pth|gguf|h5|msgpack|onnx|model|tflite|ot)$/.test(path) ||
    size >= 10 * 1024 * 1024;
}

/** The text of the git LFS pointer to content of `sha256` and `size`. */
export function lfsPointer(sha256: string, size: number): string {
  return `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`;
}

/** Reads `bytes` in ranges (for small files held in memory). */
export function readBytes(bytes: Uint8Array): ReadRange {
  return async function* (start, end) {
    yield bytes.subarray(start, end);
  };
}

/**
 * A file whose content is `read` (size `size`), hashed now by streaming it
 * once; `lfs` says how it is stored (default {@link storedInLfs}).
 */
export async function fakeFile(
  path: string,
  size: number,
  read: ReadRange,
  lfs = storedInLfs(path, size),
): Promise<FakeFile> {
  const sha = sha256Hash();
  const blob = gitBlobHash(size);
  for await (const chunk of read(0, size)) {
    sha.update(chunk);
    if (!lfs) blob.update(chunk);
  }
  const sha256 = sha.hex();
  if (!lfs) return { path, size, blobId: blob.hex(), read };
  const pointer = new TextEncoder().encode(lfsPointer(sha256, size));
  const pointerBlob = gitBlobHash(pointer.byteLength);
  pointerBlob.update(pointer);
  return { path, size, blobId: pointerBlob.hex(), sha256, pointerSize: pointer.byteLength, read };
}

/** A small file from text or bytes. */
export function smallFile(path: string, content: string | Uint8Array): Promise<FakeFile> {
  const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
  return fakeFile(path, bytes.byteLength, readBytes(bytes));
}

/** A commit id for `files` of `repo`: a SHA-1 of their listing, so it is stable. */
export function commitId(repo: string, files: readonly FakeFile[], parent = ""): string {
  const hash = createHash("sha1").update(`${repo}\n${parent}\n`);
  for (const f of files) hash.update(`${f.path} ${f.blobId}\n`);
  return hash.digest("hex");
}

/** Options of {@link fakeRepo}. */
export interface FakeRepoOptions {
  /** Gated, and how access is granted. */
  gated?: false | "auto" | "manual";
  /** Hidden from those without access. */
  private?: boolean;
  /** Tokens granted access. */
  grantedTokens?: string[];
  /** Refs pointing at the first commit (default `["main"]`). */
  refs?: string[];
}

/** A repo with one commit of `files`, `main` (or `refs`) pointing at it. */
export function fakeRepo(id: string, files: FakeFile[], options: FakeRepoOptions = {}): FakeRepo {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const commit = commitId(id, sorted);
  const refs: Record<string, string> = {};
  for (const ref of options.refs ?? ["main"]) refs[ref] = commit;
  return {
    id,
    gated: options.gated ?? false,
    private: options.private ?? false,
    grantedTokens: options.grantedTokens ?? [],
    refs,
    commits: { [commit]: sorted },
  };
}

/** Adds a commit of `files` to `repo`, moving `refs` to it; returns the commit id. */
export function addCommit(repo: FakeRepo, files: FakeFile[], refs: string[]): string {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const commit = commitId(repo.id, sorted, Object.keys(repo.commits).sort().join(","));
  repo.commits[commit] = sorted;
  for (const ref of refs) repo.refs[ref] = commit;
  return commit;
}
