/**
 * Secrets kept in files readable by their owner only (0600): the agent's
 * tokens and each shard's engine key, and the owner-only (0700) directories
 * that hold them. Written atomically, so a crash never leaves half a secret.
 *
 * @module
 */
import { basename, dirname, join } from "node:path";

/**
 * Writes `text` to `path` with mode 0600, atomically: a new temporary file
 * next to it (created exclusively, so never through a link planted at its
 * name), flushed to disk, then renamed over `path`, which replaces whatever
 * `path` was (a symlink included) rather than writing through it. Temporary
 * copies a crash left behind are removed first: each holds the secret.
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
}

/** What a temporary copy's name adds to the path: `.tmp-` and a UUID. */
const TMP_INFIX = ".tmp-";

/** Removes the temporary copies of `path` an interrupted {@link writeSecretFile} left. */
function sweepTemporaries(path: string): void {
  const prefix = basename(path) + TMP_INFIX;
  try {
    for (const entry of Deno.readDirSync(dirname(path))) {
      if (!entry.name.startsWith(prefix)) continue;
      try {
        Deno.removeSync(join(dirname(path), entry.name));
      } catch {
        // Gone already, or not ours to remove: the write goes on.
      }
    }
  } catch {
    // No directory yet: the write says so.
  }
}

/**
 * Makes `path` a directory only its owner can enter (0700): created so, or
 * narrowed when it exists with group or other bits. Returns the mode it had
 * when it was narrowed, else null.
 *
 * @throws {Error} When it cannot be created or narrowed.
 */
export function ownerOnlyDir(path: string): number | null {
  Deno.mkdirSync(path, { recursive: true, mode: 0o700 });
  const mode = (Deno.statSync(path).mode ?? 0o700) & 0o777;
  if ((mode & 0o077) === 0) return null;
  Deno.chmodSync(path, mode & 0o700);
  return mode;
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
