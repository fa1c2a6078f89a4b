import fc from "fast-check";
import { assertEquals, assertThrows } from "../tests/assert.ts";
import {
  ChunkedDecoder,
  Http1ParseError,
  MAX_HEAD_BYTES,
  parseResponseHead,
} from "./http1_response.ts";

const enc = new TextEncoder();
const bytes = (s: string) => enc.encode(s);

Deno.test("parseResponseHead: framing and keep-alive, table", () => {
  const cases: [string, string, unknown, boolean][] = [
    ["HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", "POST", { kind: "length", bytes: 5 }, true],
    ["HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", "POST", { kind: "length", bytes: 5 }, true],
    ["HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", "POST", { kind: "none" }, true],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "POST", { kind: "chunked" }, true],
    [
      "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
      "POST",
      { kind: "chunked" },
      true,
    ],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n", "POST", { kind: "close" }, false],
    ["HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n", "POST", {
      kind: "length",
      bytes: 2,
    }, false],
    ["HTTP/1.1 200 OK\r\n\r\n", "POST", { kind: "close" }, false],
    ["HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n", "POST", { kind: "length", bytes: 2 }, false],
    ["HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\ncontent-length: 2\r\n\r\n", "POST", {
      kind: "length",
      bytes: 2,
    }, true],
    ["HTTP/1.1 204 No Content\r\n\r\n", "POST", { kind: "none" }, true],
    ["HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", "HEAD", { kind: "none" }, true],
    ["HTTP/1.1 100 Continue\r\n\r\n", "POST", { kind: "none" }, true],
  ];
  for (const [text, method, framing, keepAlive] of cases) {
    const head = parseResponseHead(bytes(text + "body"), method);
    assertEquals(head?.framing, framing, text);
    assertEquals(head?.keepAlive, keepAlive, text);
    assertEquals(head?.headBytes, text.length, text);
  }
});

Deno.test("parseResponseHead: status, fields in order, reason phrase optional", () => {
  const head = parseResponseHead(
    bytes("HTTP/1.1 503\r\nRetry-After: 5\r\nX-A: 1\r\nx-a: 2\r\ncontent-length: 0\r\n\r\n"),
  );
  assertEquals(head?.status, 503);
  assertEquals(head?.headers.get("retry-after"), "5");
  assertEquals(head?.headers.get("x-a"), "1, 2");
});

Deno.test("parseResponseHead: incomplete heads wait; malformed ones are refused with the reason", () => {
  assertEquals(parseResponseHead(bytes("HTTP/1.1 200 OK\r\ncontent-len")), null);
  assertEquals(parseResponseHead(new Uint8Array(0)), null);
  const bad: [string, string][] = [
    ["SSH-2.0-OpenSSH_9.2\r\n\r\n", "bad status line"],
    ["HTTP/2 200\r\n\r\n", "bad status line"],
    ["HTTP/1.1 2000 OK\r\n\r\n", "bad status line"],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"],
    ["HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n", "bad header line"],
    ["HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n", "bad content-length"],
    ["HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", "bad content-length"],
  ];
  for (const [text, why] of bad) {
    assertThrows(() => parseResponseHead(bytes(text)), Http1ParseError, why);
  }
  assertThrows(
    () => parseResponseHead(new Uint8Array(MAX_HEAD_BYTES + 1).fill(65)),
    Http1ParseError,
    "longer than",
  );
});

Deno.test("ChunkedDecoder: extensions, trailers, and what follows the body", () => {
  const d = new ChunkedDecoder();
  const out = d.push(bytes("5;name=value\r\nhello\r\n1\r\n!\r\n0\r\nx-trailer: 1\r\n\r\nNEXT"));
  assertEquals(
    new TextDecoder().decode(out.data.reduce((a, b) => new Uint8Array([...a, ...b]))),
    "hello!",
  );
  assertEquals(out.done, true);
  assertEquals(new TextDecoder().decode(out.rest), "NEXT");
});

Deno.test("ChunkedDecoder: malformed framing is refused", () => {
  assertThrows(() => new ChunkedDecoder().push(bytes("zz\r\n")), Http1ParseError, "bad chunk size");
  assertThrows(
    () => new ChunkedDecoder().push(bytes("2\r\nabc\r\n")),
    Http1ParseError,
    "longer than its size",
  );
  assertThrows(
    () => new ChunkedDecoder().push(new Uint8Array(5000).fill(49)),
    Http1ParseError,
    "longer than 4096",
  );
});

Deno.test("ChunkedDecoder: any body, chunked any way and split anywhere, decodes to itself", () => {
  fc.assert(
    fc.property(
      fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { maxLength: 8 }),
      fc.array(fc.nat(), { maxLength: 10 }),
      fc.boolean(),
      (chunks, cuts, withTrailer) => {
        const parts: Uint8Array[] = [];
        for (const c of chunks) {
          parts.push(bytes(`${c.length.toString(16)}${cuts.length % 2 ? ";ext=1" : ""}\r\n`));
          parts.push(c, bytes("\r\n"));
        }
        parts.push(bytes(withTrailer ? "0\r\nx-t: 1\r\n\r\n" : "0\r\n\r\n"), bytes("REST"));
        const wire = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
        let at = 0;
        for (const p of parts) {
          wire.set(p, at);
          at += p.length;
        }
        const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
        const pieces: Uint8Array[] = [];
        let from = 0;
        for (const p of [...points, wire.length]) {
          pieces.push(wire.slice(from, p));
          from = p;
        }
        const d = new ChunkedDecoder();
        const got: number[] = [];
        let rest: number[] = [];
        for (const piece of pieces) {
          if (d.done) {
            rest.push(...piece);
            continue;
          }
          const out = d.push(piece);
          for (const x of out.data) got.push(...x);
          if (out.done) rest = [...out.rest];
        }
        assertEquals(d.done, true);
        assertEquals(got, chunks.flatMap((c) => [...c]));
        assertEquals(new TextDecoder().decode(new Uint8Array(rest)), "REST");
      },
    ),
    { numRuns: 300 },
  );
});
