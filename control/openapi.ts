/**
 * The control plane's OpenAPI 3.1 document, generated from the route
 * declarations (api/route.ts): the same zod schemas the API validates
 * parameters, queries and bodies with describe them here.
 *
 * @module
 */
import { z } from "zod";
import type { RouteSpec } from "./api/route.ts";
import { ErrorBodySchema } from "../protocol/error_body.ts";

const toSchema = (s: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(s, { io, unrepresentable: "any", target: "draft-2020-12" });

/** A JSON Schema without its `$schema` key (OpenAPI embeds it). */
function jsonSchema(s: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  const { $schema: _drop, ...rest } = toSchema(s, io) as Record<string, unknown>;
  return rest;
}

const ERROR_RESPONSE = {
  description: "An error: `{error: {code, message, path}}`",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
};

/** The error answers a route can give, by its token kind and inputs. */
function errorResponses(spec: RouteSpec): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const takesInput = spec.params !== undefined || spec.query !== undefined ||
    spec.body !== undefined;
  if (takesInput) out["400"] = ERROR_RESPONSE;
  if (spec.auth !== "open") {
    out["401"] = ERROR_RESPONSE;
    out["403"] = ERROR_RESPONSE;
  }
  if (spec.params !== undefined) out["404"] = ERROR_RESPONSE;
  if (spec.body !== undefined) out["413"] = ERROR_RESPONSE;
  for (const [status, description] of Object.entries(spec.answers ?? {})) {
    out[status] = status === "200"
      ? {
        description,
        content: { "application/json": { schema: jsonSchema(spec.response, "output") } },
      }
      : { ...ERROR_RESPONSE, description };
  }
  return out;
}

/** Path and query parameters from their object schemas. */
function parameters(spec: RouteSpec): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const [where, schema] of [["path", spec.params], ["query", spec.query]] as const) {
    if (schema === undefined) continue;
    const js = jsonSchema(schema, "input") as {
      properties?: Record<string, Record<string, unknown>>;
      required?: string[];
    };
    for (const [name, prop] of Object.entries(js.properties ?? {})) {
      const { description, ...rest } = prop;
      out.push({
        name,
        in: where,
        required: where === "path" || (js.required ?? []).includes(name),
        ...(description === undefined ? {} : { description }),
        schema: rest,
      });
    }
  }
  return out;
}

/** One operation. */
function operation(spec: RouteSpec): Record<string, unknown> {
  const ok = spec.contentType === "text/plain"
    ? { "text/plain": { schema: { type: "string" } } }
    : { "application/json": { schema: jsonSchema(spec.response, "output") } };
  const params = parameters(spec);
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    tags: [spec.tag],
    security: spec.auth === "open" ? [] : [{ [spec.auth]: [] }],
    ...(params.length === 0 ? {} : { parameters: params }),
    ...(spec.body === undefined ? {} : {
      requestBody: {
        required: true,
        content: { "application/json": { schema: jsonSchema(spec.body.schema, "input") } },
      },
    }),
    responses: {
      [String(spec.status ?? 200)]: { description: "OK", content: ok },
      ...errorResponses(spec),
    },
  };
}

/** The document for a set of routes. */
export function openApiDocument(specs: readonly RouteSpec[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of specs) {
    const path = spec.path.replace(/:(\w+)/g, "{$1}");
    (paths[path] ??= {})[spec.method] = operation(spec);
  }
  const tags = [...new Set(specs.map((s) => s.tag))].map((name) => ({
    name,
    description: `The ${name} routes`,
  }));
  return {
    openapi: "3.1.0",
    info: {
      title: "llmgw control plane",
      version: "0.1.0",
      description: "The admin, agent and gateway API of the llmgw control plane.",
    },
    servers: [{ url: "http://127.0.0.1:7070", description: "A local control plane" }],
    tags,
    components: {
      schemas: { Error: jsonSchema(ErrorBodySchema, "output") },
      securitySchemes: {
        admin: {
          type: "http",
          scheme: "bearer",
          description: "An admin token (STORE/admin.token, llmgw tokens create admin).",
        },
        gateway: {
          type: "http",
          scheme: "bearer",
          description: "A gateway token: the endpoint feed only (an admin token also passes).",
        },
        metrics: {
          type: "http",
          scheme: "bearer",
          description: "A metrics token: GET /metrics only (an admin token also passes).",
        },
        join: {
          type: "http",
          scheme: "bearer",
          description: "A join token (llmgw tokens create join).",
        },
        node: {
          type: "http",
          scheme: "bearer",
          description: "The node credential from registration.",
        },
      },
    },
    paths,
  };
}
