/**
 * Reading an HTTP/1.1 response (RFC 9112) from raw bytes: the head (status
 * line and fields) and a chunked body. Pure: bytes in, parts out, no I/O.
 * The gateway's upstream client (gateway/upstream_client.ts) is built on it
 * because relaying a body it reads off the socket itself costs half of what
 * relaying `fetch`'s body does (docs/benchmarks.md).
 *
 * @module
 */

/** The largest response head accepted, in bytes. */
export const MAX_HEAD_BYTES = 64 * 1024;

/** A malformed response from an upstream. */
export class Http1ParseError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "Http1ParseError";
  }
}

/** How the body after a head is delimited (RFC 9112 §6.3). */
export type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; bytes: number }
  | { kind: "chunked" }
  | { kind: "close" };

/** A parsed response head. */
export interface ResponseHead {
  /** Status code. */
  status: number;
  /** Header fields, in order. */
  headers: Headers;
  /** How the body is delimited. */
  framing: BodyFraming;
  /** Whether the connection may carry another request after this response. */
  keepAlive: boolean;
  /** Bytes the head took, the blank line included. */
  headBytes: number;
}

const latin1 = new TextDecoder("latin1");

/** Index of the first CRLFCRLF in `b` at or after `from`, or -1. */
function endOfHead(b: Uint8Array, from: number): number {
  for (let i = Math.max(0, from); i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}

/**
 * Parses the response head at the start of `bytes`. Returns null while the
 * head is incomplete; throws {@link Http1ParseError} when it is malformed or
 * longer than {@link MAX_HEAD_BYTES}. `requestMethod` decides whether a body
 * follows (none for HEAD).
 */
export function parseResponseHead(bytes: Uint8Array, requestMethod = "POST"): ResponseHead | null {
  const end = endOfHead(bytes, 0);
  if (end < 0) {
    if (bytes.length > MAX_HEAD_BYTES) {
      throw new Http1ParseError(`response head is longer than ${MAX_HEAD_BYTES} bytes`);
    }
    return null;
  }
  const lines = latin1.decode(bytes.subarray(0, end)).split("\r\n");
  const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0]);
  if (m === null) {
    throw new Http1ParseError(`bad status line: ${JSON.stringify(lines[0].slice(0, 80))}`);
  }
  const status = Number(m[2]);
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      throw new Http1ParseError(`bad header line: ${JSON.stringify(line.slice(0, 80))}`);
    }
    try {
      headers.append(name, line.slice(colon + 1).trim());
    } catch {
      throw new Http1ParseError(`bad value of header ${name}`);
    }
  }
  const connection = (headers.get("connection") ?? "").toLowerCase();
  let keepAlive = m[1] === "1" ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
  let framing: BodyFraming;
  const te = headers.get("transfer-encoding");
  const cl = headers.get("content-length");
  if (requestMethod === "HEAD" || status < 200 || status === 204 || status === 304) {
    framing = { kind: "none" };
  } else if (te !== null) {
    // RFC 9112 §6.3: chunked last means chunked; anything else reads to close.
    if (/(^|,)\s*chunked\s*$/i.test(te)) framing = { kind: "chunked" };
    else {
      framing = { kind: "close" };
      keepAlive = false;
    }
  } else if (cl !== null) {
    // Repeated identical values are allowed ("5, 5"); anything else is not.
    const values = new Set(cl.split(",").map((v) => v.trim()));
    const [only] = values;
    if (values.size !== 1 || !/^\d{1,15}$/.test(only)) {
      throw new Http1ParseError(`bad content-length: ${JSON.stringify(cl.slice(0, 40))}`);
    }
    framing = Number(only) === 0 ? { kind: "none" } : { kind: "length", bytes: Number(only) };
  } else {
    framing = { kind: "close" };
    keepAlive = false;
  }
  return { status, headers, framing, keepAlive, headBytes: end + 4 };
}

/** What one {@link ChunkedDecoder.push} produced. */
export interface DecodedChunks {
  /** The body bytes decoded from this input (views into it; may be empty). */
  data: Uint8Array[];
  /** Whether the last chunk and the trailer section have been read. */
  done: boolean;
  /** Bytes after the end of the body (only when `done`): the next response's. */
  rest: Uint8Array;
}

/** Longest chunk-size line (with extensions) or trailer line accepted. */
const MAX_LINE = 4096;

/**
 * Decodes `Transfer-Encoding: chunked` (RFC 9112 §7.1) incrementally: feed
 * bytes as they arrive, split anywhere; get the body bytes back. Chunk
 * extensions are ignored and trailer fields skipped.
 */
export class ChunkedDecoder {
  #state: "size" | "data" | "data-crlf" | "trailer" | "done" = "size";
  #left = 0;
  #line: number[] = [];

  /** Whether the whole body has been decoded. */
  get done(): boolean {
    return this.#state === "done";
  }

  /** Decodes `input`; throws {@link Http1ParseError} on malformed framing. */
  push(input: Uint8Array): DecodedChunks {
    const data: Uint8Array[] = [];
    let i = 0;
    while (i < input.length && this.#state !== "done") {
      if (this.#state === "data") {
        const take = Math.min(this.#left, input.length - i);
        data.push(input.subarray(i, i + take));
        i += take;
        this.#left -= take;
        if (this.#left === 0) this.#state = "data-crlf";
        continue;
      }
      // The other states read a CRLF-terminated line.
      const line = this.#readLine(input, i);
      if (line === null) {
        i = input.length;
        break;
      }
      i = line.next;
      if (this.#state === "size") {
        const size = line.text.split(";", 1)[0].trim();
        if (!/^[0-9a-fA-F]{1,12}$/.test(size)) {
          throw new Http1ParseError(
            `bad chunk size line: ${JSON.stringify(line.text.slice(0, 40))}`,
          );
        }
        this.#left = parseInt(size, 16);
        this.#state = this.#left === 0 ? "trailer" : "data";
      } else if (this.#state === "data-crlf") {
        if (line.text !== "") throw new Http1ParseError("chunk data is longer than its size");
        this.#state = "size";
      } else if (line.text === "") {
        this.#state = "done"; // the blank line after the trailer fields
      }
    }
    const done = this.#state === "done";
    return { data, done, rest: done ? input.subarray(i) : new Uint8Array(0) };
  }

  /** Reads a line from `input` at `from`, buffering a partial one across pushes. */
  #readLine(input: Uint8Array, from: number): { text: string; next: number } | null {
    for (let j = from; j < input.length; j++) {
      const b = input[j];
      if (b === 10 && this.#line.at(-1) === 13) {
        this.#line.pop();
        const text = String.fromCharCode(...this.#line);
        this.#line = [];
        return { text, next: j + 1 };
      }
      this.#line.push(b);
      if (this.#line.length > MAX_LINE) {
        throw new Http1ParseError(`chunk framing line is longer than ${MAX_LINE} bytes`);
      }
    }
    return null;
  }
}
