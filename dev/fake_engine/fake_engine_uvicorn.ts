/**
 * The fake engine's HTTP/1.1 server, with uvicorn's connection handling
 * (dev/fake_engine/fake_engine.ts): vLLM and SGLang serve through uvicorn,
 * which closes a keep-alive connection idle for `timeout_keep_alive` seconds
 * after its last response (5 by default; engine reference §11). Deno.serve has
 * no such timeout (it keeps idle connections forever, kinder to a client's
 * stale pooled connection than the real engines), so the fake serves through
 * `node:http` and closes idle connections itself, as uvicorn does: the timer
 * starts when a response completes and nothing else is in flight on the
 * connection, and stops at the next byte the client sends. Nothing else times
 * out (uvicorn has no header or request timeout). The request head's size
 * limit is that of uvicorn's HTTP implementation (`http`), and requests are
 * routed on the request line's path, never on `Host`. Routes stay Web `Request` →
 * `Response` handlers; bodies are sent with a `content-length`, except
 * `text/event-stream`, which is streamed chunk by chunk as Starlette's
 * StreamingResponse does.
 *
 * @module
 */

import http from "node:http";
import type { Socket } from "node:net";

/** The peer of a request, for the access log. */
export interface RemoteAddr {
  /** The client's address. */
  hostname: string;
  /** The client's port. */
  port: number;
}

/** A route handler: answers a Web request from a client. */
export type WebHandler = (req: Request, remote: RemoteAddr) => Promise<Response>;

/**
 * uvicorn's HTTP/1.1 implementation (its `--http`; engine reference §11):
 * `httptools` has no limit on a request head's size, `h11` refuses a head
 * still incomplete past 16 KiB with a 400.
 */
export type UvicornHttp = "httptools" | "h11";

/**
 * h11's `DEFAULT_MAX_INCOMPLETE_EVENT_SIZE`, which uvicorn's h11
 * implementation uses when `h11_max_incomplete_event_size` is not set.
 */
export const H11_MAX_INCOMPLETE_EVENT_SIZE = 16 * 1024;

/** httptools sets no limit; node:http needs a number, and this one no head reaches. */
const NO_HEADER_LIMIT = 2 ** 31 - 1;

/** uvicorn's answer to a request its parser refuses (`send_400_response`), then it closes. */
const INVALID_REQUEST = "Invalid HTTP request received.";

/** How the server listens and closes idle connections. */
export interface UvicornOptions {
  /** The address to bind. */
  hostname: string;
  /** The port to bind. */
  port: number;
  /** An idle keep-alive connection is closed after this long (uvicorn: `timeout_keep_alive` s). */
  keepAliveMs: number;
  /** uvicorn's HTTP implementation, whose request-head limit the server keeps. */
  http: UvicornHttp;
  /** Called once the port is bound, with the port (the one chosen, for port 0). */
  onListen: (port: number) => void;
  /** Called when the port cannot be bound (`code` as Node names it, e.g. `EADDRINUSE`). */
  onListenError: (e: Error & { code?: string }) => void;
  /** The answer when the handler throws. */
  onError: (e: unknown) => Response;
}

/** A running server. */
export interface UvicornServer {
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

/** Serves `handler` on `opts.hostname:opts.port`, closing idle connections as uvicorn does. */
export function serveUvicorn(opts: UvicornOptions, handler: WebHandler): UvicornServer {
  // Node's own keep-alive timer (keepAliveTimeout plus a fixed 1 s buffer in
  // Deno's node:http) is off; the one below owns idle connections. Node's
  // header and request timeouts are off too, as uvicorn has none.
  const server = http.createServer({
    requestTimeout: 0,
    headersTimeout: 0,
    keepAliveTimeout: 0,
    maxHeaderSize: opts.http === "h11" ? H11_MAX_INCOMPLETE_EVENT_SIZE : NO_HEADER_LIMIT,
  });
  server.keepAliveTimeout = 0;
  const idle = new IdleConnections(opts.keepAliveMs);
  server.on("connection", (socket: Socket) => idle.track(socket));
  // Node would answer 431 to a head over the limit and a bare 400 to other
  // parser errors; uvicorn answers every parser error with its own 400 and closes.
  server.on("clientError", (e: Error & { code?: string }, socket: Socket) => {
    if (!socket.writable || e.code === "ECONNRESET") {
      socket.destroy();
      return;
    }
    socket.end(
      "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n" +
        `content-length: ${INVALID_REQUEST.length}\r\nconnection: close\r\n\r\n${INVALID_REQUEST}`,
    );
  });
  server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    idle.requestStarted(req.socket);
    res.once("close", () => idle.responseEnded(req.socket));
    void answer(req, res, handler, opts.onError);
  });
  server.once("error", (e: Error) => {
    if (!server.listening) opts.onListenError(e);
  });
  server.listen(opts.port, opts.hostname, () => {
    const addr = server.address();
    opts.onListen(typeof addr === "object" && addr !== null ? addr.port : opts.port);
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        idle.clear();
      }),
  };
}

/**
 * Each connection's requests in flight and idle timer: armed when the last
 * response in flight ends (uvicorn's `on_response_complete`), disarmed by any
 * bytes the client sends (uvicorn's `data_received`), so a next request whose
 * head arrives slowly is not cut.
 */
class IdleConnections {
  readonly #inFlight = new Map<Socket, number>();
  readonly #timers = new Map<Socket, ReturnType<typeof setTimeout>>();

  constructor(readonly keepAliveMs: number) {}

  /** A new connection: no timer until its first response (uvicorn arms none at connect). */
  track(socket: Socket): void {
    this.#inFlight.set(socket, 0);
    onBytes(socket, () => this.#disarm(socket));
    socket.once("close", () => {
      this.#disarm(socket);
      this.#inFlight.delete(socket);
    });
  }

  requestStarted(socket: Socket): void {
    this.#disarm(socket);
    this.#inFlight.set(socket, (this.#inFlight.get(socket) ?? 0) + 1);
  }

  responseEnded(socket: Socket): void {
    const left = Math.max(0, (this.#inFlight.get(socket) ?? 1) - 1);
    this.#inFlight.set(socket, left);
    if (left > 0 || socket.destroyed) return;
    this.#disarm(socket);
    this.#timers.set(socket, setTimeout(() => socket.destroy(), this.keepAliveMs));
  }

  clear(): void {
    for (const socket of [...this.#timers.keys()]) this.#disarm(socket);
  }

  #disarm(socket: Socket): void {
    const t = this.#timers.get(socket);
    if (t !== undefined) clearTimeout(t);
    this.#timers.delete(socket);
  }
}

/** The part of node:http's parser a connection's bytes reach (Node's `HTTPParser` binding). */
interface ParserSlots {
  [slot: number]: unknown;
  constructor: { kOnExecute?: number };
}

/**
 * Calls `seen` whenever bytes from the client reach the connection's parser.
 * node:http feeds the socket to its parser directly (no 'data' events), then
 * calls the parser's `kOnExecute` callback after each chunk, which is wrapped
 * here. Without that hook (another node:http), the request's head still
 * disarms the timer (`requestStarted`).
 */
function onBytes(socket: Socket, seen: () => void): void {
  const parser = (socket as Socket & { parser?: ParserSlots }).parser;
  const slot = parser?.constructor.kOnExecute;
  if (parser === undefined || slot === undefined) return;
  const next = parser[slot];
  if (typeof next !== "function") return;
  parser[slot] = function (this: unknown, ...args: unknown[]) {
    seen();
    return next.apply(this, args);
  };
}

/** Runs `handler` on one node:http request and writes its Response back. */
async function answer(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  handler: WebHandler,
  onError: (e: unknown) => Response,
): Promise<void> {
  let response: Response;
  try {
    const request = await toRequest(req);
    response = await handler(request, {
      hostname: req.socket.remoteAddress ?? "",
      port: req.socket.remotePort ?? 0,
    });
  } catch (e) {
    response = onError(e);
  }
  try {
    await writeResponse(response, res);
  } catch {
    // The client went away mid-response; the connection is closed with it.
    res.destroy();
  }
}

/** The Web Request for a node:http request, its body read whole (the engines' routes read JSON). */
async function toRequest(req: http.IncomingMessage): Promise<Request> {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  const method = req.method ?? "GET";
  const body = method === "GET" || method === "HEAD" ? null : await readAll(req);
  return new Request(requestUrl(req.url ?? "/"), { method, headers, body });
}

/**
 * The URL routes read, from the request line's target alone, as Starlette
 * routes on the path uvicorn parsed (`Host` stays a header: an odd one is no
 * error, and `//v1/models` keeps its path). An absolute-form target keeps its
 * path and query; anything else (`*`) is the root.
 */
export function requestUrl(target: string): URL {
  try {
    if (target.startsWith("/")) return new URL(`http://localhost${target}`);
    const u = new URL(target);
    return new URL(`http://localhost${u.pathname}${u.search}`);
  } catch {
    return new URL("http://localhost/");
  }
}

/** Writes `response` to `res`: a `content-length` body, or SSE chunk by chunk. */
async function writeResponse(response: Response, res: http.ServerResponse): Promise<void> {
  res.statusCode = response.status;
  for (const [name, value] of response.headers) res.setHeader(name, value);
  const streamed = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
  if (response.body === null) {
    res.end();
    return;
  }
  if (!streamed) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    res.setHeader("content-length", bytes.byteLength);
    res.end(bytes);
    return;
  }
  // Starlette sends a stream's head before its first event, so a request
  // still queued for a slot has its 200 at once; node:http would wait for a body.
  res.flushHeaders();
  const reader = response.body.getReader();
  // A client that goes away cancels the stream, as Deno.serve did: the route sees it.
  const onClose = () => {
    if (!res.writableFinished) void reader.cancel().catch(() => {});
  };
  res.once("close", onClose);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (res.destroyed) return;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off("drain", go);
            res.off("close", go);
            resolve();
          };
          res.once("drain", go);
          res.once("close", go);
        });
      }
    }
    res.end();
  } finally {
    res.off("close", onClose);
  }
}

/** A request's whole body (events, not the async iterator: fewer promises per request). */
function readAll(req: http.IncomingMessage): Promise<Uint8Array<ArrayBuffer>> {
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    req.on("data", (c: Uint8Array) => chunks.push(c));
    req.once("end", () => resolve(concat(chunks)));
    req.once("error", reject);
    req.once("close", () => {
      if (!req.complete) reject(new Error("the client closed the connection mid-request"));
    });
  });
}

function concat(chunks: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
