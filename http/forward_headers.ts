/**
 * Copying headers through a proxy (RFC 9110 §7.6.1): hop-by-hop headers and
 * those the `Connection` header names describe one connection and are never
 * forwarded. The gateway and the agent's engine proxy both use this.
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
