/**
 * The agent API: register with a join token, then heartbeat and long-poll
 * the desired state with the node credential.
 *
 * @module
 */
import { z } from "zod";
import { HeartbeatRequestSchema, RegisterRequestSchema } from "../../protocol/agent_protocol.ts";
import type { ControlPlane } from "../control_plane.ts";
import { ApiError } from "../api_error.ts";
import { RouteGroup } from "./route.ts";
import { DesiredQuery } from "./schemas.ts";
import { nodeOfRequest } from "./auth.ts";
import { bearer } from "../tokens.ts";

const RegisterAnswer = z.object({
  node_id: z.string(),
  node_token: z.string().describe("The node's credential; shown only in this answer"),
  heartbeat_interval_ms: z.number().int(),
});
const HeartbeatAnswer = z.object({ generation: z.number().int() });
const DesiredAnswer = z.object({
  generation: z.number().int(),
  shards: z.array(z.looseObject({ id: z.string(), engine: z.string(), launch: z.looseObject({}) })),
});

/** The agent routes. */
export function agentRoutes(cp: ControlPlane): RouteGroup {
  const g = new RouteGroup("/v1/agent");
  g.add({
    method: "post",
    path: "/register",
    operationId: "registerNode",
    summary: "Register a node",
    tag: "agent",
    auth: "join",
    body: { schema: RegisterRequestSchema },
    response: RegisterAnswer,
  }, ({ body, c }) => cp.nodes.register(body, c.req.header("x-llmgw-node-token") ?? null));
  g.add({
    method: "post",
    path: "/heartbeat",
    operationId: "heartbeat",
    summary: "Record heartbeat",
    tag: "agent",
    auth: "node",
    body: { schema: HeartbeatRequestSchema },
    response: HeartbeatAnswer,
    answers: { 404: "The node is not registered (unknown_node): register again" },
  }, async ({ body, c }) => {
    await requireOwnNode(cp, c.req.header("authorization"), body.node_id);
    return cp.nodes.heartbeat(body);
  });
  g.add({
    method: "get",
    path: "/desired",
    operationId: "desiredState",
    summary: "Read desired state",
    tag: "agent",
    auth: "node",
    query: DesiredQuery,
    response: DesiredAnswer,
    answers: { 404: "The node is not registered (unknown_node): register again" },
  }, async ({ query, c }) => {
    // The node credential says which node asks.
    const asker = await nodeOfRequest(cp, c.req.header("authorization"));
    const nodeId = query.node_id ?? asker;
    await requireOwnNode(cp, c.req.header("authorization"), nodeId);
    return cp.desired.wait(nodeId, query.generation, query.wait_ms, c.req.raw.signal);
  });
  return g;
}

/** Refuses a node credential that is not `nodeId`'s. */
async function requireOwnNode(
  cp: ControlPlane,
  header: string | undefined,
  nodeId: string,
): Promise<void> {
  const token = bearer(header);
  if (token === null || !(await cp.nodes.authenticate(nodeId, token))) {
    throw new ApiError(403, "forbidden", `this token is not node ${nodeId}'s credential`);
  }
}
