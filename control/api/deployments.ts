/**
 * Deployments: list, apply, scale, delete, rollouts (status, revisions,
 * undo) and the placement dry run. The
 * deployment document is handed to the service undecoded by the edge: the
 * service validates it with the schema, the cluster and the engines, and
 * names each field path.
 *
 * @module
 */
import { DeploymentSchema } from "../../deployment/schema.ts";
import type { ControlPlane } from "../control_plane.ts";
import { RouteGroup } from "./route.ts";
import {
  ApplyAnswer,
  ApplyQuery,
  DeletedAnswer,
  DeploymentListSchema,
  DeploymentParams,
  PlanAnswer,
  RevisionListSchema,
  RolloutStatusSchema,
  ScaleAnswer,
  ScaleBody,
  StoredDeploymentSchema,
  UndoAnswer,
  UndoBody,
} from "../../protocol/admin_protocol.ts";

/** The deployment routes. */
export function deploymentRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/deployments");
  g.add({
    method: "get",
    path: "/",
    operationId: "listDeployments",
    summary: "List deployments",
    tag: "deployments",
    auth: "admin",
    response: DeploymentListSchema,
  }, () => ({ deployments: cp.deployments.list() }));
  g.add({
    method: "post",
    path: "/",
    operationId: "applyDeployment",
    summary: "Apply deployment",
    tag: "deployments",
    auth: "admin",
    query: ApplyQuery,
    body: { schema: DeploymentSchema, raw: true },
    response: ApplyAnswer,
    status: 201,
    answers: {
      200: "Updated, scaled, configured or unchanged; or a dry run (nothing stored)",
      409: "Its served model name is another deployment's",
    },
  }, async ({ query, body, c }) => {
    const result = await cp.deployments.apply(body, { dryRun: query.dry_run === "true" });
    return c.json(result, result.created && !result.dry_run ? 201 : 200);
  });
  g.add({
    method: "get",
    path: "/:name",
    operationId: "getDeployment",
    summary: "Show deployment",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    response: StoredDeploymentSchema,
  }, ({ params }) => cp.deployments.get(params.name));
  g.add({
    method: "delete",
    path: "/:name",
    operationId: "deleteDeployment",
    summary: "Delete deployment",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    response: DeletedAnswer,
  }, async ({ params }) => {
    await cp.deployments.delete(params.name);
    return { deleted: params.name };
  });
  g.add({
    method: "post",
    path: "/:name/scale",
    operationId: "scaleDeployment",
    summary: "Scale deployment",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    body: { schema: ScaleBody },
    response: ScaleAnswer,
  }, async ({ params, body }) => {
    const warnings = await cp.deployments.scale(params.name, body.replicas);
    return { deployment: params.name, replicas: body.replicas, warnings };
  });
  g.add({
    method: "get",
    path: "/:name/rollout",
    operationId: "getRollout",
    summary: "Show rollout status",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    response: RolloutStatusSchema,
  }, ({ params }) => cp.deployments.rolloutStatus(params.name));
  g.add({
    method: "get",
    path: "/:name/revisions",
    operationId: "listRevisions",
    summary: "List revisions",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    response: RevisionListSchema,
  }, ({ params }) => ({
    deployment: params.name,
    revision: cp.deployments.get(params.name).revision ?? 1,
    revisions: cp.deployments.revisions(params.name),
  }));
  g.add({
    method: "post",
    path: "/:name/rollout/undo",
    operationId: "undoRollout",
    summary: "Undo rollout",
    tag: "deployments",
    auth: "admin",
    params: DeploymentParams,
    body: { schema: UndoBody },
    response: UndoAnswer,
    answers: {
      404: "No such deployment, or no such revision in its history",
      409: "No earlier revision to undo to, or the named one runs what the current one runs",
    },
  }, async ({ params, body }) => {
    const d = await cp.deployments.undo(params.name, body.to_revision);
    const current = d.history?.find((h) => h.revision === d.revision);
    return {
      deployment: params.name,
      revision: d.revision ?? 1,
      from_revision: current?.from_revision ?? 1,
    };
  });
  return g;
}

/** The dry run. */
export function planRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/plan");
  g.add({
    method: "post",
    path: "/",
    operationId: "planDeployment",
    summary: "Plan deployment against the live inventory",
    tag: "deployments",
    auth: "admin",
    body: { schema: DeploymentSchema, raw: true },
    response: PlanAnswer,
  }, async ({ body }) => ({ replicas: await cp.deployments.dryRun(body) }));
  return g;
}
