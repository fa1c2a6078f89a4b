/**
 * The gateway's HTTP/1.1 client for engines (design §12): plain TCP with a pool
 * of keep-alive connections per engine, responses read by
 * gateway/http1_response.ts.
 *
 * Why not `fetch`: relaying fetch's body through JS (which the gateway must
 * do, to end an SSE stream with an error event when the engine dies) costs
 * one round trip per chunk on each side. Reading the socket directly costs
 * one per socket read, and under load a read carries several events;
 * bench/gateway_vs_nginx.sh measured 1.7× the streamed throughput
 * (docs/benchmarks.md). Agents' engine proxies speak HTTP/1.1, over TLS
 * (`https://`, verified against the cluster CA given as `caCerts`) or plain;
 * nothing else (HTTP/2, redirects, decoding) is needed.
 *
 * A failure before any response byte is {@link UpstreamUnreachable} (the
 * gateway retries on another replica); on a reused connection it is first
 * retried once on a fresh one, since the engine may have closed the idle
 * connection just as it was reused (uvicorn closes idle ones after 5 s).
 *
 * @module
 */
import { Http1ParseError, parseResponseHead, type ResponseHead } from "./http1_response.ts";
import { upstreamBody, UpstreamBodyError } from "./upstream_body.ts";
import type { BodyReader } from "../http/read_limited.ts";
import { errorMessage } from "../text/error_message.ts";
import { ENGINE_CLIENT_IDLE_MS } from "../engines/engine_keep_alive.ts";

/** No response byte arrived from the upstream: the request may go elsewhere. */
export class UpstreamUnreachable extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UpstreamUnreachable";
  }
}

/**
 * No connection could be made at all (refused, timed out, TLS handshake
 * failed): nothing was sent, and whatever listens there is down.
 */
export class UpstreamConnectFailed extends UpstreamUnreachable {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UpstreamConnectFailed";
  }
}

export { UpstreamBodyError };

/** One request to an engine. */
export interface UpstreamRequest {
  /** The engine's base URL, `http://host:port`. */
  origin: string;
  /** Method, e.g. `POST`. */
  method: string;
  /** Path and query, e.g. `/v1/chat/completions`. */
  target: string;
  /** Header fields to send (hop-by-hop, Host and Content-Length already removed). */
  headers: Headers;
  /** The whole request body. */
  body: Uint8Array;
  /** Aborts the request until the response head arrived (the connection is closed). */
  signal?: AbortSignal;
}

/** An engine's response. */
export interface UpstreamResponse {
  /** Status code. */
  status: number;
  /** Header fields as the engine sent them. */
  headers: Headers;
  /**
   * The body, or null when the response has none. Its reads reject with
   * {@link UpstreamBodyError}; cancelling it closes the connection.
   */
  body: BodyReader | null;
}

/** Settings of {@link UpstreamClient}. */
export interface UpstreamClientOptions {
  /** Idle connections kept per engine (default 256). */
  maxIdlePerOrigin?: number;
  /** An idle connection is closed after this long (default {@link ENGINE_CLIENT_IDLE_MS}, under uvicorn's 5 s). */
  idleTimeoutMs?: number;
  /** Giving up on connecting after this long (default 5 s). */
  connectTimeoutMs?: number;
  /** CA certificates (PEM) `https://` upstreams are verified against (default: the system's). */
  caCerts?: string[];
}

/**
 * Bytes asked for per socket read, at first and at most. A pending read
 * holds its buffer, so every open stream holds one: an SSE token event is a
 * few hundred bytes, so it starts small, and doubles each time a read fills
 * it (a large answer); a connection back in the pool starts small again.
 */
export const MIN_READ_BYTES = 1024;
/** See {@link MIN_READ_BYTES}. */
export const MAX_READ_BYTES = 16 * 1024;

interface Origin {
  hostname: string;
  port: number;
  /** `hostname:port`, the pool's key. */
  key: string;
  /** Over TLS. */
  tls: boolean;
  /** The Host header's value. */
  host: string;
}

interface Conn {
  readonly key: string;
  readonly tcp: Deno.TcpConn | Deno.TlsConn;
  buf: Uint8Array;
  closed: boolean;
  idleTimer?: ReturnType<typeof setTimeout>;
}

function latin1Bytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  // Always a fresh array: callers may hold on to either input.
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** A pooled HTTP/1.1 client for the gateway's upstream requests. */
export class UpstreamClient {
  readonly #idle = new Map<string, Conn[]>();
  readonly #origins = new Map<string, Origin>();
  readonly #maxIdle: number;
  readonly #idleTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #caCerts: string[] | undefined;

  /** Creates a client with an empty pool. */
  constructor(options: UpstreamClientOptions = {}) {
    this.#maxIdle = options.maxIdlePerOrigin ?? 256;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? ENGINE_CLIENT_IDLE_MS;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.#caCerts = options.caCerts;
  }

  /** Idle connections held now (all engines). */
  get idleConnections(): number {
    let n = 0;
    for (const list of this.#idle.values()) n += list.length;
    return n;
  }

  /**
   * Sends `r` and resolves once the response head arrived. Rejects with
   * {@link UpstreamUnreachable} when no response byte came, or with the
   * signal's reason when aborted.
   */
  async request(r: UpstreamRequest): Promise<UpstreamResponse> {
    const { hostname, port, key, host, tls } = this.#originOf(r.origin);
    let head = `${r.method} ${r.target} HTTP/1.1\r\nhost: ${host}\r\n` +
      `content-length: ${r.body.length}\r\n`;
    for (const [name, value] of r.headers) head += `${name}: ${value}\r\n`;
    const bytes = concat(latin1Bytes(head + "\r\n"), r.body);
    for (let attempt = 0;; attempt++) {
      r.signal?.throwIfAborted();
      // The retry after a stale pooled connection always dials afresh.
      const pooled = attempt === 0 ? this.#takeIdle(key) : undefined;
      const conn = pooled ?? await this.#connect(key, hostname, port, tls, r.signal);
      try {
        return await this.#exchange(conn, bytes, r.method, r.signal);
      } catch (e) {
        // A reused connection the engine had just closed: once more, fresh.
        if (e instanceof UpstreamUnreachable && pooled !== undefined && attempt === 0) continue;
        throw e;
      }
    }
  }

  /** An engine's address, parsed once per engine rather than per request. */
  #originOf(origin: string): Origin {
    let o = this.#origins.get(origin);
    if (o !== undefined) return o;
    const url = new URL(origin);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new UpstreamUnreachable(
        `only http:// and https:// engines are supported, got ${origin}`,
      );
    }
    const tls = url.protocol === "https:";
    const hostname = url.hostname.replace(/^\[|\]$/g, "");
    const port = Number(url.port || (tls ? 443 : 80));
    o = { hostname, port, key: `${url.protocol}//${hostname}:${port}`, host: url.host, tls };
    // Engines come and go with replicas: a bounded memo, not a growing one.
    if (this.#origins.size >= 4096) this.#origins.clear();
    this.#origins.set(origin, o);
    return o;
  }

  /** Closes every idle connection; later requests still work. */
  close(): void {
    for (const list of this.#idle.values()) for (const c of list) this.#destroy(c);
    this.#idle.clear();
  }

  async #connect(
    key: string,
    hostname: string,
    port: number,
    tls: boolean,
    signal?: AbortSignal,
  ) {
    const connecting: Promise<Deno.TcpConn | Deno.TlsConn> = tls
      ? Deno.connectTls({ hostname, port, caCerts: this.#caCerts })
      : Deno.connect({ hostname, port });
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const gaveUp = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new UpstreamConnectFailed(`connecting to ${key} timed out`)),
        this.#connectTimeoutMs,
      );
      onAbort = () => reject(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const tcp = await Promise.race([connecting, gaveUp]);
      if ("setNoDelay" in tcp) tcp.setNoDelay(true);
      // A TLS handshake that fails (another CA) is a failure to connect: try elsewhere.
      if ("handshake" in tcp) await Promise.race([tcp.handshake(), gaveUp]);
      return { key, tcp, buf: new Uint8Array(MIN_READ_BYTES), closed: false };
    } catch (e) {
      connecting.then((c) => c.close(), () => {});
      if (signal?.aborted || e instanceof UpstreamUnreachable) throw e;
      throw new UpstreamConnectFailed(`cannot connect to ${key}: ${errorMessage(e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Reads once from `c`; null at end of stream. The bytes are a fresh copy. */
  async #read(c: Conn): Promise<Uint8Array | null> {
    const buf = c.buf;
    const n = await c.tcp.read(buf);
    if (n === null) return null;
    const out = buf.slice(0, n);
    if (n === buf.length && buf.length < MAX_READ_BYTES) c.buf = new Uint8Array(buf.length * 2);
    return out;
  }

  async #exchange(
    c: Conn,
    bytes: Uint8Array,
    method: string,
    signal?: AbortSignal,
  ): Promise<UpstreamResponse> {
    const onAbort = () => this.#destroy(c);
    signal?.addEventListener("abort", onAbort, { once: true });
    let received: Uint8Array = new Uint8Array(0);
    let head: ResponseHead | null = null;
    try {
      for (let off = 0; off < bytes.length;) off += await c.tcp.write(bytes.subarray(off));
      // Interim 1xx responses are skipped (RFC 9110 §15.2).
      while (head === null || (head.status < 200 && head.status !== 101)) {
        if (head !== null) received = received.subarray(head.headBytes);
        head = parseResponseHead(received, method);
        if (head !== null) continue;
        const more = await this.#read(c);
        if (more === null) throw new Error("the connection closed before a response");
        received = concat(received, more);
      }
    } catch (e) {
      this.#destroy(c);
      if (signal?.aborted) throw signal.reason;
      if (e instanceof Http1ParseError) throw e;
      if (received.length > 0) {
        throw new UpstreamBodyError(`response head cut short: ${errorMessage(e)}`, { cause: e });
      }
      throw new UpstreamUnreachable(`${c.key}: ${errorMessage(e)}`, { cause: e });
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    const rest = received.subarray(head.headBytes);
    return {
      status: head.status,
      headers: head.headers,
      body: upstreamBody(head, rest, {
        read: () => this.#read(c),
        finish: (reusable) => this.#finish(c, reusable),
        destroy: () => this.#destroy(c),
      }),
    };
  }

  /** A connection done with one exchange: back to the pool, or closed. */
  #finish(c: Conn, reusable: boolean): void {
    const list = this.#idle.get(c.key) ?? [];
    if (!reusable || c.closed || list.length >= this.#maxIdle) {
      this.#destroy(c);
      return;
    }
    if (c.buf.length > MIN_READ_BYTES) c.buf = new Uint8Array(MIN_READ_BYTES);
    list.push(c);
    this.#idle.set(c.key, list);
    const timer = setTimeout(() => {
      const l = this.#idle.get(c.key);
      const i = l?.indexOf(c) ?? -1;
      if (i >= 0) l!.splice(i, 1);
      this.#destroy(c);
    }, this.#idleTimeoutMs);
    Deno.unrefTimer(timer);
    c.idleTimer = timer;
  }

  /** The most recently used idle connection to `key`, if any. */
  #takeIdle(key: string): Conn | undefined {
    const c = this.#idle.get(key)?.pop();
    if (c !== undefined) clearTimeout(c.idleTimer);
    return c;
  }

  #destroy(c: Conn): void {
    clearTimeout(c.idleTimer);
    if (c.closed) return;
    c.closed = true;
    try {
      c.tcp.close();
    } catch {
      // Already closed.
    }
  }
}
