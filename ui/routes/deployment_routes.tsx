/**
 * The deployments (docs/ui.md): the page, the fragment htmx refreshes it
 * with, and scaling a deployment.
 *
 * @module
 */
import { Hono } from "hono";
import type { ControlPlane } from "../../control/control_plane.ts";
import { DeploymentsFragment, DeploymentsPage } from "../deployments_page.tsx";
import type { Guard } from "./guard.tsx";
import { html, text } from "./page_response.ts";
import { formOf, param } from "./request.ts";

/** The most replicas the scale form takes. */
const MAX_REPLICAS = 10_000;

/** The deployment routes on `cp`, behind `guarded`. */
export function deploymentRoutes(cp: ControlPlane, guarded: Guard): Hono {
  const app = new Hono();
  app.get(
    "/ui/deployments",
    guarded("page", async (c, s) =>
      await html(
        c,
        <DeploymentsPage
          deployments={cp.deployments.list()}
          replicas={cp.replicas()}
          session={s}
        />,
        200,
      )),
  );
  app.get(
    "/ui/fragments/deployments",
    guarded("fragment", async (c) =>
      await html(
        c,
        <DeploymentsFragment deployments={cp.deployments.list()} replicas={cp.replicas()} />,
        200,
      )),
  );
  app.post(
    "/ui/deployments/:name/scale",
    guarded("action", async (c) => {
      const form = await formOf(c);
      const raw = (form.replicas ?? "").trim();
      if (!/^\d{1,5}$/.test(raw) || Number(raw) > MAX_REPLICAS) {
        return text(
          c,
          `Cannot scale: replicas must be a whole number from 0 to ${MAX_REPLICAS}, got "${raw}"`,
          400,
        );
      }
      const name = param(c, "name");
      await cp.deployments.scale(name, Number(raw));
      return c.json({ deployment: name, replicas: Number(raw) }, 200, {
        "hx-trigger": "deployments-changed",
      });
    }),
  );
  return app;
}
