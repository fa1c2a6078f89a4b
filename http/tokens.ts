/**
 * Tokens: compared in constant time, stored hashed, never logged.
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";

/**
 * SHA-256 of a token, hex. node:crypto's synchronous hash: every heartbeat
 * and long poll is hashed, and WebCrypto's async digest was 9% of a heartbeat
 * profile (bench/heartbeat_load.ts under --cpu-prof).
 */
export function hashToken(token: string): Promise<string> {
  return Promise.resolve(createHash("sha256").update(token).digest("hex"));
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

/** The bearer token of an Authorization header, or null. */
export function bearer(header: string | null | undefined): string | null {
  const m = /^Bearer\s+(\S+)$/i.exec(header ?? "");
  return m === null ? null : m[1];
}
