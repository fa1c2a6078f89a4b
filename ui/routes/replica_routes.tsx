/**
 * One replica (docs/ui.md): its page, the fragment htmx refreshes it with,
 * and the live log of one of its shards (`?rank=N`, default the first) over
 * Server-Sent Events.
 *
 * @module
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import type { ControlPlane } from "../../control/control_plane.ts";
import { NotFoundError } from "../../control/errors.ts";
import type { LogFollowers } from "../log_follower.ts";
import { REPLICA_EVENTS, ReplicaFragment, ReplicaPage } from "../replica_page.tsx";
import type { Guard } from "./guard.tsx";
import { streamShardLog } from "./log_stream.ts";
import { html } from "./page_response.ts";
import { param } from "./request.ts";

/** The replica routes on `cp`, behind `guarded`, the logs through `followers`. */
export function replicaRoutes(cp: ControlPlane, guarded: Guard, followers: LogFollowers): Hono {
  const replicaOf = (id: string) => {
    const r = cp.replicas().find((v) => v.id === id);
    if (r === undefined) throw new NotFoundError(`no replica ${id}`);
    return r;
  };
  const nodesById = () => new Map(cp.nodes.list().map((n) => [n.id, n]));
  const eventsOf = (id: string) =>
    cp.events.list({ subject: `replica/${id}`, limit: REPLICA_EVENTS });

  const app = new Hono();
  app.get(
    "/ui/replicas/:id",
    guarded("page", async (c, s) => {
      const r = replicaOf(param(c, "id"));
      const rank = rankOf(c.req.query("rank"), r.shards.map((sh) => sh.rank));
      return await html(
        c,
        <ReplicaPage
          replica={r}
          nodes={nodesById()}
          events={await eventsOf(r.id)}
          rank={rank}
          session={s}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/fragments/replicas/:id",
    guarded("fragment", async (c) => {
      const r = replicaOf(param(c, "id"));
      return await html(
        c,
        <ReplicaFragment replica={r} nodes={nodesById()} events={await eventsOf(r.id)} />,
        200,
      );
    }),
  );
  app.get(
    "/ui/replicas/:id/logs",
    guarded("fragment", (c) => {
      const r = replicaOf(param(c, "id"));
      const rank = rankOf(c.req.query("rank"), r.shards.map((sh) => sh.rank));
      const lastEventId = c.req.header("last-event-id") ?? null;
      c.header("x-content-type-options", "nosniff");
      return streamSSE(c, (stream) => streamShardLog(stream, followers, r.id, rank, lastEventId));
    }),
  );
  return app;
}

/** A shard rank from the query: one the replica has, default its first. */
function rankOf(raw: string | undefined, ranks: number[]): number {
  if (raw === undefined || raw === "") return ranks[0] ?? 0;
  const rank = Number(raw);
  if (!/^\d{1,4}$/.test(raw) || !ranks.includes(rank)) {
    throw new NotFoundError(`this replica has no shard of rank ${raw}`);
  }
  return rank;
}
