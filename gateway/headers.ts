/**
 * Header filtering for the proxy (plan §12, RFC 9110 §7.6.1): hop-by-hop
 * headers and Host are not forwarded in either direction.
 *
 * @module
 */

/** Headers that describe one connection, never forwarded (lower case). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
]);

/**
 * Copies `headers` without hop-by-hop headers, `Proxy-*`, the headers named
 * in `Connection`, and the names in `drop` (lower case).
 */
export function forwardHeaders(headers: Headers, drop: readonly string[] = []): Headers {
  const named = new Set(
    (headers.get("connection") ?? "").split(",").map((h) => h.trim().toLowerCase()).filter((h) =>
      h !== ""
    ),
  );
  const out = new Headers();
  for (const [name, value] of headers) {
    const n = name.toLowerCase();
    if (HOP_BY_HOP.has(n) || n.startsWith("proxy-") || named.has(n) || drop.includes(n)) continue;
    out.append(name, value);
  }
  return out;
}

/**
 * Request headers dropped besides hop-by-hop ones: `host` (the upstream's is
 * set by fetch), `content-length` (set from the forwarded body) and
 * `accept-encoding` (fetch negotiates and decodes on its own).
 */
export const REQUEST_DROP: readonly string[] = [
  "host",
  "content-length",
  "accept-encoding",
  // The client's gateway API key is the gateway's business, not the engine's (or its logs').
  "authorization",
];

/**
 * Response headers dropped besides hop-by-hop ones: fetch has already decoded
 * the body, so its upstream `content-encoding` and `content-length` no
 * longer describe it.
 */
export const RESPONSE_DROP: readonly string[] = ["content-encoding", "content-length"];
