/**
 * Events: what happened, newest last.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { RouteGroup } from "./route.ts";
import { EventListSchema, EventsQuery } from "../../protocol/admin_protocol.ts";

/** The event routes. */
export function eventRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/events");
  g.add({
    method: "get",
    path: "/",
    operationId: "listEvents",
    summary: "List events",
    tag: "events",
    auth: "admin",
    query: EventsQuery,
    response: EventListSchema,
  }, async ({ query }) => ({ events: await cp.events.list(query) }));
  return g;
}
