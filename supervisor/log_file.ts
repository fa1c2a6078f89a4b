/**
 * A shard's full log on disk (design §9.4). The engine writes to the file
 * itself (its stdout and stderr are the file, opened for append), so it
 * keeps logging, and keeps running, when the agent restarts: a pipe to a dead
 * agent would give it SIGPIPE. The supervisor follows the file for the
 * in-memory tail and rotates it by copy-and-truncate, which an appending
 * writer survives.
 *
 * @module
 */

/** Reads what was appended to a file since the last read. */
export class LogFollower {
  /** The followed file. */
  readonly path: string;
  #offset: number;
  readonly #decoder = new TextDecoder();

  /** Follows `path` from `offset` (0: the whole file; use the size to skip history). */
  constructor(path: string, offset = 0) {
    this.path = path;
    this.#offset = offset;
  }

  /** New text since the last call, at most `maxBytes` of it; "" when nothing new. */
  read(maxBytes = 1 << 20): string {
    let file: Deno.FsFile | undefined;
    try {
      file = Deno.openSync(this.path, { read: true });
      const size = file.statSync().size;
      // The file was truncated (rotated): start again from its beginning.
      if (size < this.#offset) this.#offset = 0;
      if (size === this.#offset) return "";
      // Far behind (a flood): skip to the last maxBytes rather than read it all.
      if (size - this.#offset > maxBytes) this.#offset = size - maxBytes;
      file.seekSync(this.#offset, Deno.SeekMode.Start);
      const buf = new Uint8Array(size - this.#offset);
      let filled = 0;
      while (filled < buf.length) {
        const n = file.readSync(buf.subarray(filled));
        if (n === null) break;
        filled += n;
      }
      this.#offset += filled;
      return this.#decoder.decode(buf.subarray(0, filled), { stream: true });
    } catch {
      return "";
    } finally {
      file?.close();
    }
  }

  /** Follows from the file's start again (after this process truncated it). */
  restart(): void {
    this.#offset = 0;
  }

  /** The byte offset read up to. */
  get offset(): number {
    return this.#offset;
  }
}

/**
 * Rotates `path` when it is larger than `maxBytes`: `path.N-1` → `path.N`
 * … `path` → `path.1` (a copy), then `path` is truncated in place, so the
 * engine's open file keeps working. Keeps `keep` old files.
 */
export function rotateIfLarge(path: string, maxBytes: number, keep: number): boolean {
  let size: number;
  try {
    size = Deno.statSync(path).size;
  } catch {
    return false;
  }
  if (size <= maxBytes) return false;
  for (let i = keep - 1; i >= 1; i--) {
    try {
      Deno.renameSync(`${path}.${i}`, `${path}.${i + 1}`);
    } catch {
      // Not there yet.
    }
  }
  if (keep >= 1) Deno.copyFileSync(path, `${path}.1`);
  Deno.truncateSync(path, 0);
  return true;
}
