/**
 * Replicas: their state, placement, explanation and last failure, the
 * explanation on the live inventory, and a shard's log lines from its agent.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { liveExplanation } from "../live_explanation.ts";
import { RouteGroup } from "./route.ts";
import {
  LiveExplanationAnswer,
  LogsQuery,
  ReplicaListSchema,
  ReplicaParams,
  ShardLogsAnswer,
} from "../../protocol/admin_protocol.ts";

/** The replica routes. */
export function replicaRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/replicas");
  g.add({
    method: "get",
    path: "/",
    operationId: "listReplicas",
    summary: "List replicas with state, placement and explanation",
    tag: "replicas",
    auth: "admin",
    response: ReplicaListSchema,
  }, () => ({ replicas: cp.replicas() }));
  g.add({
    method: "get",
    path: "/:id/explanation",
    operationId: "explainReplica",
    summary: "Explain a replica on the live inventory, with its last failures",
    tag: "replicas",
    auth: "admin",
    params: ReplicaParams,
    response: LiveExplanationAnswer,
    answers: { 404: "No such replica" },
  }, ({ params }) => liveExplanation(cp.state, params.id));
  g.add({
    method: "get",
    path: "/:id/logs",
    operationId: "replicaLogs",
    summary: "Fetch logs",
    tag: "replicas",
    auth: "admin",
    params: ReplicaParams,
    query: LogsQuery,
    response: ShardLogsAnswer,
    answers: { 502: "The shard's agent cannot be asked, or answered badly" },
  }, ({ params, query }) => cp.agentLogs.shard(params.id, query.shard, query.lines));
  return g;
}
