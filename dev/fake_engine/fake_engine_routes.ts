/**
 * The fake engine's HTTP surface (dev/fake_engine/fake_engine.ts): the routes of the
 * main API server for each engine, SGLang's dummy health server on ranks ≥ 1,
 * and the handler that checks API keys, routes, and writes access lines.
 *
 * @module
 */

import type { EngineName } from "./fake_engine_command.ts";
import { apiKeyAllows, decodedPath, UNAUTHORIZED } from "./fake_engine_auth.ts";
import { completion } from "./fake_engine_completions.ts";
import { embeddings } from "./fake_engine_embeddings.ts";
import { apiError, json, NOT_ALLOWED, NOT_FOUND } from "./fake_engine_http.ts";
import { metricsResponse } from "./fake_engine_metrics.ts";
import { responses } from "./fake_engine_responses.ts";
import type { Runtime } from "./fake_engine_runtime.ts";
import type { RemoteAddr, WebHandler } from "./fake_engine_uvicorn.ts";

/** One route: answers a request with the engine's state. */
export type Route = (rt: Runtime, req: Request) => Response | Promise<Response>;

/** Routes by path, then method. */
export type Routes = Map<string, Map<string, Route>>;

/** `GET /v1/models`: the served names, with the model as `root`. */
function modelList(rt: Runtime): Response {
  const created = Math.floor(rt.started_ms / 1000);
  return json(200, {
    object: "list",
    data: rt.cfg.served_names.map((id) => ({
      id,
      object: "model",
      created,
      owned_by: rt.cfg.engine,
      root: rt.cfg.model,
      parent: null,
      max_model_len: rt.cfg.max_model_len,
    })),
  });
}

/** The routes of the main API server, by path, then method. */
export function mainRoutes(engine: EngineName): Routes {
  const r = new Map<string, Map<string, Route>>();
  const add = (method: string, path: string, route: Route) => {
    if (!r.has(path)) r.set(path, new Map());
    r.get(path)!.set(method, route);
  };
  const notReady = (rt: Runtime) =>
    rt.cfg.engine === "sglang" && !rt.ready
      ? apiError(
        503,
        "ServiceUnavailableError",
        "The server is not ready yet (loading or warming up).",
      )
      : null;
  if (engine === "vllm") {
    add("GET", "/health", () => new Response(null, { status: 200 }));
    add("GET", "/ping", () => new Response(null, { status: 200 }));
    add("POST", "/ping", () => new Response(null, { status: 200 }));
    add("GET", "/version", (rt) => json(200, { version: rt.version }));
  } else {
    const health = (rt: Runtime) => new Response(null, { status: rt.ready ? 200 : 503 });
    add("GET", "/health", health);
    add("GET", "/health_generate", health);
    add("GET", "/get_model_info", (rt) =>
      json(200, {
        model_path: rt.cfg.model,
        tokenizer_path: rt.cfg.model,
        is_generation: true,
        served_model_name: rt.cfg.served_names[0],
      }));
  }
  add("GET", "/v1/models", (rt) => modelList(rt));
  add("POST", "/v1/chat/completions", (rt, req) => notReady(rt) ?? completion(rt, req, "chat"));
  add("POST", "/v1/completions", (rt, req) => notReady(rt) ?? completion(rt, req, "text"));
  add("POST", "/v1/embeddings", (rt, req) => notReady(rt) ?? embeddings(rt, req));
  // vLLM serves it (engine reference §6.1); the fake SGLang answers FastAPI's 404
  // there, so gateways are tested against an engine without the Responses API.
  if (engine === "vllm") add("POST", "/v1/responses", (rt, req) => responses(rt, req));
  add("GET", "/metrics", (rt) => rt.cfg.metrics ? metricsResponse(rt) : NOT_FOUND());
  return r;
}

/** SGLang ranks ≥ 1: the dummy health server (engine reference §2.2). */
export function dummyRoutes(): Routes {
  const ok = () => new Response(null, { status: 200 });
  return new Map([
    ["/health", new Map([["GET", ok]])],
    ["/health_generate", new Map([["GET", ok]])],
    ["/ping", new Map([["GET", ok]])],
    [
      "/metrics",
      new Map([["GET", (rt: Runtime) => rt.cfg.metrics ? metricsResponse(rt) : NOT_FOUND()]]),
    ],
  ]);
}

/**
 * Serves `routes`; `keys` are the API keys checked before routing, as the
 * engines' middleware does, so an unknown path under a guarded prefix is 401
 * too (empty: no check, as on SGLang's dummy health server).
 */
export function handler(
  rt: Runtime,
  routes: Routes,
  keys: readonly string[],
): WebHandler {
  return async (req: Request, remote: RemoteAddr): Promise<Response> => {
    const url = new URL(req.url);
    const methods = routes.get(url.pathname);
    let res: Response;
    if (!apiKeyAllows(rt.cfg.engine, keys, req.method, decodedPath(url.pathname), req.headers)) {
      res = UNAUTHORIZED();
    } else if (methods === undefined) res = NOT_FOUND();
    else {
      const route = methods.get(req.method) ??
        (req.method === "HEAD" ? methods.get("GET") : undefined);
      if (route === undefined) res = NOT_ALLOWED();
      else {
        try {
          res = await route(rt, req);
        } catch (e) {
          res = apiError(
            500,
            "InternalServerError",
            `fake engine: ${e instanceof Error ? e.message : e}`,
          );
        }
      }
    }
    if (rt.cfg.access_log && rt.knobs.access_log) {
      rt.log.access(
        `${remote.hostname}:${remote.port}`,
        req.method,
        url.pathname + url.search,
        res.status,
      );
    }
    return res;
  };
}
