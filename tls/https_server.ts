/**
 * An HTTPS server for fetch-style handlers (design §11.2), on `node:https`:
 * unlike `Deno.serve` it can ask for client certificates, and it can swap
 * its certificate while it runs (`setSecureContext`), so a renewed
 * certificate takes effect on the next handshake with no restart and no
 * dropped connection. Handlers see whether the peer presented a certificate
 * from the trusted CA ({@link HttpsRequestInfo.peerVerified}); each decides
 * what that means for its routes.
 *
 * A plain-HTTP request to this port fails in the TLS handshake.
 *
 * @module
 */
import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import type { Buffer } from "node:buffer";

/** What a handler learns about the connection besides the request. */
export interface HttpsRequestInfo {
  /** The peer's address. */
  remoteAddr: { hostname: string; port: number };
  /** True when the peer presented a client certificate that chains to the trusted CA. */
  peerVerified: boolean;
  /** The verified client certificate's common name, or null. */
  peerCommonName: string | null;
}

/** A fetch-style handler with connection details. */
export type HttpsHandler = (req: Request, info: HttpsRequestInfo) => Response | Promise<Response>;

/** Certificate, key and the CA client certificates are checked against. */
export interface ServingCertificate {
  /** The serving certificate, PEM (with its chain, if any). */
  cert: string;
  /** Its private key, PEM. */
  key: string;
  /** CA certificates (PEM) client certificates must chain to; none: no client certificates. */
  ca?: string;
}

/** Settings of {@link serveHttps}. */
export interface ServeHttpsOptions extends ServingCertificate {
  /** Host to listen on. */
  hostname: string;
  /** Port (0: any free one). */
  port: number;
}

/** A running HTTPS server. */
export interface HttpsServer {
  /** Where it listens. */
  readonly addr: Deno.NetAddr;
  /** Uses a new certificate (and CA) from the next handshake on. */
  setCertificate(c: ServingCertificate): void;
  /**
   * Stops listening and closes connections once their requests are
   * answered, or after `graceMs` (default 5 000) whatever they are doing.
   */
  shutdown(graceMs?: number): Promise<void>;
}

/** Headers that belong to the connection, not the message. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade"]);

/** Request bodies larger than this are refused (413) before the handler runs. */
export const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

class BodyTooLarge extends Error {}

/** The request body, whole: requests here are small JSON, and a buffer is far cheaper than a stream. */
function readBody(req: IncomingMessage): Promise<Uint8Array<ArrayBuffer> | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) {
        req.destroy();
        reject(new BodyTooLarge());
      } else chunks.push(chunk);
    });
    req.on("end", () => {
      if (chunks.length === 0) resolve(null);
      else if (chunks.length === 1) resolve(new Uint8Array(chunks[0]));
      else {
        const out = new Uint8Array(size);
        let off = 0;
        for (const c of chunks) {
          out.set(c, off);
          off += c.length;
        }
        resolve(out);
      }
    });
    req.on("error", reject);
  });
}

async function toRequest(req: IncomingMessage, abort: AbortSignal): Promise<Request> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const host = req.headers.host ?? "localhost";
  const method = req.method ?? "GET";
  const body = method === "GET" || method === "HEAD" ? null : await readBody(req);
  return new Request(`https://${host}${req.url ?? "/"}`, { method, headers, body, signal: abort });
}

/**
 * Bodies relayed as they come, with backpressure: server-sent events, and
 * model bytes to peers (agent/peer_server.ts: 16 MiB ranges are not held in
 * memory, and the asker sees bytes as they are read). Others are buffered.
 */
function streams(answer: Response): boolean {
  return isSse(answer) || isPeerBytes(answer);
}

function isSse(answer: Response): boolean {
  return (answer.headers.get("content-type") ?? "").startsWith("text/event-stream");
}

/** Model bytes to a peer: the only body served here as `application/octet-stream`. */
function isPeerBytes(answer: Response): boolean {
  return (answer.headers.get("content-type") ?? "").startsWith("application/octet-stream");
}

async function writeResponse(res: ServerResponse, answer: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  answer.headers.forEach((value, name) => {
    if (name === "set-cookie") headers[name] = answer.headers.getSetCookie();
    else headers[name] = value;
  });
  if (answer.body === null || !streams(answer)) {
    const body = answer.body === null ? null : new Uint8Array(await answer.arrayBuffer());
    res.writeHead(answer.status, headers);
    res.end(body ?? undefined);
    return;
  }
  res.writeHead(answer.status, headers);
  // Peer bytes: the head goes now, not with the first byte, since a peer streaming a chunk still
  // being written may have none yet and its asker should know it is being served. Not SSE: an
  // engine that dies before its first token must still look "closed before the head" to the
  // gateway behind the engine proxy, which then retries another replica (gateway/upstream_client.ts).
  if (isPeerBytes(answer)) res.flushHeaders();
  const reader = answer.body.getReader();
  const closed = new Promise<void>((resolve) => res.once("close", () => resolve()));
  try {
    while (true) {
      const next = await Promise.race([reader.read(), closed.then(() => null)]);
      if (next === null) {
        await reader.cancel().catch(() => {});
        return;
      }
      if (next.done) break;
      // Backpressure: wait for the socket to drain before reading more.
      if (!res.write(next.value)) {
        await Promise.race([new Promise((r) => res.once("drain", r)), closed]);
      }
    }
    res.end();
  } catch {
    res.destroy();
  }
}

function commonName(socket: TLSSocket): string | null {
  const subject = socket.getPeerCertificate?.()?.subject as { CN?: string } | undefined;
  return typeof subject?.CN === "string" ? subject.CN : null;
}

/**
 * Serves `handler` over HTTPS; resolves once it listens.
 *
 * @throws The listen error (e.g. `EADDRINUSE`) when it cannot bind.
 */
export async function serveHttps(
  o: ServeHttpsOptions,
  handler: HttpsHandler,
): Promise<HttpsServer> {
  const tlsOptions = (c: ServingCertificate) => ({
    cert: c.cert,
    key: c.key,
    ...(c.ca === undefined ? {} : { ca: c.ca, requestCert: true, rejectUnauthorized: false }),
  });
  const server = https.createServer(tlsOptions(o), (req, res) => {
    const socket = req.socket as TLSSocket;
    const abort = new AbortController();
    res.once("close", () => abort.abort());
    const info: HttpsRequestInfo = {
      remoteAddr: { hostname: socket.remoteAddress ?? "", port: socket.remotePort ?? 0 },
      peerVerified: o.ca !== undefined && socket.authorized === true,
      peerCommonName: socket.authorized ? commonName(socket) : null,
    };
    toRequest(req, abort.signal)
      .then((request) => handler(request, info))
      .then((answer) => writeResponse(res, answer))
      .catch((e) => {
        if (e instanceof BodyTooLarge && !res.headersSent) {
          res.writeHead(413, { "content-type": "application/json", connection: "close" });
          res.end(JSON.stringify({
            error: {
              code: "too_large",
              message: `request body is larger than ${MAX_REQUEST_BYTES} bytes`,
            },
          }));
        } else if (!res.headersSent) {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { code: "internal", message: "internal error" } }));
        } else res.destroy();
      });
  });
  // A failed handshake (plain HTTP, an untrusted client) is the peer's problem, not ours.
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    addr: { transport: "tcp", hostname: address.address, port: address.port },
    setCertificate(c) {
      server.setSecureContext(tlsOptions({ ...c, ca: c.ca ?? o.ca }));
    },
    shutdown(graceMs = 5_000) {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections?.();
        // Connections with a request in flight finish it; none is held past a bound.
        setTimeout(() => server.closeAllConnections?.(), graceMs).unref?.();
      });
    },
  };
}

/** Whether an error from {@link serveHttps} means the port is taken. */
export function isAddressInUse(e: unknown): boolean {
  return (e as { code?: string } | null)?.code === "EADDRINUSE";
}
