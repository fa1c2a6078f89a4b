/**
 * The fake engine's HTTP/1.1 server, with uvicorn's connection handling
 * (dev/fake_engine/fake_engine.ts): vLLM and SGLang serve through uvicorn,
 * which closes a keep-alive connection idle for `timeout_keep_alive` seconds
 * after its last response (5 by default; engine reference §11). Deno.serve has
 * no such timeout (it keeps idle connections forever, kinder to a client's
 * stale pooled connection than the real engines), so the fake serves through
 * `node:http` and closes idle connections itself, as uvicorn does: the timer
 * starts when a response completes and nothing else is in flight on the
 * connection, and stops when the next request arrives. Nothing else times out
 * (uvicorn has no header or request timeout). Routes stay Web `Request` →
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

/** How the server listens and closes idle connections. */
export interface UvicornOptions {
  /** The address to bind. */
  hostname: string;
  /** The port to bind. */
  port: number;
  /** An idle keep-alive connection is closed after this long (uvicorn: `timeout_keep_alive` s). */
  keepAliveMs: number;
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
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 0, keepAliveTimeout: 0 });
  server.keepAliveTimeout = 0;
  const idle = new IdleConnections(opts.keepAliveMs);
  server.on("connection", (socket: Socket) => idle.track(socket));
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
 * response in flight ends (uvicorn's `on_response_complete`), disarmed when a
 * request arrives (uvicorn disarms at the request's first byte, this at its
 * head, which node:http reports).
 */
class IdleConnections {
  readonly #inFlight = new Map<Socket, number>();
  readonly #timers = new Map<Socket, ReturnType<typeof setTimeout>>();

  constructor(readonly keepAliveMs: number) {}

  /** A new connection: no timer until its first response (uvicorn arms none at connect). */
  track(socket: Socket): void {
    this.#inFlight.set(socket, 0);
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
  const host = headers.get("host") ?? "localhost";
  return new Request(new URL(req.url ?? "/", `http://${host}`), { method, headers, body });
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
