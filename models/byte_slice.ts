/**
 * Exactly the bytes asked for, out of a stream that may hold more (a server
 * that ignored `Range` and sent the whole file) or fewer (a transfer cut
 * midway). A {@link ByteSource} never yields more than it was asked for, and
 * a short stream errors rather than ending quietly, so the cache never
 * mistakes a cut transfer for a finished range.
 *
 * It also sets the size of the pieces the model cache handles: a fetch body
 * over TLS comes in pieces of one TLS record (16 KiB), and each piece cost
 * a fresh buffer, a stream step, a rate-limit take and a file write, about
 * half the receiver's CPU (docs/benchmarks.md "Peer route CPU per GiB").
 * Bytes are read straight into pieces of up to {@link PIECE_BYTES} (a BYOB
 * read, where the source is a byte stream, as fetch bodies are), so each
 * of those steps runs once per piece, not once per record.
 *
 * @module
 */

/**
 * The largest piece yielded: per-piece work is small beside its bytes, and
 * the piece is still in the CPU's cache when it is copied on into the page
 * cache (1 MiB pieces cost twice the system CPU of 256 KiB ones here).
 */
export const PIECE_BYTES = 256 * 1024;

/**
 * Reads into `view`: the filled part, a view of the same or a transferred
 * buffer (empty at the end, with `done`).
 */
type Fill = (
  view: Uint8Array<ArrayBuffer>,
) => Promise<{ bytes: Uint8Array<ArrayBuffer>; done: boolean }>;

/** A {@link Fill} over `source`: BYOB when it is a byte stream, else copies from its pieces. */
function filler(
  source: ReadableStream<Uint8Array>,
): { fill: Fill; cancel(reason?: unknown): Promise<void> } {
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = source.getReader({ mode: "byob" });
  } catch {
    // Not a byte stream (a test's or an adapter's): copy from its own pieces.
  }
  if (byob !== null) {
    const reader = byob;
    return {
      fill: async (view) => {
        const { done, value } = await reader.read(view);
        // Only a cancelled stream answers without the buffer: its bytes are gone with it.
        if (value === undefined) throw new Error("the stream was cancelled");
        return { bytes: value as Uint8Array<ArrayBuffer>, done };
      },
      cancel: (reason) => reader.cancel(reason),
    };
  }
  const reader = source.getReader();
  let rest: Uint8Array = new Uint8Array(0);
  return {
    fill: async (view) => {
      // Ends: an empty piece is skipped, and every read either ends or moves the source on.
      while (rest.byteLength === 0) {
        const { done, value } = await reader.read();
        if (done) return { bytes: view.subarray(0, 0), done: true };
        rest = value;
      }
      const n = Math.min(rest.byteLength, view.byteLength);
      view.set(rest.subarray(0, n));
      rest = rest.subarray(n);
      return { bytes: view.subarray(0, n), done: false };
    },
    cancel: (reason) => reader.cancel(reason),
  };
}

/**
 * The `length` bytes of `source` after its first `skip` bytes, in pieces
 * of up to {@link PIECE_BYTES}. Once they have passed, the rest of `source`
 * is cancelled (its connection freed); if `source` ends before, the stream
 * errors with `short(received)`; if reading `source` fails, with
 * `broken(error)`. Bytes received before the source ended are yielded
 * first; those of the piece being filled when it broke are not.
 */
export function byteSlice(
  source: ReadableStream<Uint8Array>,
  skip: number,
  length: number,
  short: (received: number) => Error,
  broken: (e: unknown) => unknown = (e) => e,
): ReadableStream<Uint8Array> {
  const reader = filler(source);
  let toSkip = skip;
  let left = length;
  let failure: { error: unknown } | null = null;
  const finish = async (controller: ReadableStreamDefaultController<Uint8Array>) => {
    controller.close();
    await reader.cancel().catch(() => {});
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (failure !== null) return controller.error(failure.error);
      if (left === 0) return await finish(controller);
      // Skipped bytes (a 200 for a range) go through a scratch buffer, dropped.
      for (let scratch = new ArrayBuffer(0); toSkip > 0;) {
        if (scratch.byteLength === 0) scratch = new ArrayBuffer(Math.min(toSkip, PIECE_BYTES));
        let got;
        try {
          got = await reader.fill(new Uint8Array(scratch, 0, Math.min(toSkip, scratch.byteLength)));
        } catch (e) {
          return controller.error(broken(e));
        }
        if (got.done) return controller.error(short(0));
        scratch = got.bytes.buffer;
        toSkip -= got.bytes.byteLength;
      }
      let buffer = new ArrayBuffer(Math.min(left, PIECE_BYTES));
      let filled = 0;
      // Ends: each read adds at least one byte, ends the stream or fails.
      while (filled < buffer.byteLength) {
        let got;
        try {
          got = await reader.fill(new Uint8Array(buffer, filled, buffer.byteLength - filled));
        } catch (e) {
          // A failed BYOB read keeps the buffer: this piece's bytes are asked again elsewhere.
          filled = 0;
          failure = { error: broken(e) };
          break;
        }
        buffer = got.bytes.buffer;
        filled += got.bytes.byteLength;
        if (got.done) {
          failure = { error: short(length - left + filled) };
          break;
        }
      }
      if (filled === 0 && failure !== null) return controller.error(failure.error);
      left -= filled;
      // What came before the source ended short is delivered; the error follows on the next pull.
      controller.enqueue(new Uint8Array(buffer, 0, filled));
      if (left === 0) await finish(controller);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
