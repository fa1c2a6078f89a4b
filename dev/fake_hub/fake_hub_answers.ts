/**
 * How the fake hub and its CDN answer: bodies sent in chunks through the
 * origin's bandwidth cap and counted, which break when the hub is switched
 * off; ranges as 206, 416 or 200; refusals with the hub's headers.
 *
 * @module
 */
import {
  HEADER_ERROR_CODE,
  HEADER_ERROR_MESSAGE,
  type HubErrorCode,
} from "../../models/hub_protocol.ts";
import type { RequestKind } from "./fake_hub_counters.ts";
import { parseRange } from "./fake_hub_range.ts";
import type { FakeHubState } from "./fake_hub_state.ts";
import type { ReadRange } from "./fake_repo.ts";

/** The largest chunk sent at once (and taken from the bandwidth bucket at once). */
export const CHUNK_BYTES = 64 * 1024;

/** Who asked, for the counters. */
export interface Asker {
  /** Which route. */
  kind: RequestKind;
  /** The `User-Agent`, or `-`. */
  caller: string;
}

/** A body from `chunks`, paced by the bandwidth cap, counted, broken by going offline. */
export function meteredBody(
  state: FakeHubState,
  asker: Asker,
  chunks: AsyncIterable<Uint8Array>,
): ReadableStream<Uint8Array> {
  const iterator = chunks[Symbol.asyncIterator]();
  let pending: Uint8Array | undefined;
  let self: ReadableStreamDefaultController<Uint8Array>;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      self = controller;
      state.sending.add(controller);
    },
    async pull(controller) {
      if (pending === undefined || pending.byteLength === 0) {
        const next = await iterator.next();
        if (next.done) {
          state.sending.delete(controller);
          return controller.close();
        }
        pending = next.value;
      }
      const chunk = pending.subarray(0, CHUNK_BYTES);
      pending = pending.subarray(chunk.byteLength);
      await state.bandwidth.take(chunk.byteLength);
      if (!state.online) return controller.error(new Error("fake hub switched off"));
      state.counters.sent(asker.kind, asker.caller, chunk.byteLength);
      controller.enqueue(chunk);
    },
    async cancel() {
      state.sending.delete(self);
      await iterator.return?.();
    },
  });
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** A small body (JSON, text) sent through the same meter. */
export function smallBody(
  state: FakeHubState,
  asker: Asker,
  text: string,
): ReadableStream<Uint8Array> {
  return meteredBody(state, asker, once(new TextEncoder().encode(text)));
}

/** A JSON answer. */
export function jsonAnswer(
  state: FakeHubState,
  asker: Asker,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
  head = false,
): Response {
  const text = JSON.stringify(value);
  return new Response(head ? null : smallBody(state, asker, text), {
    status,
    headers: {
      ...headers,
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": String(new TextEncoder().encode(text).byteLength),
    },
  });
}

/** A refusal as the hub sends it: status, `X-Error-Code`, `X-Error-Message`, `{"error": …}`. */
export function refusal(
  state: FakeHubState,
  asker: Asker,
  status: number,
  code: HubErrorCode | null,
  message: string,
  head: boolean,
  headers: Record<string, string> = {},
): Response {
  const all: Record<string, string> = { ...headers, [HEADER_ERROR_MESSAGE]: message };
  if (code !== null) all[HEADER_ERROR_CODE] = code;
  return jsonAnswer(state, asker, status, { error: message }, all, head);
}

/** A file's bytes for `request`'s `Range`: 206 with `Content-Range`, 416, or the whole as 200. */
export function rangeAnswer(
  state: FakeHubState,
  asker: Asker,
  request: Request,
  size: number,
  read: ReadRange,
  headers: Record<string, string>,
): Response {
  const head = request.method === "HEAD";
  const ask = parseRange(request.headers.get("Range"), size);
  const base = { ...headers, "Accept-Ranges": "bytes" };
  if (ask.kind === "unsatisfiable") {
    return new Response(null, {
      status: 416,
      headers: { ...base, "Content-Range": `bytes */${size}` },
    });
  }
  const [start, end, status] = ask.kind === "part" ? [ask.start, ask.end, 206] : [0, size, 200];
  const out: Record<string, string> = { ...base, "Content-Length": String(end - start) };
  if (status === 206) out["Content-Range"] = `bytes ${start}-${end - 1}/${size}`;
  const body = head ? null : meteredBody(state, asker, read(start, end));
  return new Response(body, { status, headers: out });
}
