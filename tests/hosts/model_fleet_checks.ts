/**
 * What tests/hosts/model_fleet_test.ts checks on each host's model cache:
 * the expected files from the hub's revision API, each file's hash (SHA-256
 * for LFS files, the git blob hash for small ones, as the cache names its
 * blobs), and a sampler that looks at every blob under a final name while
 * the transfer runs.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { join } from "node:path";

/** One file of the revision, as the revision API lists it. */
export interface RevisionFile {
  /** Its path in the snapshot. */
  path: string;
  /** Its size in bytes. */
  size: number;
  /** Its blob name in the cache: the LFS SHA-256, else the git blob id. */
  blob: string;
  /** Whether it is an LFS file (SHA-256), else a small git blob (SHA-1 of `blob N\0…`). */
  lfs: boolean;
}

/** The revision API's answer (`?blobs=true`) as the files the cache must hold. */
export function revisionFiles(answer: {
  sha: string;
  siblings: { rfilename: string; size: number; blobId: string; lfs?: { sha256: string } }[];
}): { commit: string; files: RevisionFile[] } {
  return {
    commit: answer.sha,
    files: answer.siblings.map((s) => ({
      path: s.rfilename,
      size: s.size,
      blob: s.lfs?.sha256 ?? s.blobId,
      lfs: s.lfs !== undefined,
    })),
  };
}

/** The hash of `path` as the file's blob name spells it. */
export async function blobHash(path: string, lfs: boolean, size: number): Promise<string> {
  const hash = createHash(lfs ? "sha256" : "sha1");
  if (!lfs) hash.update(`blob ${size}\0`);
  using file = await Deno.open(path);
  for await (const piece of file.readable) hash.update(piece);
  return hash.digest("hex");
}

/**
 * Looks at the blobs/ folders of several caches, again and again: a file
 * under a final blob name (no `.llmgw.` suffix) must have the full size and
 * the hash its name says. Each final blob is hashed once (it never changes
 * under that name); a problem is kept, with the host and the file.
 */
export class BlobSampler {
  /** Final blob paths already hashed, with the hash found. */
  readonly hashed = new Map<string, string>();
  /** Each problem seen: host, file, what was wrong. */
  readonly problems: string[] = [];
  /** Rounds run. */
  rounds = 0;
  readonly #byBlob: Map<string, RevisionFile>;

  constructor(files: readonly RevisionFile[], readonly blobDirs: ReadonlyMap<string, string>) {
    this.#byBlob = new Map(files.map((f) => [f.blob, f]));
  }

  /** One look at every host's blobs/. */
  async sample(): Promise<void> {
    this.rounds++;
    for (const [host, dir] of this.blobDirs) {
      let names: string[];
      try {
        names = [...Deno.readDirSync(dir)].map((e) => e.name);
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) continue;
        throw e;
      }
      for (const name of names) {
        if (name.includes(".llmgw.")) continue; // a part file or its record, not a final name
        const path = join(dir, name);
        if (this.hashed.has(path)) continue;
        const file = this.#byBlob.get(name);
        if (file === undefined) {
          this.problems.push(`${host}: ${name} is no blob of the revision`);
          continue;
        }
        const size = (await Deno.stat(path)).size;
        if (size !== file.size) {
          this.problems.push(`${host}: ${name} (${file.path}) has ${size} of ${file.size} bytes`);
          continue;
        }
        const got = await blobHash(path, file.lfs, file.size);
        this.hashed.set(path, got);
        if (got !== file.blob) this.problems.push(`${host}: ${file.path} hashes to ${got}`);
      }
    }
  }
}
