/**
 * The fleet (docs/ui.md): the page at `/ui/`, the fragment htmx refreshes
 * it with, and the node actions (cordon, uncordon, drain).
 *
 * @module
 */
import { Hono } from "hono";
import type { ControlPlane } from "../../control/control_plane.ts";
import type { NodeIntent } from "../../control/store/store.ts";
import { fleetModel, parseFleetQuery } from "../fleet_model.ts";
import { FleetFragment, FleetPage } from "../fleet_page.tsx";
import type { Guard } from "./guard.tsx";
import { html } from "./page_response.ts";
import { param } from "./request.ts";

/** Each node action's path segment and the intent it sets. */
const NODE_ACTIONS: readonly (readonly [string, NodeIntent])[] = [
  ["cordon", "cordoned"],
  ["uncordon", "none"],
  ["drain", "draining"],
];

/** The fleet routes on `cp`, behind `guarded`. */
export function fleetRoutes(cp: ControlPlane, guarded: Guard): Hono {
  const app = new Hono();
  app.get(
    "/ui/",
    guarded("page", async (c, s) => {
      const query = parseFleetQuery(c.req.query());
      return await html(
        c,
        <FleetPage
          model={fleetModel(cp.nodes.list(), query, cp.state.modelCaches)}
          query={query}
          now={cp.state.now()}
          session={s}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/fragments/fleet",
    guarded("fragment", async (c) => {
      const query = parseFleetQuery(c.req.query());
      return await html(
        c,
        <FleetFragment
          model={fleetModel(cp.nodes.list(), query, cp.state.modelCaches)}
          query={query}
          now={cp.state.now()}
        />,
        200,
      );
    }),
  );
  for (const [verb, intent] of NODE_ACTIONS) {
    app.post(
      `/ui/nodes/:id/${verb}`,
      guarded("action", async (c) => {
        const node = await cp.nodes.setIntent(param(c, "id"), intent);
        return c.json({ node: node.id, state: node.state }, 200, {
          "hx-trigger": "fleet-changed",
        });
      }),
    );
  }
  return app;
}
