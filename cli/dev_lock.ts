/**
 * The lock on a `llmgw dev` directory: one cluster per directory. Two
 * clusters on one directory share a store, agents' pid files and `dev.env`:
 * the second rewrote the first's admin token and restarted its engines.
 *
 * The lock is the kernel's (flock through `Deno.FsFile.tryLockSync`) on
 * `DIR/dev.lock`, held open while dev runs. The kernel drops it when the
 * process ends however it ends, `kill -9` included, so no stale lock ever
 * blocks a later start and no start time has to be compared. The file's
 * text (pid, port, start) only names the holder in the refusal.
 *
 * @module
 */
import { join } from "node:path";
import { errorMessage } from "../text/error_message.ts";

/** The lock file inside a dev directory. */
export const DEV_LOCK_FILE = "dev.lock";

/** Who holds a dev directory, as its lock file says. */
export interface DevLockHolder {
  /** The dev process. */
  pid: number;
  /** Its `--port`. */
  port: number;
  /** When it took the lock (ms since the epoch). */
  started_at: number;
}

/** Another `llmgw dev` holds the directory; the message names its pid and port. */
export class DevLockedError extends Error {
  /** The holder, when its lock file could be read. */
  readonly holder: DevLockHolder | null;

  /** Creates the error for `dir`, held by `holder` (null: the file said nothing readable). */
  constructor(dir: string, holder: DevLockHolder | null) {
    super(
      `already running on this directory: ${
        holder === null ? "another llmgw dev" : `pid ${holder.pid}, port ${holder.port}`
      } (${dir}); stop it first, or give this one another --dir`,
    );
    this.name = "DevLockedError";
    this.holder = holder;
  }
}

/** The lock file cannot be opened or locked at all (permissions, a filesystem without locks). */
export class DevLockError extends Error {
  /** Creates the error for the lock file `path`. */
  constructor(path: string, cause: unknown) {
    super(`Cannot lock ${path}: ${errorMessage(cause)}`, {
      cause,
    });
    this.name = "DevLockError";
  }
}

/** A held lock: release it when dev stops (the kernel also does when the process ends). */
export interface DevLock {
  /** The lock file. */
  readonly path: string;
  /** Releases the lock; a second call does nothing. */
  release(): void;
}

/** The holder a lock file's text names, or null when it names none. */
export function parseDevLockHolder(text: string): DevLockHolder | null {
  try {
    const v = JSON.parse(text);
    const whole = (n: unknown) => typeof n === "number" && Number.isSafeInteger(n) && n > 0;
    return whole(v?.pid) && whole(v?.port) && whole(v?.started_at)
      ? { pid: v.pid, port: v.port, started_at: v.started_at }
      : null;
  } catch {
    return null;
  }
}

/**
 * Takes the exclusive lock on `dir` (which must exist) for a dev on `port`,
 * or throws {@link DevLockedError} naming the holder. Never blocks.
 *
 * @throws {DevLockError} When the lock file cannot be opened or locked.
 */
export function acquireDevLock(dir: string, port: number, now = Date.now()): DevLock {
  const path = join(dir, DEV_LOCK_FILE);
  let file: Deno.FsFile;
  try {
    // Not truncated on open: the holder's text must survive a refused start.
    file = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o600 });
  } catch (e) {
    throw new DevLockError(path, e);
  }
  let locked = false;
  try {
    try {
      locked = file.tryLockSync(true);
    } catch (e) {
      throw new DevLockError(path, e);
    }
    if (!locked) {
      throw new DevLockedError(dir, parseDevLockHolder(Deno.readTextFileSync(path)));
    }
    const holder: DevLockHolder = { pid: Deno.pid, port, started_at: now };
    file.truncateSync(0);
    file.writeSync(new TextEncoder().encode(JSON.stringify(holder) + "\n"));
  } catch (e) {
    if (locked) file.unlockSync();
    file.close();
    throw e;
  }
  let released = false;
  return {
    path,
    release() {
      if (released) return;
      released = true;
      // The text is left: a lock file nobody holds names nobody, whatever it says.
      file.unlockSync();
      file.close();
    },
  };
}
