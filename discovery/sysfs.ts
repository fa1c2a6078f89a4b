/**
 * Small, bounded reads of sysfs attribute files (design §5.5: the root is a
 * seam, so tests and the demo read fixture trees on the production path).
 *
 * @module
 */
import { errorMessage } from "../text/error_message.ts";
import { compareNatural } from "../text/natural_order.ts";

/** Sysfs attributes are short; anything longer is not what we expect. */
const MAX_ATTRIBUTE_BYTES = 4096;

/** A failed read, with the reason in words (never thrown past the reader). */
export interface ReadFailure {
  error: string;
}

/**
 * Reads at most 4 KiB of a sysfs attribute file and trims it. Returns a
 * {@link ReadFailure} instead of throwing: one bad file is a per-item problem,
 * never fatal to the inventory.
 */
export async function readAttribute(path: string): Promise<string | ReadFailure> {
  let file: Deno.FsFile | undefined;
  try {
    file = await Deno.open(path, { read: true });
    const buf = new Uint8Array(MAX_ATTRIBUTE_BYTES + 1);
    let filled = 0;
    while (filled < buf.length) {
      const n = await file.read(buf.subarray(filled));
      if (n === null) break;
      filled += n;
    }
    if (filled > MAX_ATTRIBUTE_BYTES) {
      return { error: `longer than ${MAX_ATTRIBUTE_BYTES} bytes` };
    }
    const text = new TextDecoder("utf-8", { fatal: false }).decode(buf.subarray(0, filled));
    return text.trim();
  } catch (e) {
    return { error: describeFsError(e) };
  } finally {
    file?.close();
  }
}

/** Lists a directory's entry names, sorted; `null` when it does not exist. */
export async function listDir(path: string, limit = 1024): Promise<string[] | ReadFailure | null> {
  try {
    const names: string[] = [];
    for await (const entry of Deno.readDir(path)) {
      names.push(entry.name);
      if (names.length > limit) return { error: `more than ${limit} entries` };
    }
    return names.sort(compareNatural);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    return { error: describeFsError(e) };
  }
}

/** Resolves a symlink to its final path; `null` when it cannot. */
export async function resolvePath(path: string): Promise<string | null> {
  try {
    return await Deno.realPath(path);
  } catch {
    return null;
  }
}

/** True when the value is a read failure. */
export function isFailure(v: unknown): v is ReadFailure {
  return typeof v === "object" && v !== null && "error" in v;
}

/** Reads a `numa_node` file: `-1` (no NUMA information) is `null`. */
export async function readNumaNode(path: string): Promise<number | null | ReadFailure> {
  const v = await readAttribute(path);
  if (isFailure(v)) return v;
  if (!/^-?\d+$/.test(v)) return { error: `not an integer: ${JSON.stringify(v.slice(0, 40))}` };
  const n = Number(v);
  return n < 0 ? null : n;
}

function describeFsError(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "missing";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (e instanceof Deno.errors.IsADirectory) return "is a directory, not a file";
  return errorMessage(e);
}
