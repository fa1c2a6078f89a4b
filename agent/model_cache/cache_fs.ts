/**
 * The model cache's one seam to the file system: every write, rename, link
 * and free-space question goes through {@link CacheFs}, so a test can make
 * the disk fill up at a chosen byte (ENOSPC) or watch every rename, and the
 * download logic stays free of `Deno.*` calls.
 *
 * @module
 */
import { statfs } from "node:fs/promises";
import { dirname } from "node:path";
import { readTextIfPresent } from "../../models/read_text_if_present.ts";

/** What {@link CacheFs.lstat} says about a path (the link itself, not its target). */
export interface CacheStat {
  /** Size in bytes. */
  size: number;
  /** Last modification, ms since the epoch (0 when unknown). */
  mtimeMs: number;
  /** A regular file. */
  isFile: boolean;
  /** A symbolic link. */
  isSymlink: boolean;
}

/** Writes one chunk's bytes in order from where it was opened. */
export interface ChunkWriter {
  /** Writes all of `bytes` at the current position. */
  write(bytes: Uint8Array): Promise<void>;
  /** Makes what this writer wrote durable. */
  sync(): Promise<void>;
  /** Releases the handle; safe to call twice. */
  close(): void;
}

/** The file operations the cache needs. Paths are absolute. */
export interface CacheFs {
  /** Creates `path` and its parents; fine when it exists. */
  mkdirp(path: string): Promise<void>;
  /** The entry at `path` without following a link; null when absent. */
  lstat(path: string): Promise<CacheStat | null>;
  /** The target a symlink holds; null when `path` is absent or no link. */
  readLink(path: string): Promise<string | null>;
  /** Creates a symlink at `path` holding `target`. */
  symlink(target: string, path: string): Promise<void>;
  /** Renames `from` over `to` in one step (same file system). */
  rename(from: string, to: string): Promise<void>;
  /** Removes a file or link; fine when absent. */
  remove(path: string): Promise<void>;
  /** The whole text of `path`; null when absent. */
  readText(path: string): Promise<string | null>;
  /** Writes `text` to `path` through a temporary file and a rename. */
  writeTextAtomic(path: string, text: string): Promise<void>;
  /** Appends `text` to `path` (created when absent) and syncs it to disk. */
  appendSynced(path: string, text: string): Promise<void>;
  /**
   * A writer at `offset` of `path` (created when absent, never truncated);
   * each writer has its own position, so parallel chunks never share one.
   */
  openAt(path: string, offset: number): Promise<ChunkWriter>;
  /** The content of `path`, streamed (for hashing). */
  readStream(path: string): Promise<ReadableStream<Uint8Array>>;
  /** Bytes free to an unprivileged writer on the file system holding `path` (or its nearest existing parent). */
  freeBytes(path: string): Promise<number>;
  /** The size of that file system and the bytes free on it, as {@link freeBytes} counts them. */
  diskUsage(path: string): Promise<DiskUsage>;
  /** The entries of a directory; empty when it is absent. */
  readDir(path: string): Promise<DirEntry[]>;
  /** Removes a directory and everything under it; fine when absent. */
  removeTree(path: string): Promise<void>;
}

/** A file system's size and free bytes. */
export interface DiskUsage {
  totalBytes: number;
  freeBytes: number;
}

/** One entry of {@link CacheFs.readDir}. */
export interface DirEntry {
  name: string;
  isDirectory: boolean;
  isSymlink: boolean;
}

/** True for a "no space left on device" error, however the runtime words it. */
export function isNoSpace(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return code === "ENOSPC" || (e instanceof Error && /os error 28\b/.test(e.message));
}

async function ignoreNotFound(work: Promise<void>): Promise<void> {
  try {
    await work;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
}

let tempCounter = 0;

/** A temporary name beside `path`, unique in this process. */
export function tempSibling(path: string): string {
  tempCounter += 1;
  return `${path}.llmgw-tmp-${Deno.pid}-${tempCounter}`;
}

/** The real file system. */
export const denoCacheFs: CacheFs = {
  mkdirp: (path) => Deno.mkdir(path, { recursive: true }),
  async lstat(path) {
    try {
      const s = await Deno.lstat(path);
      return {
        size: s.size,
        mtimeMs: s.mtime?.getTime() ?? 0,
        isFile: s.isFile,
        isSymlink: s.isSymlink,
      };
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return null;
      throw e;
    }
  },
  async readLink(path) {
    try {
      return await Deno.readLink(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.InvalidData) return null;
      // Linux answers EINVAL for a path that is not a link.
      if ((e as { code?: unknown }).code === "EINVAL") return null;
      throw e;
    }
  },
  symlink: (target, path) => Deno.symlink(target, path),
  rename: (from, to) => Deno.rename(from, to),
  remove: (path) => ignoreNotFound(Deno.remove(path)),
  readText: readTextIfPresent,
  async writeTextAtomic(path, text) {
    const temp = tempSibling(path);
    try {
      await Deno.writeTextFile(temp, text);
      await Deno.rename(temp, path);
    } finally {
      await ignoreNotFound(Deno.remove(temp));
    }
  },
  async appendSynced(path, text) {
    const file = await Deno.open(path, { append: true, create: true });
    try {
      const bytes = new TextEncoder().encode(text);
      let done = 0;
      while (done < bytes.length) done += await file.write(bytes.subarray(done));
      await file.syncData();
    } finally {
      file.close();
    }
  },
  async openAt(path, offset) {
    const file = await Deno.open(path, { write: true, create: true });
    let open = true;
    try {
      await file.seek(offset, Deno.SeekMode.Start);
    } catch (e) {
      file.close();
      throw e;
    }
    return {
      async write(bytes) {
        let done = 0;
        while (done < bytes.length) done += await file.write(bytes.subarray(done));
      },
      sync: () => file.syncData(),
      close() {
        if (open) file.close();
        open = false;
      },
    };
  },
  async readStream(path) {
    const file = await Deno.open(path, { read: true });
    return file.readable;
  },
  async freeBytes(path) {
    return (await diskUsageOf(path)).freeBytes;
  },
  diskUsage: (path) => diskUsageOf(path),
  async readDir(path) {
    try {
      const out: DirEntry[] = [];
      for await (const e of Deno.readDir(path)) {
        out.push({ name: e.name, isDirectory: e.isDirectory, isSymlink: e.isSymlink });
      }
      return out;
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return [];
      throw e;
    }
  },
  removeTree: (path) => ignoreNotFound(Deno.remove(path, { recursive: true })),
};

async function diskUsageOf(path: string): Promise<DiskUsage> {
  // Deno has no statfs of its own; node:fs's is there in Deno 2.
  let at = path;
  for (let i = 0; i < 256; i++) {
    try {
      const s = await statfs(at);
      const block = Number(s.bsize);
      return { totalBytes: Number(s.blocks) * block, freeBytes: Number(s.bavail) * block };
    } catch (e) {
      const parent = dirname(at);
      if ((e as { code?: unknown }).code !== "ENOENT" || parent === at) throw e;
      at = parent;
    }
  }
  throw new Error(`Cannot find free space for ${path}: no existing parent`);
}
