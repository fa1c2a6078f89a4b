/**
 * Reading a body whole with a size limit, for every role that takes bytes
 * from a peer (the gateway's request bodies and engines' short answers, the
 * agent's control-plane answers, the control plane's log fetches): memory
 * stays bounded whatever the peer sends. The one bounded read, over the one
 * body-reader shape.
 *
 * @module
 */

/**
 * What a body is read through: a stream's reader, or the gateway's upstream
 * client's body (gateway/upstream_client.ts), which has the same two calls.
 */
export interface BodyReader {
  /** The next chunk; `done` at the end. Rejects when the peer broke the body off. */
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  /** Stops reading and lets go of the peer. */
  cancel(reason?: unknown): Promise<void>;
}

/**
 * Reads `body` whole; once more than `max` bytes arrived it cancels the body
 * and returns null instead. A body broken off rejects, as its reader does.
 */
export async function readLimited(
  body: ReadableStream<Uint8Array> | BodyReader,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const reader = body instanceof ReadableStream ? body.getReader() : body;
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return null;
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
