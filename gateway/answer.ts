/**
 * An engine's answer, passed on to the client (design §12) in one of four
 * shapes:
 * - a 404 on `/v1/responses`, read whole (it is small) to tell an engine
 *   without the route (then the gateway's `unsupported_endpoint`) from the
 *   engine's own 404 (gateway/unsupported_route.ts);
 * - an empty answer, as is;
 * - a whole answer of known, modest size: read, then sent in one piece (no
 *   stream machinery, and one broken off becomes a clean 502);
 * - anything else, SSE streams above all, relayed chunk by chunk as it
 *   arrives (gateway/relay.ts); an SSE client whose engine dies mid-stream
 *   gets an error event and a clean end.
 *
 * Each shape ends the request's record once, with the tokens the engine
 * reported (gateway/usage.ts); a relayed one when its body ends.
 *
 * @module
 */
import { type BodyReader, readLimited } from "../http/read_limited.ts";
import type { Answered } from "./dispatch.ts";
import { forwardHeaders, RESPONSE_DROP } from "./headers.ts";
import { relayBody } from "./relay.ts";
import { brokenUpstream } from "./refusals.ts";
import { outcomeOf, type RequestRecord } from "./request_record.ts";
import {
  lacksRoute,
  MAX_NOT_FOUND_BYTES,
  RESPONSES_ROUTE,
  unsupportedEndpoint,
} from "./unsupported_route.ts";
import { STREAM_TAIL_BYTES, TailBuffer, usageOfWhole, WHOLE_TAIL_BYTES } from "./usage.ts";

/**
 * Non-SSE answers up to this size (by their Content-Length) are read whole
 * and sent in one piece; larger ones are relayed as they arrive.
 */
export const WHOLE_BODY_BYTES = 4 * 1024 * 1024;

/** Reads a body whole, at most `max` bytes; null when longer or broken off. */
async function readAtMost(body: BodyReader, max: number): Promise<Uint8Array<ArrayBuffer> | null> {
  try {
    return await readLimited(body, max);
  } catch {
    return null;
  }
}

/** The client's answer to a request for `model` on `path` that `a`'s engine answered. */
export async function answer(
  path: string,
  model: string,
  a: Answered,
  record: RequestRecord,
): Promise<Response> {
  const { upstream } = a;
  const status = upstream.status;
  const headers = forwardHeaders(upstream.headers, RESPONSE_DROP);
  if (status === 404 && path === RESPONSES_ROUTE) {
    const body = upstream.body === null
      ? new Uint8Array(0)
      : await readAtMost(upstream.body, MAX_NOT_FOUND_BYTES);
    if (body === null) {
      record.finish("upstream_error");
      return brokenUpstream(`replica of \`${model}\` sent a broken 404`);
    }
    if (lacksRoute(upstream.headers, body)) {
      record.finish("unsupported_endpoint");
      return unsupportedEndpoint(model, RESPONSES_ROUTE);
    }
    record.finish("model_not_found");
    return new Response(body, { status, headers });
  }
  if (upstream.body === null) {
    record.finish(outcomeOf(status));
    return new Response(null, { status, headers });
  }
  const ok = status >= 200 && status < 300;
  const sse = (upstream.headers.get("content-type") ?? "").includes("text/event-stream");
  const length = Number(upstream.headers.get("content-length") ?? NaN);
  if (!sse && length <= WHOLE_BODY_BYTES) {
    const read = await readAtMost(upstream.body, length);
    const whole = read?.length === length ? read : null;
    record.firstByte();
    if (whole === null) {
      record.finish("mid_stream_failure");
      a.brokeOff();
      return brokenUpstream(`replica of \`${model}\` broke off its answer`);
    }
    record.finish(outcomeOf(status), ok ? usageOfWhole(whole) : null);
    return new Response(whole, { status, headers });
  }
  // A stream's tail lives as long as the stream: small. Other bodies are short-lived.
  const tail = ok ? new TailBuffer(sse ? STREAM_TAIL_BYTES : WHOLE_TAIL_BYTES) : null;
  record.defer();
  const body = relayBody(upstream.body, {
    sse,
    onChunk: tail === null ? undefined : (chunk) => tail.push(chunk),
    onFirstChunk: () => record.firstByte(),
    onEnd(end, error) {
      const outcome = end === "error"
        ? "mid_stream_failure"
        : end === "cancelled"
        ? "client_closed"
        : outcomeOf(status);
      record.finish(outcome, tail?.usage() ?? null);
      if (end === "error") a.brokeOff(String(error));
    },
  });
  return new Response(body, { status, headers });
}
