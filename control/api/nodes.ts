/**
 * Nodes: list, show, cordon, drain, uncordon, remove, labels and fabric overrides.
 *
 * @module
 */
import type { ControlPlane } from "../control_plane.ts";
import type { NodeIntent } from "../store/store.ts";
import { RouteGroup } from "./route.ts";
import {
  FabricOverridesBody,
  FabricsAnswer,
  LabelsAnswer,
  LabelsBody,
  NodeListSchema,
  NodeParams,
  NodeSchema,
} from "../../protocol/admin_protocol.ts";

const INTENTS: readonly [verb: string, intent: NodeIntent, summary: string, id: string][] = [
  ["cordon", "cordoned", "Cordon a node", "cordonNode"],
  ["drain", "draining", "Drain a node: its replicas move off", "drainNode"],
  ["uncordon", "none", "Uncordon (and undrain) a node", "uncordonNode"],
];

/** The node routes. */
export function nodeRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/nodes");
  g.add({
    method: "get",
    path: "/",
    operationId: "listNodes",
    summary: "List nodes",
    tag: "nodes",
    auth: "admin",
    response: NodeListSchema,
  }, () => ({ nodes: cp.nodes.list() }));
  g.add({
    method: "get",
    path: "/:id",
    operationId: "getNode",
    summary: "Show a node",
    tag: "nodes",
    auth: "admin",
    params: NodeParams,
    response: NodeSchema,
  }, ({ params }) => cp.nodes.get(params.id));
  for (const [verb, intent, summary, operationId] of INTENTS) {
    g.add({
      method: "post",
      path: `/:id/${verb}`,
      operationId,
      summary,
      tag: "nodes",
      auth: "admin",
      params: NodeParams,
      response: NodeSchema,
    }, ({ params }) => cp.nodes.setIntent(params.id, intent));
  }
  g.add({
    method: "delete",
    path: "/:id",
    operationId: "deleteNode",
    summary: "Remove a node",
    tag: "nodes",
    auth: "admin",
    params: NodeParams,
    response: NodeSchema,
    answers: {
      404: "no such node",
      409: "the node holds replicas, or is live and neither cordoned nor draining",
    },
  }, ({ params }) => cp.removeNode(params.id));
  g.add({
    method: "post",
    path: "/:id/labels",
    operationId: "setNodeLabels",
    summary: "Set labels",
    tag: "nodes",
    auth: "admin",
    params: NodeParams,
    body: { schema: LabelsBody },
    response: LabelsAnswer,
  }, async ({ params, body }) => ({
    node: params.id,
    label_overrides: await cp.nodes.setLabels(params.id, body.labels),
  }));
  g.add({
    method: "put",
    path: "/:id/fabrics",
    operationId: "setNodeFabrics",
    summary: "Set fabric overrides",
    tag: "nodes",
    auth: "admin",
    params: NodeParams,
    body: { schema: FabricOverridesBody },
    response: FabricsAnswer,
  }, async ({ params, body }) => ({
    node: params.id,
    fabric_overrides: await cp.nodes.setFabricOverrides(params.id, body.fabric_overrides),
  }));
  return g;
}
