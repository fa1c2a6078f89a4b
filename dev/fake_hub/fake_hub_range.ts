/**
 * The `Range` header as the hub's CDN (S3 behind CloudFront) reads it: one
 * range (`bytes=a-b`, `bytes=a-`, `bytes=-n`) is served as 206; a range that
 * starts at or past the end is 416; a header it cannot parse, or several
 * ranges (S3 serves no multipart ranges), is ignored and the whole file is
 * sent as 200 (RFC 9110 §14.2 lets a server ignore `Range`).
 *
 * @module
 */

/** What a `Range` header asks of a file. */
export type RangeAsk =
  | { kind: "whole" }
  | { kind: "part"; start: number; end: number }
  | { kind: "unsatisfiable" };

/** Reads `header` against a file of `size` bytes (`end` exclusive). */
export function parseRange(header: string | null, size: number): RangeAsk {
  if (header === null) return { kind: "whole" };
  const m = header.trim().match(/^bytes=(\d*)-(\d*)$/);
  if (!m || (m[1] === "" && m[2] === "")) return { kind: "whole" };
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "part", start: Math.max(0, size - suffix), end: size };
  }
  const start = Number(m[1]);
  const last = m[2] === "" ? Infinity : Number(m[2]);
  if (!Number.isSafeInteger(start) || last < start) return { kind: "whole" };
  if (start >= size) return { kind: "unsatisfiable" };
  return { kind: "part", start, end: Math.min(last, size - 1) + 1 };
}
