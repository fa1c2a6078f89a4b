/**
 * Header filtering for the proxy (design §12, RFC 9110 §7.6.1): hop-by-hop
 * headers and Host are not forwarded in either direction; the client's
 * address and the original host and scheme travel as `X-Forwarded-*`.
 *
 * @module
 */

export { forwardHeaders, HOP_BY_HOP } from "../http/forward_headers.ts";

/**
 * Request headers dropped besides hop-by-hop ones: `host` and
 * `content-length` (the upstream client sets its own) and `accept-encoding`
 * (engines then answer uncompressed, so the gateway can end a broken SSE
 * stream with an error event of its own).
 */
export const REQUEST_DROP: readonly string[] = [
  "host",
  "content-length",
  "accept-encoding",
  // The client's gateway API key is the gateway's business, not the engine's (or its logs').
  "authorization",
];

/**
 * Response headers dropped besides hop-by-hop ones: `content-length`, since
 * the relayed body is sent with the client connection's own framing.
 */
export const RESPONSE_DROP: readonly string[] = ["content-length"];

/**
 * Adds the de facto proxy headers to `headers` (request headers bound
 * upstream): the client's address appended to any `X-Forwarded-For` chain
 * (as nginx's `$proxy_add_x_forwarded_for` does), and the host and scheme the
 * client used as `X-Forwarded-Host` and `X-Forwarded-Proto` unless a proxy in
 * front already set them. `clientAddress` is omitted when unknown (a request
 * handed to the gateway in-process).
 */
export function addForwarded(
  headers: Headers,
  original: { clientAddress?: string; host: string | null; proto: string },
): void {
  if (original.clientAddress !== undefined) {
    const prior = headers.get("x-forwarded-for");
    headers.set(
      "x-forwarded-for",
      prior ? `${prior}, ${original.clientAddress}` : original.clientAddress,
    );
  }
  if (original.host !== null && !headers.has("x-forwarded-host")) {
    headers.set("x-forwarded-host", original.host);
  }
  if (!headers.has("x-forwarded-proto")) headers.set("x-forwarded-proto", original.proto);
}
