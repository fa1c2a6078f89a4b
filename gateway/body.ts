/**
 * Reading a request body with a size limit (plan §12: 413 beyond it).
 *
 * @module
 */

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
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new BodyTooLarge(limit);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
