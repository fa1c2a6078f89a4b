/**
 * Short-lived signed CDN URLs, as the hub hands out for LFS files (CloudFront
 * signed URLs with `Expires` and `Signature`): the CDN serves a blob only
 * with a signature made by the hub for that blob, before it expires, and
 * answers 403 otherwise. The secret is random per fake hub.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Signs and checks CDN URLs of one fake hub. */
export class UrlSigner {
  readonly #secret: Uint8Array;
  readonly #ttlMs: number;
  readonly #now: () => number;

  /** URLs live `ttlSeconds`; `now` is the clock (ms). */
  constructor(ttlSeconds: number, now: () => number) {
    this.#secret = randomBytes(32);
    this.#ttlMs = ttlSeconds * 1000;
    this.#now = now;
  }

  #signature(sha256: string, expires: number): string {
    return createHmac("sha256", this.#secret).update(`${sha256}:${expires}`).digest("hex");
  }

  /** The path and query of a signed URL for blob `sha256` named `filename`. */
  sign(sha256: string, filename: string): string {
    const expires = Math.floor((this.#now() + this.#ttlMs) / 1000);
    const query = new URLSearchParams({
      "response-content-disposition": `attachment; filename="${filename}";`,
      Expires: String(expires),
      Signature: this.#signature(sha256, expires),
    });
    return `/repos/${sha256.slice(0, 2)}/${sha256}?${query}`;
  }

  /** Why a request for blob `sha256` with `query` is refused, or null when it may be served. */
  refusal(sha256: string, query: URLSearchParams): string | null {
    const expires = Number(query.get("Expires"));
    const signature = query.get("Signature") ?? "";
    if (!Number.isSafeInteger(expires) || !/^[0-9a-f]{64}$/.test(signature)) {
      return "Missing Key-Pair-Id query parameter or cookie value";
    }
    const want = Buffer.from(this.#signature(sha256, expires), "hex");
    if (!timingSafeEqual(want, Buffer.from(signature, "hex"))) return "Invalid signature";
    if (this.#now() >= expires * 1000) return "Access denied: the signed URL has expired";
    return null;
  }
}
