/**
 * The dashboard (docs/ui.md) as one Hono app, mounted by the control plane's
 * API, every path under /ui. It composes the route groups in routes/, one per
 * resource, each behind the same guard; routes/route_table.ts declares every
 * route with who may use it.
 *
 * @module
 */
import { Hono } from "hono";
import type { Authorizer } from "../control/api/route.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import { NotFoundError } from "../control/errors.ts";
import { LogFollowers } from "./log_follower.ts";
import { assetRoutes } from "./routes/asset_routes.ts";
import { deploymentRoutes } from "./routes/deployment_routes.tsx";
import { fleetRoutes } from "./routes/fleet_routes.tsx";
import { modelRoutes } from "./routes/model_routes.tsx";
import { uiGuard } from "./routes/guard.tsx";
import { replicaRoutes } from "./routes/replica_routes.tsx";
import { sessionRoutes } from "./routes/session_routes.tsx";
import { CsrfTokens } from "./session.ts";

/** Settings of {@link uiApp}. */
export interface UiOptions {
  /** The CSRF signer; default: one with a fresh random key. */
  csrf?: CsrfTokens;
}

/** The dashboard as a Hono app; its paths are under /ui (mount it at the root). */
export function uiApp(
  cp: ControlPlane,
  authorize: Authorizer,
  options: UiOptions = {},
): Hono {
  const csrf = options.csrf ?? new CsrfTokens();
  const followers = new LogFollowers((replica, rank, lines) =>
    cp.agentLogs.shard(replica, rank, lines)
  );
  const guarded = uiGuard(authorize, csrf);
  const app = new Hono();
  app.route("/", sessionRoutes(authorize, csrf));
  app.route("/", assetRoutes());
  app.route("/", fleetRoutes(cp, guarded));
  app.route("/", deploymentRoutes(cp, guarded));
  app.route("/", modelRoutes(cp, guarded));
  app.route("/", replicaRoutes(cp, guarded, followers));
  // Last: it answers any /ui path no group above has (a signed-in 404 page).
  app.get(
    "/ui/*",
    guarded("page", (c) => {
      throw new NotFoundError(`no page ${c.req.path}`);
    }),
  );
  return app;
}
