/**
 * A shard's directory and the pid file in it, owner-only (design §9): the
 * engine's log (SGLang prints its key there), its key files and its pid
 * file (a `flag` engine's key is in its recorded command line) live there.
 * An older agent's were 0755 and 0644, so they are narrowed. A directory
 * that cannot be narrowed (not the agent's, a file system without modes)
 * is warned about and used: the key and pid files are 0600 by themselves
 * and the log is narrowed (shard_log.ts), and a shard that ran before must
 * not stop starting over a mode.
 *
 * @module
 */
import { join } from "node:path";
import {
  type Chmod,
  createOwnerOnlyDir,
  type Narrowing,
  narrowToOwner,
  octalMode,
} from "../http/secret_file.ts";

/** The pid file's name in a shard's directory. */
export const PID_FILE = "pid.json";

/** The fixed temporary name an older agent wrote its pid file through. */
const LEGACY_PID_TEMPORARY = "pid.json.tmp";

/**
 * Creates the shard's directory (0700), or narrows an older agent's.
 * Returns a warning when it stays wider than owner-only, else null.
 *
 * @throws {Error} When it cannot be created: nothing can be written there.
 */
export function prepareShardDir(dir: string, chmod: Chmod): string | null {
  createOwnerOnlyDir(dir);
  return modeWarning(dir, narrowToOwner(dir, chmod));
}

/**
 * At the agent's start, an existing shard directory: itself narrowed to
 * 0700, its pid file to 0600 (an adopted run's is never rewritten), and the
 * temporary an older agent's interrupted pid file write left removed (it
 * holds the same command line). Returns a warning for each path that stays
 * wider than owner-only.
 */
export function tidyShardDir(dir: string, chmod: Chmod): string[] {
  try {
    Deno.removeSync(join(dir, LEGACY_PID_TEMPORARY));
  } catch {
    // None left, the usual case.
  }
  return [dir, join(dir, PID_FILE)]
    .map((path) => modeWarning(path, narrowToOwner(path, chmod)))
    .filter((w) => w !== null);
}

/** The operator's warning for a path left wider than owner-only; null when narrowed or already so. */
export function modeWarning(path: string, narrowing: Narrowing | null): string | null {
  if (narrowing === null || narrowing.error === null) return null;
  const want = octalMode(narrowing.was & 0o700);
  return `${path} is ${
    octalMode(narrowing.was)
  } and cannot be narrowed to ${want} (${narrowing.error}); ` +
    `it may hold engine keys and logs, so make it ${want} (chmod ${want.slice(1)} ${path})`;
}
