/**
 * A blob is fetched as fixed-size chunks written at their offsets; which
 * chunks are on disk is recorded beside the part file, one line per chunk,
 * appended only after the chunk's bytes were synced. After an agent restart
 * only the chunks the record does not name are fetched again.
 *
 * The record is an append-only text file:
 *
 * ```
 * llmgw-chunks 1 size=<file size> chunk=<chunk size>
 * 0
 * 3
 * 1
 * ```
 *
 * A torn record is recovered safely: a last line without its newline, a
 * line that is not a chunk number, or a header for another size or chunk
 * size makes that part of the record (or all of it) count for nothing, so
 * an uncertain chunk is fetched again, never trusted. Pure.
 *
 * @module
 */

/** One chunk: bytes `start` … `end - 1` of a file. */
export interface Chunk {
  /** Its number, from 0. */
  index: number;
  /** First byte. */
  start: number;
  /** One past the last byte. */
  end: number;
}

/** The chunks of a file of `size` bytes in chunks of `chunkSize` (the last one shorter). */
export function planChunks(size: number, chunkSize: number): Chunk[] {
  if (!(chunkSize > 0)) throw new RangeError(`Cannot plan chunks of ${chunkSize} bytes`);
  const chunks: Chunk[] = [];
  for (let start = 0, index = 0; start < size; start += chunkSize, index++) {
    chunks.push({ index, start, end: Math.min(size, start + chunkSize) });
  }
  return chunks;
}

/** The header line (with its newline) of a record for this file and chunk size. */
export function recordHeader(size: number, chunkSize: number): string {
  return `llmgw-chunks 1 size=${size} chunk=${chunkSize}\n`;
}

/** The line appended when chunk `index` is on disk. */
export function recordLine(index: number): string {
  return `${index}\n`;
}

/**
 * The chunks a record says are on disk. Null when the record cannot be
 * used at all (absent, torn header, another file size or chunk size): the
 * part file is then written again from nothing.
 */
export function parseRecord(
  text: string | null,
  size: number,
  chunkSize: number,
): Set<number> | null {
  if (text === null) return null;
  const header = recordHeader(size, chunkSize);
  if (!text.startsWith(header)) return null;
  const count = planChunks(size, chunkSize).length;
  const done = new Set<number>();
  const body = text.slice(header.length);
  // Only lines ended by their newline count: the last one may be torn.
  const complete = body.slice(0, body.lastIndexOf("\n") + 1);
  for (const line of complete.split("\n")) {
    if (!/^\d{1,15}$/.test(line)) continue;
    const index = Number(line);
    if (index < count) done.add(index);
  }
  return done;
}
