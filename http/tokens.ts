/**
 * Tokens: compared in constant time, stored hashed, never logged. The one
 * owner of the bearer grammar, token hashing and constant-time comparison:
 * the control plane's API, the agent's local API and engine proxy, and the
 * gateway's API keys all read an `Authorization` header through here.
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";

/**
 * SHA-256 of a token, hex. node:crypto's synchronous hash: every heartbeat,
 * long poll and gateway request is hashed, and WebCrypto's async digest was
 * 9% of a heartbeat profile (bench/heartbeat_load.ts under --cpu-prof).
 */
export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** {@link tokenDigest}, as a promise (for callers written against an async hash). */
export function hashToken(token: string): Promise<string> {
  return Promise.resolve(tokenDigest(token));
}

/**
 * True when `presented` is `expected`. Both are hashed first, so the
 * constant-time comparison sees equal lengths whatever was presented.
 */
export function tokensEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** True when `token` hashes to `hash`; the comparison takes the same time whatever matches. */
export async function tokenMatches(token: string, hash: string): Promise<boolean> {
  return digestMatches(await hashToken(token), hash);
}

/** True when a token's digest (hex) is `hash`, compared in constant time. */
export function digestMatches(digest: string, hash: string): boolean {
  const a = new TextEncoder().encode(digest);
  const b = new TextEncoder().encode(hash);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * True when a token's digest is any of `hashes`. Every hash is compared, with
 * no early exit: how long it takes says nothing about which one matched.
 */
export function digestMatchesAny(digest: string, hashes: readonly string[]): boolean {
  let found = false;
  for (const h of hashes) found = digestMatches(digest, h) || found;
  return found;
}

/** A new random token: 32 bytes, URL-safe base64, with a prefix saying what it is for. */
export function newToken(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const b64 = btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(
    /=+$/,
    "",
  );
  return `${prefix}_${b64}`;
}

/**
 * The bearer token of an Authorization header, or null: `Bearer` in any case,
 * whitespace, one token. Whitespace around the value is no part of a header
 * field (RFC 9110 §5.5), so it is allowed at either end.
 */
export function bearer(header: string | null | undefined): string | null {
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m === null ? null : m[1];
}

/**
 * True when the Authorization header carries `token` as its bearer token,
 * compared in constant time ({@link tokensEqual}).
 */
export function bearerMatches(header: string | null | undefined, token: string): boolean {
  const presented = bearer(header);
  const same = tokensEqual(presented ?? "", token);
  return same && presented !== null;
}

/**
 * True when the Authorization header's bearer token hashes (SHA-256, hex) to
 * one of `hashes`. Every hash is compared, each in constant time, so the
 * time taken says nothing about which one matched or how closely.
 */
export function bearerHashMatches(
  header: string | null | undefined,
  hashes: readonly string[],
): boolean {
  const presented = bearer(header);
  const digest = tokenDigest(presented ?? "");
  // Hex case is no secret: a hash listed in upper case still names the token.
  return digestMatchesAny(digest, hashes.map((h) => h.toLowerCase())) && presented !== null;
}
