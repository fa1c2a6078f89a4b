/**
 * Reading a request body with a size limit (design §12: 413 beyond it).
 *
 * @module
 */
import { readLimited } from "../http/read_limited.ts";

/** The body was larger than the limit. */
export class BodyTooLarge extends Error {
  /** Creates the error for `limit` bytes. */
  constructor(readonly limit: number) {
    super(`request body is larger than ${limit} bytes`);
    this.name = "BodyTooLarge";
  }
}

/**
 * Reads `req`'s body into memory, refusing (with {@link BodyTooLarge}) a
 * declared `Content-Length` above `limit` before reading, and stopping as soon
 * as more than `limit` bytes arrived otherwise.
 */
export async function readBodyLimited(
  req: Request,
  limit: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge(limit);
  if (req.body === null) return new Uint8Array(0);
  // A declared length within the limit: one native read (the hot path).
  if (Number.isFinite(declared)) return new Uint8Array(await req.arrayBuffer());
  const bytes = await readLimited(req.body, limit);
  if (bytes === null) throw new BodyTooLarge(limit);
  return bytes;
}
