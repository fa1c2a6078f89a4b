/**
 * The gateway's OpenAI-compatible proxy (design §12): `GET /v1/models` and
 * `/v1/models/{id}`; `POST /v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings` and `/v1/responses`, routed by the body's `model` to a
 * ready endpoint of that served name ({@link EndpointTable.choose}),
 * streamed through without buffering; `/healthz` and `/readyz` for load
 * balancers (gateway/probes.ts).
 *
 * Rules:
 * - malformed JSON or a missing `model` → 400; a body over the limit → 413;
 *   an unknown model → 404 `model_not_found`; a known model with no ready
 *   endpoint, or any model before the table's first sync → 503 with
 *   `Retry-After` (all in OpenAI's error shape).
 * - hop-by-hop headers and Host are not forwarded; `X-Forwarded-For`,
 *   `-Host` and `-Proto` are (gateway/headers.ts).
 * - the client going away aborts the upstream request (the request's signal,
 *   and cancelling the relayed body).
 * - a connection failure before any response byte (UpstreamUnreachable)
 *   marks the endpoint suspect and retries on another one, at most
 *   `maxRetries` times, or holds the request while every replica is behind a
 *   down engine proxy (gateway/replica_attempts.ts); once an upstream
 *   answered, nothing is retried: a broken head, or a whole answer broken
 *   off, is a 502 `upstream_error`.
 * - an upstream dying mid-stream marks it suspect; an SSE client gets an
 *   error event and a clean end (gateway/relay.ts).
 * - outstanding requests are counted from dispatch until the response body
 *   finishes, fails or is cancelled.
 * - the request body goes to the engine byte for byte (`n`,
 *   `stream_options` and every other field untouched).
 * - an engine 404 on `/v1/responses` that is not an OpenAI error is a 404
 *   `unsupported_endpoint` (gateway/unsupported_route.ts).
 * - token usage an engine reports is counted per model and API key
 *   (gateway/usage.ts), from a bounded look at the bytes passing.
 *
 * @module
 */
import { affinityKey } from "./affinity_key.ts";
import {
  PROXY_REFUSED_HEADER,
  RETRYABLE_REFUSALS,
  SHARD_HEADER,
} from "../protocol/engine_proxy_protocol.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import { BodyTooLarge, readBodyLimited } from "./body.ts";
import type { EndpointSpec, EndpointTable } from "./endpoints.ts";
import { addForwarded, forwardHeaders, REQUEST_DROP, RESPONSE_DROP } from "./headers.ts";
import { errorResponse, openAiError } from "./openai_error.ts";
import { ApiKeyTable, type Caller, mayUse } from "./api_keys.ts";
import { GatewayMetrics, type Outcome } from "./metrics.ts";
import { relayBody } from "./relay.ts";
import { type AttemptOptions, attemptPolicy, ReplicaAttempts } from "./replica_attempts.ts";
import {
  type BodyReader,
  UpstreamClient,
  type UpstreamResponse,
  UpstreamUnreachable,
} from "./upstream_client.ts";
import { isLoopback } from "./loopback.ts";
import { healthzResponse, readyzResponse } from "./probes.ts";
import {
  STREAM_TAIL_BYTES,
  TailBuffer,
  type TokenUsage,
  usageOfWhole,
  WHOLE_TAIL_BYTES,
} from "./usage.ts";
import {
  lacksRoute,
  MAX_NOT_FOUND_BYTES,
  readUpTo,
  RESPONSES_ROUTE,
  unsupportedEndpoint,
} from "./unsupported_route.ts";

/** Default request body limit: 10 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

/**
 * Non-SSE answers up to this size (by their Content-Length) are read whole
 * and sent in one piece; larger ones are relayed as they arrive.
 */
const WHOLE_BODY_BYTES = 4 * 1024 * 1024;

/** Reads a body of `length` bytes whole; null when the upstream broke off. */
async function readWhole(
  body: BodyReader,
  length: number,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const out = new Uint8Array(length);
  let at = 0;
  try {
    for (;;) {
      const r = await body.read();
      if (r.done) return at === length ? out : null;
      out.set(r.value, at);
      at += r.value.length;
    }
  } catch {
    return null;
  }
}

/** A 502 for an engine that answered wrongly or broke off (never retried: it may have acted). */
function brokenUpstream(message: string): Response {
  return errorResponse(502, openAiError(message, "server_error", "upstream_error"));
}

/** The POST paths routed by `model`. */
export const MODEL_ROUTES: readonly string[] = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  RESPONSES_ROUTE,
];

/** A model as `/v1/models` and `/v1/models/{id}` show it. */
function modelObject(id: string) {
  return { id, object: "model", created: 0, owned_by: "llmgw" };
}

/** Settings of {@link createGateway}. */
export interface GatewayOptions extends AttemptOptions {
  /** Where request metrics go (served at `/metrics`); a fresh set by default. */
  metrics?: GatewayMetrics;
  /**
   * API keys (design §12). While none is configured the gateway is open, to
   * loopback clients only unless `openToNetwork`.
   */
  keys?: ApiKeyTable;
  /** Serve clients from any address while no API key is configured (default false). */
  openToNetwork?: boolean;
  /** Largest request body accepted, in bytes (default 10 MiB). */
  maxBodyBytes?: number;
  /** `Retry-After` seconds of a 503 for a model with no ready endpoint (default 5). */
  retryAfterSeconds?: number;
  /** The client for engine requests (a fresh pool by default). */
  client?: UpstreamClient;
  /** Where to log one-line notes (default: nowhere). */
  log?: (line: string) => void;
}

const decoder = new TextDecoder();

function invalid(message: string, param: string | null = null, code: string | null = null) {
  return errorResponse(400, openAiError(message, "invalid_request_error", code, param));
}

/** The gateway as a fetch handler (a Hono app underneath). */
export interface GatewayHandler {
  /**
   * Answers one request; `info` is Deno.serve's connection info, from which
   * the client's address is forwarded upstream (`X-Forwarded-For`).
   */
  fetch(request: Request, info?: Deno.ServeHandlerInfo): Response | Promise<Response>;
  /** Closes the idle engine connections of its own client (not of one passed in). */
  close(): void;
}

/** Creates the gateway's HTTP handler over `table`. */
export function createGateway(table: EndpointTable, options: GatewayOptions = {}): GatewayHandler {
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const retryAfter = String(options.retryAfterSeconds ?? 5);
  const client = options.client ?? new UpstreamClient();
  const log = options.log ?? (() => {});
  const app = new Hono();
  const keys = options.keys ?? new ApiKeyTable();
  const metrics = options.metrics ?? new GatewayMetrics();
  const policy = attemptPolicy(options, retryAfter, (n) => metrics.held(n));
  const outcomeOf = (status: number): Outcome =>
    status < 400
      ? "ok"
      : status === 401 || status === 403
      ? "unauthorized"
      : status === 404
      ? "model_not_found"
      : status === 503
      ? "no_ready_replica"
      : status === 502
      ? "upstream_unreachable"
      : status === 499
      ? "client_closed"
      : status < 500
      ? "bad_request"
      : "upstream_error";
  // Open to anyone, keys or not: load balancers probe without credentials.
  app.get("/healthz", () => healthzResponse());
  app.get("/readyz", () => readyzResponse(table));
  app.get(
    "/metrics",
    () =>
      new Response(metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4" } }),
  );
  const unauthorized = () =>
    errorResponse(
      401,
      openAiError(
        "Incorrect or missing API key (Authorization: Bearer …).",
        "invalid_request_error",
        "invalid_api_key",
      ),
    );

  // Without keys the gateway is open, but only to loopback clients unless
  // told otherwise (design §12); a request handed in-process has no address.
  const loopbackOnly = () =>
    errorResponse(
      403,
      openAiError(
        "This gateway has no API keys configured, so it serves loopback clients only; " +
          "create a key with `llmgw apikeys create`.",
        "invalid_request_error",
        "gateway_not_open",
      ),
    );
  const authorize = async (c: Context): Promise<Caller | Response> => {
    const caller = await keys.check(c.req.raw.headers.get("authorization"));
    if (caller === null) return unauthorized();
    if (caller.open && !options.openToNetwork) {
      const remote = (c.env as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
      if (remote?.transport === "tcp" && !isLoopback(remote.hostname)) return loopbackOnly();
    }
    return caller;
  };

  app.get("/v1/models", async (c) => {
    const caller = await authorize(c);
    if (caller instanceof Response) return caller;
    return c.json({
      object: "list",
      data: table.readyModels().filter((id) => mayUse(caller, id)).map(modelObject),
    });
  });
  // `{.+}`: served names may hold slashes (`meta-llama/Llama-3.1-8B`), sent
  // as is or escaped as `%2F` (the official clients do).
  app.get("/v1/models/:id{.+}", async (c) => {
    const caller = await authorize(c);
    if (caller instanceof Response) return caller;
    const id = c.req.param("id");
    // Like the list: a model with no ready replica, or one the key may not use, is not there.
    if (table.endpoints(id).length === 0 || !mayUse(caller, id)) {
      return errorResponse(
        404,
        openAiError(
          `The model \`${id}\` does not exist or you do not have access to it`,
          "invalid_request_error",
          "model_not_found",
        ),
      );
    }
    return c.json(modelObject(id));
  });

  const proxy = async (c: Context): Promise<Response> => {
    const t0 = performance.now();
    const req = c.req.raw;
    // Every answer but a relayed body (whose relay counts it when it ends) is
    // counted here, labelled by deployed model names only: a client's
    // made-up names are unbounded.
    let label = "";
    const done = (res: Response, outcome: Outcome = outcomeOf(res.status)) => {
      metrics.request(label, outcome, (performance.now() - t0) / 1000);
      return res;
    };
    const caller = await authorize(c);
    if (caller instanceof Response) return done(caller);
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await readBodyLimited(req, maxBody);
    } catch (e) {
      if (e instanceof BodyTooLarge) {
        return done(errorResponse(
          413,
          openAiError(e.message, "invalid_request_error", "request_too_large"),
        ));
      }
      return done(invalid("could not read the request body"));
    }
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(bytes));
    } catch {
      return done(invalid("the request body is not valid JSON", null, "invalid_json"));
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return done(invalid("the request body must be a JSON object", null, "invalid_json"));
    }
    const model = (body as Record<string, unknown>).model;
    if (typeof model !== "string" || model === "") {
      return done(invalid("you must provide a model parameter", "model", "missing_model"));
    }
    if (!table.loaded) {
      // Before the first sync with the control plane, no model is unknown yet.
      return done(errorResponse(
        503,
        openAiError("the gateway has not synced with the control plane yet", "server_error"),
        { "retry-after": retryAfter },
      ));
    }
    // A model the key may not use looks like one that does not exist.
    if (!table.isKnown(model) || !mayUse(caller, model)) {
      return done(errorResponse(
        404,
        openAiError(
          `The model \`${model}\` does not exist or you do not have access to it`,
          "invalid_request_error",
          "model_not_found",
          "model",
        ),
      ));
    }
    label = model;
    const keyLabel = caller.open ? "none" : caller.id;
    const count = (usage: TokenUsage | null) => {
      if (usage !== null) metrics.tokens(model, keyLabel, usage.prompt, usage.completion);
    };
    if (table.endpoints(model).length === 0) {
      return done(errorResponse(
        503,
        openAiError(
          `model \`${model}\` has no ready replica; retry later`,
          "server_error",
          "model_not_ready",
        ),
        { "retry-after": retryAfter },
      ));
    }

    const url = new URL(req.url);
    const headers = forwardHeaders(req.headers, REQUEST_DROP);
    // Deno.serve's connection info arrives as Hono's env (see GatewayHandler.fetch).
    const remote = (c.env as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
    addForwarded(headers, {
      clientAddress: remote?.transport === "tcp" ? remote.hostname : undefined,
      host: req.headers.get("host"),
      proto: url.protocol.slice(0, -1),
    });
    // Only prefix-affinity deployments hash the conversation (gateway/affinity_key.ts).
    const affinity = table.routing(model) === "prefix_affinity"
      ? affinityKey(url.pathname, req.headers, body)
      : null;
    // design §12: a failure before any response byte retries on another replica, or holds.
    const attempts = new ReplicaAttempts(table, model, affinity, policy);
    for (let e; (e = await attempts.next(req.signal)) !== null;) {
      const counted = table.acquire(e);
      metrics.inflight(model, e.replica_id, 1);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        counted();
        metrics.inflight(model, e.replica_id, -1);
      };
      const tAttempt = performance.now();
      let upstream: UpstreamResponse;
      try {
        // The client going away aborts the request until the engine's head
        // arrives (through req.signal); after that, Deno cancels the relayed
        // body, which closes the engine's connection.
        upstream = await client.request({
          origin: e.url,
          method: "POST",
          target: `${url.pathname}${url.search}`,
          headers: viaProxy(headers, e),
          body: bytes,
          signal: req.signal,
        });
      } catch (err) {
        release();
        const seconds = (performance.now() - tAttempt) / 1000;
        if (req.signal.aborted) {
          metrics.replicaRequest(model, e.replica_id, "client_closed", seconds);
          return done(
            errorResponse(499, openAiError("client closed request", "invalid_request_error")),
          );
        }
        // Marks it suspect; the reason comes back only while it was not (held requests retry often).
        const news = attempts.failed(e, err);
        if (err instanceof UpstreamUnreachable) {
          metrics.replicaRequest(model, e.replica_id, "upstream_unreachable", seconds);
          if (news !== null) {
            log(`gateway: ${model}: ${e.url} unreachable (${news}); marked suspect`);
          }
          continue;
        }
        // The engine began an answer and broke it (or sent garbage): not retried.
        metrics.replicaRequest(model, e.replica_id, "upstream_error", seconds);
        log(`gateway: ${model}: ${e.url} sent a broken response (${attempts.lastError}); suspect`);
        return done(
          brokenUpstream(`replica of \`${model}\` sent a broken response`),
          "upstream_error",
        );
      }
      attempts.answered(e);
      const refused = upstream.headers.get(PROXY_REFUSED_HEADER);
      if (refused !== null && RETRYABLE_REFUSALS.includes(refused)) {
        // The node's proxy runs no engine of that shard (stopped by a scale-down
        // this gateway has not heard of yet): nothing was generated, try another.
        await upstream.body?.cancel().catch(() => {});
        release();
        metrics.replicaRequest(
          model,
          e.replica_id,
          "upstream_unreachable",
          (performance.now() - tAttempt) / 1000,
        );
        const why = `the node did not reach an engine of shard ${e.shard ?? "?"} (${refused})`;
        const news = attempts.failed(e, why);
        if (news !== null) log(`gateway: ${model}: ${e.url}: ${news}; marked suspect`);
        continue;
      }
      const outHeaders = forwardHeaders(upstream.headers, RESPONSE_DROP);
      const status = upstream.status;
      if (status === 404 && url.pathname === RESPONSES_ROUTE) {
        // Small, and needed whole to tell "no such route" from the engine's own 404.
        const answer = upstream.body === null
          ? new Uint8Array(0)
          : await readUpTo(upstream.body, MAX_NOT_FOUND_BYTES);
        release();
        const unsupported = answer !== null && lacksRoute(upstream.headers, answer);
        const outcome = answer === null
          ? "upstream_error"
          : unsupported
          ? "unsupported_endpoint"
          : "model_not_found";
        metrics.replicaRequest(model, e.replica_id, outcome, (performance.now() - tAttempt) / 1000);
        if (answer === null) {
          return done(brokenUpstream(`replica of \`${model}\` sent a broken 404`), outcome);
        }
        if (unsupported) return done(unsupportedEndpoint(model, RESPONSES_ROUTE), outcome);
        return done(new Response(answer, { status, headers: outHeaders }), outcome);
      }
      const ok = status >= 200 && status < 300;
      if (upstream.body === null) {
        release();
        metrics.replicaRequest(
          model,
          e.replica_id,
          outcomeOf(status),
          (performance.now() - tAttempt) / 1000,
        );
        return done(new Response(null, { status, headers: outHeaders }));
      }
      const sse = (upstream.headers.get("content-type") ?? "").includes("text/event-stream");
      const length = Number(upstream.headers.get("content-length") ?? NaN);
      if (!sse && length <= WHOLE_BODY_BYTES) {
        // A whole answer of known, modest size: read it, then send it in one
        // piece (no stream machinery, and a broken one becomes a clean 502).
        const whole = await readWhole(upstream.body, length);
        const now = performance.now();
        release();
        metrics.firstToken(model, e.replica_id, (now - t0) / 1000);
        const outcome = whole === null ? "mid_stream_failure" : outcomeOf(status);
        metrics.replicaRequest(model, e.replica_id, outcome, (now - tAttempt) / 1000);
        if (whole === null) {
          table.markSuspect(e);
          log(`gateway: ${model}: ${e.url} died mid-response; marked suspect`);
          return done(
            brokenUpstream(`replica of \`${model}\` broke off its answer`),
            "mid_stream_failure",
          );
        }
        if (ok) count(usageOfWhole(whole));
        return done(new Response(whole, { status, headers: outHeaders }));
      }
      // A stream's tail lives as long as the stream: small. Other bodies are short-lived.
      const tail = ok ? new TailBuffer(sse ? STREAM_TAIL_BYTES : WHOLE_TAIL_BYTES) : null;
      const body = relayBody(upstream.body, {
        sse,
        onChunk: tail === null ? undefined : (chunk) => tail.push(chunk),
        onFirstChunk: () =>
          metrics.firstToken(model, e.replica_id, (performance.now() - t0) / 1000),
        onEnd(end, error) {
          release();
          const outcome = end === "error"
            ? "mid_stream_failure"
            : end === "cancelled"
            ? "client_closed"
            : outcomeOf(status);
          const now = performance.now();
          metrics.request(model, outcome, (now - t0) / 1000);
          metrics.replicaRequest(model, e.replica_id, outcome, (now - tAttempt) / 1000);
          if (tail !== null) count(tail.usage());
          if (end === "error") {
            table.markSuspect(e);
            log(`gateway: ${model}: ${e.url} died mid-response (${String(error)}); marked suspect`);
          }
        },
      });
      return new Response(body, { status, headers: outHeaders });
    }
    return done(attempts.giveUp(req.signal));
  };
  for (const path of MODEL_ROUTES) app.post(path, proxy);

  app.notFound(() =>
    errorResponse(
      404,
      openAiError("no such route on the llmgw gateway", "invalid_request_error", "not_found"),
    )
  );
  app.onError((err) => {
    log(`gateway: internal error: ${err.message}`);
    return errorResponse(500, openAiError("internal gateway error", "server_error"));
  });
  return {
    fetch: (request, info) => app.fetch(request, info),
    close() {
      if (options.client === undefined) client.close();
    },
  };
}

/**
 * The headers of one attempt: through an agent's engine proxy, its
 * credential and the shard's name are added (design §11.2).
 */
function viaProxy(headers: Headers, e: EndpointSpec): Headers {
  if (e.token === undefined || e.shard === undefined) return headers;
  const out = new Headers(headers);
  out.set("authorization", `Bearer ${e.token}`);
  out.set(SHARD_HEADER, e.shard);
  return out;
}
