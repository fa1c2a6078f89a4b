/**
 * Relaying an upstream response body to the client chunk by chunk, never
 * buffered (design §12: SSE streams pass through), and noticing how it ended.
 *
 * @module
 */

/** How a relayed body ended. */
export type RelayEnd =
  /** The upstream body finished. */
  | "done"
  /** Reading the upstream failed (it died mid-stream). */
  | "error"
  /** The client went away (the response body was cancelled). */
  | "cancelled";

/** Settings of {@link relayBody}. */
export interface RelayOptions {
  /**
   * Whether the body is Server-Sent Events: then an upstream failure ends
   * the client's stream with an error event instead of a broken connection.
   */
  sse: boolean;
  /** Called once, when the body ends, with how and (for "error") why. */
  onEnd(end: RelayEnd, error?: unknown): void;
  /** Called once, with the first chunk of the body (time to first token, for metrics). */
  onFirstChunk?: () => void;
}

const encoder = new TextEncoder();

/** The SSE event that ends a stream whose upstream died (OpenAI error shape). */
export function sseErrorEvent(message: string): Uint8Array {
  const body = {
    error: { message, type: "server_error", param: null, code: "upstream_stream_error" },
  };
  return encoder.encode(`data: ${JSON.stringify(body)}\n\n`);
}

/** Where a relayed body comes from: a stream reader, or the upstream client's body. */
export interface ChunkSource {
  /** The next chunk; rejects when the upstream failed. */
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  /** Stops reading and lets go of the upstream. */
  cancel(reason?: unknown): Promise<void>;
}

/**
 * A stream that passes on every chunk of `reader` as soon as it arrives. If
 * the upstream fails mid-stream: for SSE, the stream gets (after a blank line
 * that ends any half-sent event) an error event and closes normally; else it
 * errors. Cancelling the returned stream (the client went away) cancels
 * `reader`.
 */
export function relayBody(
  reader: ChunkSource,
  options: RelayOptions,
): ReadableStream<Uint8Array> {
  let ended = false;
  const end = (how: RelayEnd, error?: unknown) => {
    if (ended) return;
    ended = true;
    options.onEnd(how, error);
  };
  // The last two bytes sent, to know whether an SSE event is half-sent.
  let tail = "\n\n";
  let seenFirst = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (e) {
        // A read failing because the client went away (cancel) ends nothing new.
        if (ended) return;
        end("error", e);
        if (options.sse) {
          if (!tail.endsWith("\n\n")) controller.enqueue(encoder.encode("\n\n"));
          const why = e instanceof Error ? e.message : String(e);
          controller.enqueue(sseErrorEvent(`upstream stream failed: ${why}`));
          controller.close();
        } else {
          controller.error(e);
        }
        return;
      }
      if (result.done) {
        end("done");
        controller.close();
        return;
      }
      const chunk = result.value;
      if (!seenFirst) {
        seenFirst = true;
        options.onFirstChunk?.();
      }
      if (chunk.byteLength >= 2) {
        tail = String.fromCharCode(chunk[chunk.byteLength - 2], chunk[chunk.byteLength - 1]);
      } else if (chunk.byteLength === 1) tail = tail.slice(-1) + String.fromCharCode(chunk[0]);
      controller.enqueue(chunk);
    },
    async cancel(reason) {
      end("cancelled");
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
