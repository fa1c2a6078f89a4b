/**
 * The revisions a cache holds, read from disk: every
 * `models--…/snapshots/<commit>/` with the blobs its links name, their
 * sizes, the refs that point at it and when it was last used. Eviction
 * reads this; so will `llmgw get models` through the agent's heartbeat.
 *
 * @module
 */
import { dirname } from "node:path";
import type { CacheFs } from "./cache_fs.ts";
import { type CacheLayout, repoFolderName, repoOfFolder } from "./cache_layout.ts";

/** One revision in the cache. */
export interface CachedRevision {
  /** The hub id. */
  repo: string;
  /** The commit (the snapshot folder's name). */
  commit: string;
  /** The blobs its snapshot links to, by key, with their sizes; a plain file (no link) is `file:<path>`. */
  blobs: Map<string, number>;
  /** Branches and tags in `refs/` that name this commit. */
  refs: string[];
  /** When it was last used, ms (the snapshot folder's mtime when never recorded). */
  lastUsedMs: number;
}

const COMMIT = /^[0-9a-f]{40}$/;
const MAX_DEPTH = 32;

/** Records that `repo`@`commit` was used at `nowMs` (a download finished, a shard started). */
export async function markUsed(
  fs: CacheFs,
  layout: CacheLayout,
  repo: string,
  commit: string,
  nowMs: number,
): Promise<void> {
  const path = layout.usedPath(repo, commit);
  await fs.mkdirp(dirname(path));
  await fs.writeTextAtomic(path, `${nowMs}\n`);
}

/** Every revision in the cache, sorted by repository and commit. */
export async function listRevisions(fs: CacheFs, layout: CacheLayout): Promise<CachedRevision[]> {
  const out: CachedRevision[] = [];
  for (const entry of await fs.readDir(layout.root)) {
    const repo = entry.isDirectory ? repoOfFolder(entry.name) : null;
    if (repo === null) continue;
    const repoDir = layout.repoDir(repo);
    const refs = await readRefs(fs, `${repoDir}/refs`);
    for (const snap of await fs.readDir(`${repoDir}/snapshots`)) {
      if (!snap.isDirectory || !COMMIT.test(snap.name)) continue;
      const commit = snap.name;
      const dir = `${repoDir}/snapshots/${commit}`;
      const blobs = new Map<string, number>();
      await collectBlobs(fs, `${repoDir}/blobs`, dir, "", blobs, 0);
      const used = Number((await fs.readText(layout.usedPath(repo, commit)))?.trim());
      out.push({
        repo,
        commit,
        blobs,
        refs: refs.filter(([, c]) => c === commit).map(([name]) => name).sort(),
        lastUsedMs: Number.isFinite(used) && used > 0 ? used : (await fs.lstat(dir))?.mtimeMs ?? 0,
      });
    }
  }
  return out.sort((a, b) =>
    a.repo === b.repo ? (a.commit < b.commit ? -1 : 1) : a.repo < b.repo ? -1 : 1
  );
}

/** `[name, commit]` of every file under `refs/` (nested: `refs/pr/1`). */
async function readRefs(
  fs: CacheFs,
  dir: string,
  prefix = "",
  depth = 0,
): Promise<[string, string][]> {
  const out: [string, string][] = [];
  if (depth > MAX_DEPTH) return out;
  for (const e of await fs.readDir(dir)) {
    const name = prefix + e.name;
    if (e.isDirectory) out.push(...await readRefs(fs, `${dir}/${e.name}`, `${name}/`, depth + 1));
    else out.push([name, (await fs.readText(`${dir}/${e.name}`))?.trim() ?? ""]);
  }
  return out;
}

async function collectBlobs(
  fs: CacheFs,
  blobsDir: string,
  dir: string,
  prefix: string,
  blobs: Map<string, number>,
  depth: number,
): Promise<void> {
  if (depth > MAX_DEPTH) return;
  for (const e of await fs.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) {
      await collectBlobs(fs, blobsDir, path, `${prefix}${e.name}/`, blobs, depth + 1);
    } else if (e.isSymlink) {
      const target = await fs.readLink(path);
      const key = target?.split("/").pop();
      if (!target || !key || !target.endsWith(`blobs/${key}`)) continue;
      blobs.set(key, (await fs.lstat(`${blobsDir}/${key}`))?.size ?? 0);
    } else {
      // HF_HUB_DISABLE_SYMLINKS: the content sits in the snapshot itself.
      blobs.set(`file:${prefix}${e.name}`, (await fs.lstat(path))?.size ?? 0);
    }
  }
}

/** `repo`@`commit`, the key revisions are named by in keep sets and events. */
export function revisionKey(repo: string, commit: string): string {
  repoFolderName(repo);
  return `${repo}@${commit}`;
}
