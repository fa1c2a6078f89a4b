/**
 * Server-sent events as the engines stream them (dev/fake_engine/fake_engine.ts):
 * `data: {…}\n\n` chunks ending in `data: [DONE]\n\n` for completions, and
 * `event:` plus `data:` lines for the Responses API.
 *
 * @module
 */

const encoder = new TextEncoder();

/** Where a streaming route writes its events. */
export interface EventSink {
  /** Whether the client has gone away (it cancelled the body stream). */
  readonly cancelled: boolean;
  /** Sends one event; throws once the client has gone away. */
  send(event: Uint8Array): void;
  /** Ends the stream. */
  close(): void;
}

/** One `data: JSON` event. */
export function sseData(payload: unknown): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
}

/** The event that ends a completion stream. */
export function sseDone(): Uint8Array {
  return encoder.encode("data: [DONE]\n\n");
}

/** One named event: an `event: TYPE` line, then `data: JSON`. */
export function sseEvent(type: string, payload: unknown): Uint8Array {
  return encoder.encode(`event: ${type}\ndata: ${JSON.stringify(payload)}\n\n`);
}

/**
 * A 200 `text/event-stream` response whose events `produce` sends. It starts
 * at once and runs on its own; a client that goes away sets
 * {@link EventSink.cancelled}, and later sends throw. Not `req.signal`:
 * Deno.serve aborts that on successful responses too.
 */
export function eventStream(produce: (sink: EventSink) => Promise<void>): Response {
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      void produce({
        get cancelled() {
          return cancelled;
        },
        send: (event) => controller.enqueue(event),
        close: () => controller.close(),
      });
    },
    cancel() {
      cancelled = true;
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    },
  });
}
