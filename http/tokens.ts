/**
 * Tokens: compared in constant time, stored hashed, never logged.
 *
 * @module
 */
import { timingSafeEqual } from "node:crypto";

/** SHA-256 of a token, hex. */
export async function hashToken(token: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
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
