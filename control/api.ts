/**
 * The control plane's HTTP API: one Hono app with route groups per resource
 * (api/*.ts) mounted with `app.route`, every parameter, query and body
 * validated at the edge with zod, and one `onError` that maps domain errors
 * (errors.ts) to statuses. Errors are `{error: {code, message, path}}`, 4xx
 * for bad input, never a 500 for a malformed request.
 *
 * @module
 */
import { modelRoutes } from "./api/models.ts";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { agentRoutes } from "./api/agent.ts";
import { apiKeyRoutes } from "./api/api_keys.ts";
import { type ApiAuth, authorizer } from "./api/auth.ts";
import { deploymentRoutes, planRoutes } from "./api/deployments.ts";
import { eventRoutes } from "./api/events.ts";
import { gatewayRoutes } from "./api/gateway.ts";
import { nodeRoutes } from "./api/nodes.ts";
import { replicaRoutes } from "./api/replicas.ts";
import type { Authorizer, RouteGroup, RouteSpec } from "./api/route.ts";
import { systemRoutes } from "./api/system.ts";
import { tokenRoutes } from "./api/tokens.ts";
import { ApiError } from "./api_error.ts";
import type { ControlPlane } from "./control_plane.ts";
import type { ControlError } from "./errors.ts";
import { domainErrorStatus } from "./error_status.ts";
import { HttpStats } from "./metrics.ts";
import { NotLeaderError, StoreError } from "./store/store.ts";
import { openApiDocument } from "./openapi.ts";
import { createLogger } from "../log/log.ts";
import type { ErrorBody } from "../protocol/error_body.ts";

/** Unexpected errors: one JSON line each (log/log.ts), the body says only "internal error". */
const log = createLogger("control-api");

export type { ApiAuth };

/** Largest request body accepted. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The status and body of an error, or null for an unexpected one. */
function errorAnswer(err: unknown): { status: number; body: ErrorBody } | null {
  if (err instanceof ApiError) return { status: err.status, body: err.body() };
  // NotLeaderError is a StoreError: the more precise answer first.
  if (err instanceof NotLeaderError) {
    return {
      status: 503,
      body: { error: { code: "not_leader", message: err.message, path: null } },
    };
  }
  if (err instanceof StoreError) {
    return {
      status: 503,
      body: { error: { code: "store_unavailable", message: err.message, path: null } },
    };
  }
  const status = domainErrorStatus(err);
  if (status === null) return null;
  const e = err as ControlError;
  return { status, body: { error: { code: e.code, message: e.message, path: e.path } } };
}

/** Every route group of a control plane, in the order they are mounted. */
function groups(
  cp: ControlPlane,
  stats: HttpStats,
  specs: () => RouteSpec[],
  caHash: string | null,
): RouteGroup[] {
  return [
    systemRoutes(cp, stats, () => openApiDocument(specs())),
    agentRoutes(cp),
    nodeRoutes(cp),
    deploymentRoutes(cp),
    planRoutes(cp),
    replicaRoutes(cp),
    eventRoutes(cp),
    apiKeyRoutes(cp),
    tokenRoutes(cp, caHash),
    gatewayRoutes(cp),
    modelRoutes(cp),
  ];
}

/** Every route declaration, for the OpenAPI document and the auth matrix. */
export function controlRoutes(cp: ControlPlane): RouteSpec[] {
  const all = groups(cp, new HttpStats(), () => all.flatMap((g) => g.specs()), null);
  return all.flatMap((g) => g.specs());
}

/**
 * Pages served beside the API at `/` (the dashboard, ui/), outside the
 * OpenAPI document. The composition root passes them in, so control/ does
 * not import the dashboard (design §3.1).
 */
export type ControlPages = (cp: ControlPlane, authorize: Authorizer) => Hono;

/** Builds the control plane's Hono app, with `pages` mounted at `/` when given. */
export function createControlApi(cp: ControlPlane, auth: ApiAuth, pages?: ControlPages): Hono {
  const app = new Hono();
  const stats = new HttpStats();
  const authorize = authorizer(cp, auth);
  app.use("*", async (c, next) => {
    const t0 = performance.now();
    await next();
    // The route pattern, not the path: ids must not multiply the series.
    stats.record(
      c.req.method,
      c.req.routePath ?? "unmatched",
      c.res.status,
      (performance.now() - t0) / 1000,
    );
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, "too_large", `request body is larger than ${MAX_BODY_BYTES} bytes`);
      },
    }),
  );
  app.onError((err, c) => {
    const answer = errorAnswer(err);
    if (answer !== null) return c.json(answer.body, answer.status as 400);
    log.error("unhandled error", { error: String(err) });
    return c.json({ error: { code: "internal", message: "internal error", path: null } }, 500);
  });
  // An unknown path under /v1 is behind the admin check, like every admin route.
  app.notFound(async (c) => {
    if (c.req.path.startsWith("/v1/")) {
      try {
        await authorize("admin", c);
      } catch (e) {
        const answer = errorAnswer(e)!;
        return c.json(answer.body, answer.status as 401);
      }
    }
    return c.json({
      error: { code: "not_found", message: `no route ${c.req.method} ${c.req.path}`, path: null },
    }, 404);
  });
  const all = groups(cp, stats, () => all.flatMap((g) => g.specs()), auth.caHash ?? null);
  for (const g of all) app.route(g.prefix === "" ? "/" : g.prefix, g.app(authorize));
  if (pages !== undefined) app.route("/", pages(cp, authorize));
  return app;
}
