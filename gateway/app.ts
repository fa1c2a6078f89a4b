/**
 * The gateway's OpenAI-compatible HTTP app (design §12): `GET /v1/models` and
 * `/v1/models/{id}`; `POST /v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings` and `/v1/responses`, routed by the body's `model` to a
 * ready endpoint of that served name, streamed through without buffering;
 * `/healthz` and `/readyz` for load balancers (gateway/probes.ts); `/metrics`.
 *
 * A model request is a pipeline, one module per step:
 * - auth (here; middleware on the other routes that need a key): the API
 *   key or, on an open gateway, a loopback client; 401/403 otherwise;
 * - the model request (gateway/model_request.ts): bounded body, parse,
 *   `model`; 400/413;
 * - the table (here): not synced yet → 503; an unknown model or one the key
 *   may not use → 404 `model_not_found`; no ready replica → 503;
 * - dispatch (gateway/dispatch.ts): choose → acquire → send → retry or hold
 *   before the first byte;
 * - the answer (gateway/answer.ts): whole, relayed, empty, or a 404 on
 *   `/v1/responses` read to tell an engine without the route;
 * - one record per request (gateway/request_record.ts) counts its outcome,
 *   latency, first byte, attempts in flight and tokens, each exactly once.
 *
 * Hop-by-hop headers and Host are not forwarded; `X-Forwarded-For`, `-Host`
 * and `-Proto` are (gateway/headers.ts). The body reaches the engine byte for
 * byte.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { affinityKey } from "./affinity_key.ts";
import { answer } from "./answer.ts";
import { ApiKeyTable, type Caller, mayUse } from "./api_keys.ts";
import { createDispatch, type Dispatch } from "./dispatch.ts";
import type { EndpointTable } from "./endpoints.ts";
import { addForwarded, forwardHeaders, REQUEST_DROP } from "./headers.ts";
import { isLoopback } from "./loopback.ts";
import { GatewayMetrics } from "./metrics.ts";
import { DEFAULT_MAX_BODY_BYTES, readModelRequest } from "./model_request.ts";
import { healthzResponse, readyzResponse } from "./probes.ts";
import {
  internalError,
  loopbackOnly,
  modelNotFound,
  modelNotReady,
  noSuchRoute,
  notSynced,
  unauthorized,
} from "./refusals.ts";
import { type AttemptOptions, attemptPolicy } from "./replica_attempts.ts";
import { RequestRecord } from "./request_record.ts";
import { RESPONSES_ROUTE } from "./unsupported_route.ts";
import { UpstreamClient } from "./upstream_client.ts";

/** The POST paths routed by `model`. */
export const MODEL_ROUTES: readonly string[] = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  RESPONSES_ROUTE,
];

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
  /**
   * How a model request reaches a replica (default: over `client`, with the
   * retries and holds of the attempt options). Tests pass their own.
   */
  dispatch?: Dispatch;
  /** Where to log one-line notes (default: nowhere). */
  log?: (line: string) => void;
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

/** What the app's handlers see: Deno.serve's connection info, and who the caller is. */
type GatewayEnv = {
  Bindings: Partial<Deno.ServeHandlerInfo>;
  Variables: {
    /** Who the request is (set by the auth middleware). */
    caller: Caller;
  };
};

/** A request that passed auth. */
interface Authenticated {
  /** Who it is. */
  caller: Caller;
  /** The client's TCP address; undefined for a request handed in-process. */
  address: string | undefined;
}

/** Creates the gateway's HTTP handler over `table`. */
export function createGateway(table: EndpointTable, options: GatewayOptions = {}): GatewayHandler {
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const retryAfter = String(options.retryAfterSeconds ?? 5);
  const client = options.client ?? new UpstreamClient();
  const log = options.log ?? (() => {});
  const keys = options.keys ?? new ApiKeyTable();
  const metrics = options.metrics ?? new GatewayMetrics();
  const dispatch = options.dispatch ?? createDispatch({
    table,
    client,
    log,
    policy: attemptPolicy(options, retryAfter, (n) => metrics.held(n)),
  });
  const app = new Hono<GatewayEnv>();

  // Open to anyone, keys or not: load balancers probe without credentials.
  app.get("/healthz", () => healthzResponse());
  app.get("/readyz", () => readyzResponse(table));
  app.get(
    "/metrics",
    () =>
      new Response(metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4" } }),
  );

  // Without keys the gateway is open, but only to loopback clients unless
  // told otherwise (design §12); a request handed in-process has no address.
  const authenticate = async (c: Context<GatewayEnv>): Promise<Authenticated | Response> => {
    const caller = await keys.check(c.req.header("authorization") ?? null);
    if (caller === null) return unauthorized();
    const remote = c.env?.remoteAddr;
    const address = remote?.transport === "tcp" ? remote.hostname : undefined;
    if (caller.open && !options.openToNetwork && address !== undefined && !isLoopback(address)) {
      return loopbackOnly();
    }
    return { caller, address };
  };
  const auth = createMiddleware<GatewayEnv>(async (c, next) => {
    const who = await authenticate(c);
    if (who instanceof Response) return who;
    c.set("caller", who.caller);
    await next();
  });

  app.get("/v1/models", auth, (c) =>
    c.json({
      object: "list",
      data: table.readyModels().filter((id) => mayUse(c.var.caller, id)).map(modelObject),
    }));
  // `{.+}`: served names may hold slashes (`meta-llama/Llama-3.1-8B`), sent
  // as is or escaped as `%2F` (the official clients do).
  app.get("/v1/models/:id{.+}", auth, (c) => {
    const id = c.req.param("id");
    // Like the list: a model with no ready replica, or one the key may not use, is not there.
    if (table.endpoints(id).length === 0 || !mayUse(c.var.caller, id)) return modelNotFound(id);
    return c.json(modelObject(id));
  });

  /** A model request, from auth to the answer, reporting to its record. */
  const modelRequest = async (c: Context<GatewayEnv>, record: RequestRecord): Promise<Response> => {
    const who = await authenticate(c);
    if (who instanceof Response) return who;
    const { caller } = who;
    const req = c.req.raw;
    const read = await readModelRequest(req, maxBody);
    if (read instanceof Response) return read;
    const { model } = read;
    // Before the first sync with the control plane, no model is unknown yet.
    if (!table.loaded) return notSynced(retryAfter);
    // A model the key may not use looks like one that does not exist.
    if (!table.isKnown(model) || !mayUse(caller, model)) return modelNotFound(model, "model");
    record.routed(model, caller.open ? "none" : caller.id);
    if (table.endpoints(model).length === 0) return modelNotReady(model, retryAfter);

    const url = new URL(req.url);
    const headers = forwardHeaders(req.headers, REQUEST_DROP);
    addForwarded(headers, {
      clientAddress: who.address,
      host: req.headers.get("host"),
      proto: url.protocol.slice(0, -1),
    });
    const sent = await dispatch({
      model,
      target: `${url.pathname}${url.search}`,
      headers,
      bytes: read.bytes,
      // Only prefix-affinity deployments hash the conversation (gateway/affinity_key.ts).
      affinity: table.routing(model) === "prefix_affinity"
        ? affinityKey(url.pathname, req.headers, read.body)
        : null,
      signal: req.signal,
    }, record);
    return sent instanceof Response ? sent : await answer(url.pathname, model, sent, record);
  };
  // One handler, not a middleware chain: this is every model request's path.
  for (const path of MODEL_ROUTES) {
    app.post(path, async (c) => {
      // Counted once, refusals by auth included (gateway/request_record.ts).
      const record = new RequestRecord(metrics);
      try {
        return record.settle(await modelRequest(c, record));
      } catch (e) {
        record.finish("upstream_error"); // onError answers a 500
        throw e;
      }
    });
  }

  app.notFound(() => noSuchRoute());
  app.onError((err) => {
    log(`gateway: internal error: ${err.message}`);
    return internalError();
  });
  return {
    fetch: (request, info) => app.fetch(request, info),
    close() {
      if (options.client === undefined) client.close();
    },
  };
}

/** A model as `/v1/models` and `/v1/models/{id}` show it. */
function modelObject(id: string) {
  return { id, object: "model", created: 0, owned_by: "llmgw" };
}
