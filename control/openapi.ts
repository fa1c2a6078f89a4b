/**
 * The control plane's OpenAPI document (plan §11), with request bodies
 * generated from the same zod schemas the API validates with.
 *
 * @module
 */
import { z } from "zod";
import { DeploymentSchema } from "../deployment/schema.ts";
import { HeartbeatRequestSchema, RegisterRequestSchema } from "../protocol/agent_protocol.ts";

const schema = (s: z.ZodType) => z.toJSONSchema(s, { io: "input", unrepresentable: "any" });

const ERROR = {
  description: "An error: `{error: {code, message, path}}`",
  content: {
    "application/json": {
      schema: {
        type: "object",
        properties: {
          error: {
            type: "object",
            properties: {
              code: { type: "string" },
              message: { type: "string" },
              path: { type: ["string", "null"] },
            },
          },
        },
      },
    },
  },
};

function op(summary: string, auth: "admin" | "join" | "node" | null, body?: z.ZodType) {
  return {
    summary,
    ...(auth === null ? { security: [] } : { security: [{ [auth]: [] }] }),
    ...(body === undefined ? {} : {
      requestBody: { required: true, content: { "application/json": { schema: schema(body) } } },
    }),
    responses: {
      "200": { description: "OK" },
      "400": ERROR,
      "401": ERROR,
      "403": ERROR,
      "404": ERROR,
    },
  };
}

/** The OpenAPI 3.1 document. */
export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: { title: "llmgw control plane", version: "0.1.0" },
    components: {
      securitySchemes: {
        admin: {
          type: "http",
          scheme: "bearer",
          description: "An admin token (LLMGW_ADMIN_TOKEN).",
        },
        join: { type: "http", scheme: "bearer", description: "A join token (LLMGW_JOIN_TOKEN)." },
        node: {
          type: "http",
          scheme: "bearer",
          description: "The node credential from registration.",
        },
      },
    },
    paths: {
      "/healthz": { get: op("Liveness of the control plane", null) },
      "/v1/agent/register": {
        post: op("Register a node (plan §10)", "join", RegisterRequestSchema),
      },
      "/v1/agent/heartbeat": {
        post: op("Heartbeat with shard states and GPU health", "node", HeartbeatRequestSchema),
      },
      "/v1/agent/desired": {
        get: op("The node's desired shards; long poll with generation and wait_ms", "node"),
      },
      "/v1/nodes": { get: op("List nodes", "admin") },
      "/v1/nodes/{id}": { get: op("Show a node", "admin") },
      "/v1/nodes/{id}/cordon": { post: op("Cordon a node", "admin") },
      "/v1/nodes/{id}/uncordon": { post: op("Uncordon (and undrain) a node", "admin") },
      "/v1/nodes/{id}/drain": { post: op("Drain a node: its replicas move off", "admin") },
      "/v1/nodes/{id}/labels": {
        post: op(
          "Set (string) or remove (null) label overrides",
          "admin",
          z.object({ labels: z.record(z.string(), z.string().nullable()) }),
        ),
      },
      "/v1/nodes/{id}/fabrics": {
        put: op(
          "Replace fabric overrides: rename (string) or exclude (null)",
          "admin",
          z.object({ fabric_overrides: z.record(z.string(), z.string().nullable()) }),
        ),
      },
      "/v1/apikeys": {
        get: op("List gateway API keys (no secrets)", "admin"),
        post: op(
          "Create a gateway API key (returned once)",
          "admin",
          z.object({ name: z.string(), models: z.array(z.string()).nullable().optional() }),
        ),
      },
      "/v1/apikeys/{id}": { delete: op("Delete a gateway API key", "admin") },
      "/v1/replicas/{id}/logs": {
        get: op("A shard's recent log lines, from its agent (shard, lines)", "admin"),
      },
      "/v1/deployments": {
        get: op("List deployments", "admin"),
        post: op("Create or update a deployment (plan §6)", "admin", DeploymentSchema),
      },
      "/v1/deployments/{name}": { delete: op("Delete a deployment", "admin") },
      "/v1/deployments/{name}/scale": {
        post: op(
          "Change the replica count",
          "admin",
          z.object({ replicas: z.number().int().min(0) }),
        ),
      },
      "/v1/plan": {
        post: op("Placement dry run against the live inventory", "admin", DeploymentSchema),
      },
      "/v1/replicas": { get: op("Replicas with state, placement and explanation", "admin") },
      "/v1/events": { get: op("Events (after, subject, limit)", "admin") },
      "/v1/endpoints": { get: op("Ready endpoints for gateways", "admin") },
      "/metrics": { get: op("Prometheus metrics", "admin") },
      "/openapi.json": { get: op("This document", "admin") },
    },
  };
}
