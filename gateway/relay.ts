/**
 * Relaying an upstream response body to the client chunk by chunk, never
 * buffered (design §12: SSE streams pass through), and noticing how it ended.
 *
 * @module
 */
import type { BodyReader } from "../http/read_limited.ts";
import { errorMessage } from "../text/error_message.ts";

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
  /**
   * Called with every chunk before it is passed on (the usage tail): in the
   * relay's own step, so watching the bytes costs no promise per chunk.
   */
  onChunk?: (chunk: Uint8Array) => void;
}

const encoder = new TextEncoder();

/** The SSE event that ends a stream whose upstream died (OpenAI error shape). */
export function sseErrorEvent(message: string): Uint8Array {
  const body = {
    error: { message, type: "server_error", param: null, code: "upstream_stream_error" },
  };
  return encoder.encode(`data: ${JSON.stringify(body)}\n\n`);
}

/**
 * A stream that passes on every chunk of `reader` as soon as it arrives. If
 * the upstream fails mid-stream: for SSE, the stream gets (after a blank line
 * that ends any half-sent event) an error event and closes normally; else it
 * errors. Cancelling the returned stream (the client went away) cancels
 * `reader`.
 */
export function relayBody(
  reader: BodyReader,
  options: RelayOptions,
): ReadableStream<Uint8Array> {
  let ended = false;
  const end = (how: RelayEnd, error?: unknown) => {
    if (ended) return;
    ended = true;
    options.onEnd(how, error);
  };
  // The last two bytes sent, to know whether an SSE event is half-sent:
  // numbers, not a string, so a chunk allocates nothing here.
  let last1 = 0x0a;
  let last2 = 0x0a;
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
          if (last1 !== 0x0a || last2 !== 0x0a) controller.enqueue(encoder.encode("\n\n"));
          const why = errorMessage(e);
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
      const n = chunk.byteLength;
      if (n >= 2) {
        last1 = chunk[n - 2];
        last2 = chunk[n - 1];
      } else if (n === 1) {
        last1 = last2;
        last2 = chunk[0];
      }
      options.onChunk?.(chunk);
      controller.enqueue(chunk);
    },
    async cancel(reason) {
      end("cancelled");
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
