/**
 * Reading a body whole with a size limit, for every role that takes bytes
 * from a peer (the gateway's request bodies, the agent's control-plane
 * answers): memory stays bounded whatever the peer sends.
 *
 * @module
 */

/**
 * Reads `stream` whole; once more than `max` bytes arrived it cancels the
 * stream and returns null instead.
 */
export async function readLimited(
  stream: ReadableStream<Uint8Array>,
  max: number,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = stream.getReader();
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
