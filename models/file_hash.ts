/**
 * The two content hashes a model file is checked against (see
 * {@link RepoFile}): SHA-256 for LFS files, the git blob id for small
 * files. Both are computed while the bytes stream past, so a 10 GB shard is
 * never held in memory.
 *
 * @module
 */
import { createHash, type Hash } from "node:crypto";
import type { RepoFile } from "./repo_snapshot.ts";

/** A hash fed chunk by chunk, read once at the end as lowercase hex. */
export interface ContentHash {
  /** Feeds the next bytes. */
  update(chunk: Uint8Array): void;
  /** The hex digest of everything fed. */
  hex(): string;
}

class NodeHash implements ContentHash {
  #hash: Hash;
  constructor(algorithm: "sha256" | "sha1", prefix?: string) {
    this.#hash = createHash(algorithm);
    if (prefix !== undefined) this.#hash.update(prefix);
  }
  update(chunk: Uint8Array): void {
    this.#hash.update(chunk);
  }
  hex(): string {
    return this.#hash.digest("hex");
  }
}

/** SHA-256 of the content (an LFS file's oid). */
export function sha256Hash(): ContentHash {
  return new NodeHash("sha256");
}

/** The git blob id of content of `size` bytes: SHA-1 of `blob <size>\0` + content. */
export function gitBlobHash(size: number): ContentHash {
  return new NodeHash("sha1", `blob ${size}\0`);
}

/** The hash a file's content must match: SHA-256 when it is in LFS, else its git blob id. */
export function expectedHash(file: RepoFile): { hash: ContentHash; want: string } {
  return file.sha256 !== undefined
    ? { hash: sha256Hash(), want: file.sha256 }
    : { hash: gitBlobHash(file.size), want: file.blobId };
}

/** Hashes whole bytes at once (tests, small files). */
export function hashBytes(hash: ContentHash, bytes: Uint8Array): string {
  hash.update(bytes);
  return hash.hex();
}
