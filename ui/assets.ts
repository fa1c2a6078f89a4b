/**
 * The dashboard's static assets, served from the code (no CDN, no build
 * step, nothing read from disk, so the bundles serve them too): htmx, the
 * stylesheet and the page script, each under a name that changes with its
 * content, gzip-compressed for browsers that take it.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { APP_JS } from "./client_js.ts";
import { HTMX_JS, HTMX_VERSION } from "./htmx_asset.ts";
import { APP_CSS } from "./styles.ts";

/** One asset. */
export interface Asset {
  /** Its path under /ui/assets/. */
  name: string;
  /** Content type. */
  type: string;
  /** The bytes. */
  body: Uint8Array;
  /** The bytes, gzip-compressed. */
  gzip: Uint8Array;
}

function asset(stem: string, ext: string, type: string, text: string): Asset {
  const body = new TextEncoder().encode(text);
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 10);
  return {
    name: `${stem}-${hash}.${ext}`,
    type,
    body,
    gzip: new Uint8Array(gzipSync(body)),
  };
}

/** The assets, by role. */
export const ASSETS = {
  htmx: asset(
    `htmx-${HTMX_VERSION}`,
    "js",
    "text/javascript; charset=utf-8",
    HTMX_JS,
  ),
  css: asset("app", "css", "text/css; charset=utf-8", APP_CSS),
  js: asset("app", "js", "text/javascript; charset=utf-8", APP_JS),
} as const;

/** The asset of a name, or undefined. */
export function assetNamed(name: string): Asset | undefined {
  return Object.values(ASSETS).find((a) => a.name === name);
}

/** The URL path of an asset. */
export function assetPath(a: Asset): string {
  return `/ui/assets/${a.name}`;
}

/** The answer for an asset: gzip when `acceptEncoding` allows it, cached for a year (the name changes with it). */
export function assetResponse(
  a: Asset,
  acceptEncoding: string | undefined,
): Response {
  const gzip = /\bgzip\b/.test(acceptEncoding ?? "");
  const headers: Record<string, string> = {
    "content-type": a.type,
    "cache-control": "public, max-age=31536000, immutable",
    "vary": "accept-encoding",
    "x-content-type-options": "nosniff",
  };
  if (gzip) headers["content-encoding"] = "gzip";
  return new Response((gzip ? a.gzip : a.body) as Uint8Array<ArrayBuffer>, {
    headers,
  });
}
