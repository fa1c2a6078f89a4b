/**
 * Exactly the bytes asked for, out of a stream that may hold more (a server
 * that ignored `Range` and sent the whole file) or fewer (a transfer cut
 * midway). A {@link ByteSource} never yields more than it was asked for, and
 * a short stream errors rather than ending quietly, so the cache never
 * mistakes a cut transfer for a finished range.
 *
 * @module
 */

/**
 * The `length` bytes of `source` after its first `skip` bytes. Once they
 * have passed, the rest of `source` is cancelled (its connection freed); if
 * `source` ends before, the stream errors with `short(received)`; if
 * reading `source` fails, with `broken(error)`.
 */
export function byteSlice(
  source: ReadableStream<Uint8Array>,
  skip: number,
  length: number,
  short: (received: number) => Error,
  broken: (e: unknown) => unknown = (e) => e,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let toSkip = skip;
  let left = length;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (left === 0) {
        controller.close();
        await reader.cancel().catch(() => {});
        return;
      }
      for (;;) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (e) {
          controller.error(broken(e));
          return;
        }
        const { done, value } = next;
        if (done) {
          controller.error(short(length - left));
          return;
        }
        let chunk = value;
        if (toSkip > 0) {
          const dropped = Math.min(toSkip, chunk.byteLength);
          toSkip -= dropped;
          chunk = chunk.subarray(dropped);
        }
        if (chunk.byteLength === 0) continue;
        if (chunk.byteLength > left) chunk = chunk.subarray(0, left);
        left -= chunk.byteLength;
        controller.enqueue(chunk);
        if (left === 0) {
          controller.close();
          await reader.cancel().catch(() => {});
        }
        return;
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
