/**
 * Secrets kept in files readable by their owner only (0600): the agent's
 * tokens and each shard's engine key, and the owner-only (0700) directories
 * that hold them. Written atomically, so a crash never leaves half a secret.
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import { errorMessage } from "../text/error_message.ts";

/**
 * Writes `text` to `path` with mode 0600, atomically: a new temporary file
 * next to it (created exclusively, so never through a link planted at its
 * name), flushed to disk, then renamed over `path`, which replaces whatever
 * `path` was (a symlink included) rather than writing through it; the
 * directory is flushed after the rename, so the new name survives a power
 * loss. Temporary copies a crash left behind are removed first: each holds
 * the secret.
 */
export function writeSecretFile(path: string, text: string): void {
  sweepTemporaries(path);
  const tmp = `${path}${TMP_INFIX}${crypto.randomUUID()}`;
  try {
    const file = Deno.openSync(tmp, { write: true, createNew: true, mode: 0o600 });
    try {
      const data = new TextEncoder().encode(text);
      for (let done = 0; done < data.length;) done += file.writeSync(data.subarray(done));
      file.syncSync();
    } finally {
      file.close();
    }
    Deno.chmodSync(tmp, 0o600); // mode is masked by the umask on creation
    Deno.renameSync(tmp, path);
  } catch (e) {
    try {
      Deno.removeSync(tmp);
    } catch {
      // Never written.
    }
    throw e;
  }
  syncDirectory(dirname(path));
}

/** What a temporary copy's name adds to the path: `.tmp-` and a UUID. */
const TMP_INFIX = ".tmp-";

/**
 * How old a temporary copy must be to count as a crash's leftover: another
 * process writing the same secret right now (a second agent, a CLI) holds
 * its temporary for milliseconds, and removing it would fail its rename.
 */
export const STALE_TEMPORARY_MS = 60_000;

/** Removes the temporary copies of `path` an interrupted {@link writeSecretFile} left. */
function sweepTemporaries(path: string): void {
  const prefix = basename(path) + TMP_INFIX;
  const before = Date.now() - STALE_TEMPORARY_MS; // file times are the real clock's
  try {
    for (const entry of Deno.readDirSync(dirname(path))) {
      if (!entry.name.startsWith(prefix)) continue;
      const tmp = join(dirname(path), entry.name);
      try {
        const mtime = Deno.lstatSync(tmp).mtime?.getTime();
        if (mtime === undefined || mtime > before) continue;
        Deno.removeSync(tmp);
      } catch {
        // Gone already, or not ours to remove: the write goes on.
      }
    }
  } catch {
    // No directory yet: the write says so.
  }
}

/** Flushes a directory's entries (a rename in it) to disk, where the file system allows. */
function syncDirectory(dir: string): void {
  let handle: Deno.FsFile | undefined;
  try {
    handle = Deno.openSync(dir, { read: true });
    handle.syncSync();
  } catch {
    // Some file systems refuse to open or fsync a directory; the rename stands.
  } finally {
    handle?.close();
  }
}

/** Changes a path's mode (Deno.chmodSync); injectable so tests can make it fail. */
export type Chmod = (path: string, mode: number) => void;

/** A path that had group or other bits: the mode it had, and why it still has them (null once narrowed). */
export interface Narrowing {
  /** Its permission bits before. */
  was: number;
  /** Why it could not be narrowed (EPERM: not its owner; a file system without modes), or null. */
  error: string | null;
}

/**
 * Creates `path` as a directory only its owner can enter (0700), its
 * missing parents too. One that exists already is left as it is (see
 * {@link narrowToOwner}).
 *
 * @throws {Error} When it cannot be created.
 */
export function createOwnerOnlyDir(path: string): void {
  Deno.mkdirSync(path, { recursive: true, mode: 0o700 });
}

/**
 * Takes the group and other bits off `path` (a directory 0755 becomes 0700,
 * a file 0644 becomes 0600). Never throws: the caller decides whether a path
 * it could not narrow is worth a warning. Null when there was nothing to do
 * (already owner-only, or no such path).
 */
export function narrowToOwner(path: string, chmod: Chmod = Deno.chmodSync): Narrowing | null {
  let was: number;
  try {
    was = (Deno.statSync(path).mode ?? 0o700) & 0o777;
  } catch {
    return null;
  }
  if ((was & 0o077) === 0) return null;
  try {
    chmod(path, was & 0o700);
    return { was, error: null };
  } catch (e) {
    return { was, error: errorMessage(e) };
  }
}

/** A mode as `ls`-style octal: `0755`. */
export function octalMode(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, "0")}`;
}

/** The secret kept in `path`, or null when there is none (or it is too short to be one). */
export function readSecretFile(path: string): string | null {
  try {
    const existing = Deno.readTextFileSync(path).trim();
    return existing.length >= 16 ? existing : null;
  } catch {
    return null;
  }
}

/** 32 random bytes, URL-safe base64 without padding: fits a Bearer header unquoted. */
export function randomSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** A random secret kept in `path` (0600): read when there, else generated and written. */
export function loadOrCreateSecret(path: string): string {
  const existing = readSecretFile(path);
  if (existing !== null) return existing;
  const secret = randomSecret();
  writeSecretFile(path, secret + "\n");
  return secret;
}
