/**
 * Models (issue #25 item 5): every model revision across the fleet (from
 * deployments and agents' model caches), one model in detail, and a pull of
 * a deployment's model revision onto nodes without holding GPUs, and the
 * pulls under way and lately finished (`llmgw get models`, `describe
 * model`, `models pull`).
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import { modelDetail, modelList } from "../model_views.ts";
import { pullDeploymentModel, pullViews } from "../model_pulls.ts";
import { cancelPull } from "../model_pull_cancel.ts";
import { RouteGroup } from "./route.ts";
import {
  CancelPullAnswerSchema,
  CancelPullBodySchema,
  ModelDetailSchema,
  ModelListSchema,
  ModelParams,
  PullAnswerSchema,
  PullBodySchema,
  PullListSchema,
} from "../../protocol/model_admin.ts";

/** The model routes. */
export function modelRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/models");
  g.add({
    method: "get",
    path: "/",
    operationId: "listModels",
    summary: "List model revisions with size, hosts holding them and their state",
    tag: "models",
    auth: "admin",
    response: ModelListSchema,
  }, () => ({ models: modelList(cp.state) }));
  g.add({
    method: "post",
    path: "/pull",
    operationId: "pullModel",
    summary: "Fetch a deployment's model revision onto nodes without holding GPUs",
    tag: "models",
    auth: "admin",
    body: { schema: PullBodySchema },
    response: PullAnswerSchema,
    answers: {
      404: "No such deployment or node",
      409: "The deployment's model revision is not resolved to a commit yet",
    },
  }, ({ body }) => pullDeploymentModel(cp.state, body));
  g.add({
    method: "get",
    path: "/pulls",
    operationId: "listModelPulls",
    summary: "Pulls under way and lately finished, with each node's state",
    tag: "models",
    auth: "admin",
    response: PullListSchema,
  }, () => ({ pulls: pullViews(cp.state) }));
  g.add({
    method: "post",
    path: "/pulls/cancel",
    operationId: "cancelModelPull",
    summary: "Stop asking nodes to fetch a pull's model revision",
    tag: "models",
    auth: "admin",
    body: { schema: CancelPullBodySchema },
    response: CancelPullAnswerSchema,
    answers: {
      404: "No such pull, or a node it never asked",
      409:
        "A commit prefix naming several pulls, or no node named still asked (the message says why)",
    },
  }, ({ body }) => cancelPull(cp.state, body));
  g.add({
    method: "get",
    path: "/:org/:name",
    operationId: "describeModel",
    summary: "One model: its revisions, facts, hosts and deployments",
    tag: "models",
    auth: "admin",
    params: ModelParams,
    response: ModelDetailSchema,
    answers: { 404: "No deployment uses it and no agent reports it" },
  }, ({ params }) => modelDetail(cp.state, `${params.org}/${params.name}`));
  return g;
}
