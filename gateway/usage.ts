/**
 * Token usage as engines report it (design §12), read off the bytes the
 * gateway relays anyway: the `usage` of a whole JSON answer (chat and text
 * completions, embeddings, the Responses API), or of a stream's usage chunk
 * (`stream_options.include_usage`) or final `response.completed` event.
 *
 * The look is bounded so that it never slows the relay: engines put `usage`
 * near the end of an answer (after `choices`/`output`), so only the last
 * {@link WHOLE_TAIL_BYTES} of a whole answer (read whole, or relayed and kept
 * by a {@link TailBuffer}), and the last {@link STREAM_TAIL_BYTES} of an SSE
 * stream, are searched for the last `"usage": {…}`. Anything malformed
 * counts nothing.
 *
 * @module
 */

/** Tokens one answer used. */
export interface TokenUsage {
  /** Prompt (input) tokens. */
  prompt: number;
  /** Generated (output) tokens. */
  completion: number;
}

/** How far from the end of a whole answer its usage is looked for, in bytes. */
export const WHOLE_TAIL_BYTES = 16 * 1024;

/**
 * How much of a relayed body's end is kept to find its usage, in bytes: per
 * open stream, so small. A usage chunk and `data: [DONE]` take some 400
 * bytes; after a `response.completed` event's usage come a few short fields.
 */
export const STREAM_TAIL_BYTES = 2 * 1024;

/** The longest usage object read, in characters (engines send a few hundred). */
const MAX_USAGE_CHARS = 4096;

const KEY = '"usage"';

const isCount = (v: unknown): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/**
 * The counts of a usage object: `prompt_tokens`/`completion_tokens` (chat,
 * completions, embeddings: no completion count means 0) or
 * `input_tokens`/`output_tokens` (Responses API); null when neither prompt
 * count is there or a count is not a non-negative integer.
 */
export function usageCounts(value: unknown): TokenUsage | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const o = value as Record<string, unknown>;
  const prompt = "prompt_tokens" in o ? o.prompt_tokens : o.input_tokens;
  const completion = "completion_tokens" in o
    ? o.completion_tokens
    : "output_tokens" in o
    ? o.output_tokens
    : 0;
  return isCount(prompt) && isCount(completion) ? { prompt, completion } : null;
}

/** Where the JSON object starting at `start` (a `{`) ends (one past its `}`); -1 if it does not. */
function objectEnd(text: string, start: number): number {
  const stop = Math.min(text.length, start + MAX_USAGE_CHARS);
  let depth = 0;
  let inString = false;
  for (let i = start; i < stop; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return i + 1;
  }
  return -1;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && " \t\r\n".includes(text[i])) i++;
  return i;
}

/**
 * The last `"usage": {…}` in `text` (JSON, or SSE whose events are JSON),
 * as counts. `"usage": null` is passed over for an earlier one; a `"usage"`
 * inside a JSON string (its quotes escaped) is not a key. Null when there is
 * none, or when the last one is cut off, is not JSON or lacks the counts:
 * a malformed answer counts nothing.
 */
export function findUsage(text: string): TokenUsage | null {
  for (
    let at = text.lastIndexOf(KEY);
    at >= 0;
    at = at === 0 ? -1 : text.lastIndexOf(KEY, at - 1)
  ) {
    if (at > 0 && text[at - 1] === "\\") continue;
    let i = skipSpace(text, at + KEY.length);
    if (text[i] !== ":") continue;
    i = skipSpace(text, i + 1);
    if (text[i] !== "{") continue;
    const end = objectEnd(text, i);
    if (end < 0) return null;
    try {
      return usageCounts(JSON.parse(text.slice(i, end)));
    } catch {
      return null;
    }
  }
  return null;
}

const decoder = new TextDecoder();

/** {@link findUsage} over the last {@link WHOLE_TAIL_BYTES} of a whole answer. */
export function usageOfWhole(body: Uint8Array): TokenUsage | null {
  return findUsage(decoder.decode(body.subarray(Math.max(0, body.length - WHOLE_TAIL_BYTES))));
}

/**
 * The last `size` bytes of a body that passes by in chunks: a ring, allocated
 * at the first chunk, that each chunk is copied into (at most `size` bytes of
 * it), so nothing the relay sent is held on to.
 */
export class TailBuffer {
  #ring: Uint8Array | null = null;
  #end = 0;
  #full = false;

  /** Creates an empty tail of `size` bytes (default {@link STREAM_TAIL_BYTES}). */
  constructor(readonly size: number = STREAM_TAIL_BYTES) {
    if (!Number.isInteger(size) || size < 1) {
      throw new RangeError(
        `Cannot keep a tail of ${size} bytes: the size must be a positive integer`,
      );
    }
  }

  /** Takes in the next chunk. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    const size = this.size;
    const ring = this.#ring ??= new Uint8Array(size);
    if (chunk.length >= size) {
      ring.set(chunk.subarray(chunk.length - size));
      this.#end = 0;
      this.#full = true;
      return;
    }
    const first = Math.min(chunk.length, size - this.#end);
    ring.set(chunk.subarray(0, first), this.#end);
    if (first < chunk.length) ring.set(chunk.subarray(first), 0);
    if (this.#end + chunk.length >= size) this.#full = true;
    this.#end = (this.#end + chunk.length) % size;
  }

  /** The last bytes taken in (up to `size`), oldest first. */
  bytes(): Uint8Array {
    const ring = this.#ring;
    if (ring === null) return new Uint8Array(0);
    if (!this.#full) return ring.slice(0, this.#end);
    const out = new Uint8Array(this.size);
    out.set(ring.subarray(this.#end));
    out.set(ring.subarray(0, this.#end), this.size - this.#end);
    return out;
  }

  /** {@link findUsage} over the tail. */
  usage(): TokenUsage | null {
    return findUsage(decoder.decode(this.bytes()));
  }
}
