/**
 * The disk space a directory tree takes, as `du` counts it (allocated
 * blocks, not apparent sizes: a Triton or Inductor cache is thousands of
 * small files, each taking at least a block). Links are not followed. The
 * walk is bounded in depth, in entries and, when given one, in time, and
 * stops between two entries once its signal is aborted (a stopping agent),
 * so a runaway tree or a slow file system costs a bounded time. A walk cut
 * short says so: what lies beyond the bounds is not counted, and its bytes
 * are then only a lower bound.
 *
 * @module
 */

/** Deepest level walked. */
const MAX_DEPTH = 64;
/** Most entries looked at in one walk. */
const MAX_ENTRIES = 1_000_000;

/** When a walk stops: once `now()` passes `stopAtMs`. */
export interface WalkDeadline {
  now: () => number;
  stopAtMs: number;
}

/** What a walk counted. */
export interface TreeBytes {
  /** Bytes allocated under the directory, as far as the walk went. */
  bytes: number;
  /** False when a bound or the signal cut the walk short: `bytes` is then a lower bound. */
  complete: boolean;
}

/**
 * Bytes allocated under `dir` (0 when it is absent), counted until
 * `deadline` if given, or until `signal` is aborted.
 */
export async function treeBytes(
  dir: string,
  deadline?: WalkDeadline,
  signal?: AbortSignal,
): Promise<TreeBytes> {
  let total = 0;
  let seen = 0;
  let complete = true;
  const over = () =>
    ++seen > MAX_ENTRIES || signal?.aborted === true ||
    (deadline !== undefined && deadline.now() > deadline.stopAtMs);
  const walk = async (path: string, depth: number): Promise<void> => {
    try {
      for await (const e of Deno.readDir(path)) {
        if (over()) {
          complete = false;
          return;
        }
        const child = `${path}/${e.name}`;
        const s = await lstatOrNull(child);
        if (s === null) continue;
        total += s.blocks === null ? s.size : s.blocks * 512;
        if (!e.isDirectory) continue;
        if (depth < MAX_DEPTH) await walk(child, depth + 1);
        else complete = false;
      }
    } catch (e) {
      // Removed while walked: what is gone takes no space.
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  };
  await walk(dir, 0);
  return { bytes: total, complete };
}

async function lstatOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.lstat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
