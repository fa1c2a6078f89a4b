/**
 * The agent's engine proxy: the one door to the node's engines (design
 * §11.2). Engines listen on loopback with an API key of their own; gateways
 * reach them here, with the node's proxy credential, and only on the routes
 * llmgw uses. Everything else an engine serves (vLLM's `/tokenize`,
 * `/pause`, `/update_weights`, SGLang's `/server_info`, …) stays unreachable
 * from the network.
 *
 * The caller names the shard in the `x-llmgw-shard` header; the proxy adds
 * the engine's key and forwards the request, streaming both bodies.
 *
 * Connections to engines are pooled, and an idle one is dropped before the
 * engine would close it: uvicorn (vLLM, SGLang) closes an idle keep-alive
 * connection after 5 s, and a request sent on it just then is lost with
 * "connection closed before message completed" — after its bytes were
 * written, so the engine may have read it, and it is never sent again.
 *
 * @module
 */
import { PROXY_REFUSED_HEADER, SHARD_HEADER } from "../protocol/engine_proxy_protocol.ts";
import { bearer, tokensEqual } from "../http/tokens.ts";
import { forwardHeaders } from "../http/forward_headers.ts";
import { errorMessage } from "../text/error_message.ts";
import { ENGINE_CLIENT_IDLE_MS } from "../engines/engine_keep_alive.ts";

/** The header that names the shard a request is for. */
export { SHARD_HEADER };

/** The routes forwarded, as "METHOD /path": what the gateway and llmgw's probes use. */
export const PROXY_ROUTES: ReadonlySet<string> = new Set([
  "POST /v1/chat/completions",
  "POST /v1/completions",
  "POST /v1/embeddings",
  "POST /v1/responses",
  "GET /v1/models",
  "GET /health",
  "GET /metrics",
]);

/** Where a shard's engine listens on this node, and its key. */
export interface EngineTarget {
  /** Its loopback port. */
  port: number;
  /** The engine's API key; null when the engine takes none. */
  key: string | null;
}

/** Settings of {@link engineProxy}. */
export interface EngineProxyOptions {
  /** The credential gateways present as `Authorization: Bearer …`. */
  token: string;
  /** The running engine of a shard, or null. */
  target: (shardId: string) => EngineTarget | null;
  /** The engines' host. Default 127.0.0.1. */
  host?: string;
  /** How requests are sent on (tests inject one). Default `fetch` with the proxy's own pool. */
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /**
   * With the default `fetch`: an idle pooled connection to an engine is not
   * reused after this long. Default {@link ENGINE_POOL_IDLE_MS}.
   */
  poolIdleMs?: number;
}

/**
 * How long an idle connection to an engine is reused: llmgw's clients' idle
 * time, under the engines' keep-alive (engines/engine_keep_alive.ts). Deno's
 * default client keeps them 90 s.
 */
export const ENGINE_POOL_IDLE_MS = ENGINE_CLIENT_IDLE_MS;

/** Request headers never forwarded: the proxy credential, the shard's name, framing. */
const REQUEST_DROP = ["authorization", SHARD_HEADER, "host", "content-length"];
/** Response headers not forwarded: the relayed body has the client connection's framing. */
const RESPONSE_DROP = ["content-length"];

function error(status: number, code: string, message: string): Response {
  return Response.json({ error: { code, message } }, {
    status,
    headers: { [PROXY_REFUSED_HEADER]: code },
  });
}

/** The proxy as a request handler. */
export function engineProxy(options: EngineProxyOptions): (req: Request) => Promise<Response> {
  const host = options.host ?? "127.0.0.1";
  const send = options.fetch ?? pooledFetch(options.poolIdleMs ?? ENGINE_POOL_IDLE_MS);
  return async (req: Request): Promise<Response> => {
    // The credential first: no token 401, another one 403, whatever the request.
    // Hashed and compared synchronously (http/tokens.ts): WebCrypto's digest is
    // an async op costing about 5× as much per request (docs/benchmarks.md).
    const presented = bearer(req.headers.get("authorization"));
    if (presented === null) {
      return error(401, "unauthorized", "the node's proxy credential is required");
    }
    if (!tokensEqual(presented, options.token)) {
      return error(403, "forbidden", "this token is not this node's proxy credential");
    }
    const url = new URL(req.url);
    if (!PROXY_ROUTES.has(`${req.method} ${url.pathname}`)) {
      return error(
        404,
        "route_not_allowed",
        `${req.method} ${url.pathname} is not forwarded to engines (allowed: ${
          [...PROXY_ROUTES].join(", ")
        })`,
      );
    }
    const shard = req.headers.get(SHARD_HEADER);
    if (shard === null || shard === "") {
      return error(400, "no_shard", `the ${SHARD_HEADER} header names no shard`);
    }
    const target = options.target(shard);
    if (target === null) {
      return error(404, "unknown_shard", `no engine of shard ${shard} runs here`);
    }
    const headers = forwardHeaders(req.headers, REQUEST_DROP);
    if (target.key !== null) headers.set("authorization", `Bearer ${target.key}`);
    let res: Response;
    try {
      res = await send(`http://${host}:${target.port}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body: req.body,
        signal: req.signal,
        redirect: "manual",
      });
    } catch (e) {
      if (req.signal.aborted) return error(499, "client_closed", "the caller went away");
      // No connection at all (the engine is stopping, or gone): nothing reached it.
      if (neverConnected(e)) {
        return error(
          502,
          "engine_refused",
          `the engine of shard ${shard} refused the connection (stopping or gone)`,
        );
      }
      // Deno's own message is only "fetch failed"; the why is in its cause.
      return error(
        502,
        "engine_unreachable",
        `the engine of shard ${shard} did not answer: ${failure(e)}`,
      );
    }
    return new Response(res.body, {
      status: res.status,
      statusText: res.statusText,
      headers: forwardHeaders(res.headers, RESPONSE_DROP),
    });
  };
}

/** A fetch through a client of its own whose idle connections last `idleMs`. */
function pooledFetch(idleMs: number): (input: string, init: RequestInit) => Promise<Response> {
  // Made on first use: a handler that never forwards holds no client.
  let client: Deno.HttpClient | undefined;
  return (input, init) => {
    client ??= Deno.createHttpClient({ poolIdleTimeout: idleMs });
    return fetch(input, { ...init, client });
  };
}

/**
 * A failed fetch's message with its cause's last clause (hyper's, e.g.
 * "client error (SendRequest): connection closed before message completed"),
 * without the engine's loopback URL.
 */
function failure(e: unknown): string {
  const cause = (e as { cause?: unknown } | null)?.cause;
  if (cause === undefined) return errorMessage(e);
  const why = errorMessage(cause);
  const at = why.indexOf("client error");
  return `${errorMessage(e)}: ${at >= 0 ? why.slice(at) : why}`;
}

/**
 * Whether a fetch failed before any connection was made: Deno reports a
 * refused or failed connect as "client error (Connect)" in the error's cause.
 */
function neverConnected(e: unknown): boolean {
  const text = `${e}|${(e as { cause?: unknown } | null)?.cause ?? ""}`;
  return /client error \(Connect\)|Connection refused/i.test(text);
}
