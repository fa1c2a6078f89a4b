/**
 * The disk space a directory tree takes, as `du` counts it (allocated
 * blocks, not apparent sizes: a Triton or Inductor cache is thousands of
 * small files, each taking at least a block). Links are not followed. The
 * walk is bounded in depth, in entries and, when given one, in time, so a
 * runaway tree or a slow file system costs a bounded time; what lies beyond
 * the bounds is not counted.
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

/** Bytes allocated under `dir` (0 when it is absent), counted until `deadline` if given. */
export async function treeBytes(dir: string, deadline?: WalkDeadline): Promise<number> {
  let total = 0;
  let seen = 0;
  const over = () =>
    ++seen > MAX_ENTRIES || (deadline !== undefined && deadline.now() > deadline.stopAtMs);
  const walk = async (path: string, depth: number): Promise<void> => {
    try {
      for await (const e of Deno.readDir(path)) {
        if (over()) return;
        const child = `${path}/${e.name}`;
        const s = await lstatOrNull(child);
        if (s === null) continue;
        total += s.blocks === null ? s.size : s.blocks * 512;
        if (e.isDirectory && depth < MAX_DEPTH) await walk(child, depth + 1);
      }
    } catch (e) {
      // Removed while walked: what is gone takes no space.
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  };
  await walk(dir, 0);
  return total;
}

async function lstatOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.lstat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
