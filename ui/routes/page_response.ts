/**
 * How the dashboard answers with HTML or text: every page and fragment
 * carries the same security headers.
 *
 * @module
 */
import type { Context } from "hono";
import type { Child } from "hono/jsx";

/** Headers on every page and fragment: no framing, no caching, only the dashboard's own scripts. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    // Inline style attributes carry the bars' widths; scripts stay the dashboard's own files.
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "object-src 'none'; base-uri 'none'; " +
    "form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  // Not no-referrer: under it Chromium sends "Origin: null" on form posts, which the origin check refuses.
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
};

/** An HTML document (or fragment) with the page headers. */
export function html(
  c: Context,
  body: Child,
  status: number,
): Response | Promise<Response> {
  return c.html(`<!doctype html>${body}`, status as 200, { ...PAGE_HEADERS });
}

/** A plain-text answer with the page headers, and `extra` ones. */
export function text(
  c: Context,
  body: string,
  status: number,
  extra: Record<string, string> = {},
): Response {
  return c.text(body, status as 200, { ...PAGE_HEADERS, ...extra });
}
