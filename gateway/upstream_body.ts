/**
 * An engine's response body as the gateway's upstream client reads it
 * (design §12): framed by Content-Length, chunked encoding or the
 * connection's end (gateway/http1_response.ts), read one socket read at a
 * time, and the connection handed back to the pool the moment the body ends.
 * A body broken off rejects with {@link UpstreamBodyError}, and its
 * connection is closed.
 *
 * @module
 */
import type { BodyReader } from "../http/read_limited.ts";
import { ChunkedDecoder, type ResponseHead } from "./http1_response.ts";
import { errorMessage } from "../text/error_message.ts";

/** The upstream failed after its response began (mid-body). */
export class UpstreamBodyError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UpstreamBodyError";
  }
}

/** The connection a body is read from. */
export interface BodyConnection {
  /** One socket read: a fresh copy of the bytes, or null at the end of the stream. */
  read(): Promise<Uint8Array | null>;
  /** The exchange is over: the connection goes back to the pool when `reusable`, else closes. */
  finish(reusable: boolean): void;
  /** Closes the connection. */
  destroy(): void;
}

function joined(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * The body of a response with `head`, whose first bytes `first` came with
 * the head; null when the response has none (the connection is finished
 * then).
 */
export function upstreamBody(
  head: ResponseHead,
  first: Uint8Array,
  conn: BodyConnection,
): BodyReader | null {
  const framing = head.framing;
  if (framing.kind === "none") {
    conn.finish(head.keepAlive && first.length === 0);
    return null;
  }
  let pending: Uint8Array | null = first.length > 0 ? first : null;
  let left = framing.kind === "length" ? framing.bytes : 0;
  const chunked = framing.kind === "chunked" ? new ChunkedDecoder() : null;
  let finished = false;
  const end = (reusable: boolean): ReadableStreamReadResult<Uint8Array> => {
    finished = true;
    conn.finish(reusable);
    return { done: true, value: undefined };
  };
  const broken = (message: string, cause?: unknown): UpstreamBodyError => {
    finished = true;
    conn.destroy();
    return new UpstreamBodyError(message, { cause });
  };
  return {
    async read(): Promise<ReadableStreamReadResult<Uint8Array>> {
      while (!finished) {
        let input = pending;
        pending = null;
        if (input === null) {
          try {
            input = await conn.read();
          } catch (e) {
            throw broken(`reading the body failed: ${errorMessage(e)}`, e);
          }
        }
        if (input === null) {
          if (framing.kind === "close") return end(false);
          throw broken("the engine closed the connection before the body ended");
        }
        if (chunked !== null) {
          let out;
          try {
            out = chunked.push(input);
          } catch (e) {
            throw broken(`bad chunked body: ${errorMessage(e)}`, e);
          }
          if (out.done) {
            // The connection is free once the body ended; the data goes out first.
            finished = true;
            conn.finish(head.keepAlive && out.rest.length === 0);
          }
          if (out.data.length > 0) return { done: false, value: joined(out.data) };
          continue;
        }
        if (framing.kind === "length") {
          const take = input.subarray(0, left);
          left -= take.length;
          if (left === 0) {
            finished = true;
            conn.finish(head.keepAlive && input.length === take.length);
          }
          return { done: false, value: take };
        }
        return { done: false, value: input };
      }
      return { done: true, value: undefined };
    },
    cancel(): Promise<void> {
      if (!finished) {
        finished = true;
        conn.destroy();
      }
      return Promise.resolve();
    },
  };
}
