/**
 * The control plane's HTTP API (plan §10, §11): Hono route groups, every
 * body and query validated with zod, errors as `{error: {code, message,
 * path}}` with 4xx for bad input and never a 500 for a malformed request.
 *
 * @module
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Context } from "hono";
import { z } from "zod";
import { HeartbeatRequestSchema, RegisterRequestSchema } from "../protocol/agent_protocol.ts";
import { zodIssues } from "../validation/issues.ts";
import { ApiError } from "./api_error.ts";
import type { ControlPlane } from "./control_plane.ts";
import { HttpStats, renderMetrics } from "./metrics.ts";
import { openApiDocument } from "./openapi.ts";
import { bearer, tokenMatches } from "./tokens.ts";

/** Who may call what: tokens are given hashed. */
export interface ApiAuth {
  /** SHA-256 hashes of join tokens (agents registering). */
  joinTokenHashes: readonly string[];
  /** SHA-256 hashes of admin tokens. */
  adminTokenHashes: readonly string[];
}

/** Largest request body accepted. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

async function matchesAny(token: string, hashes: readonly string[]): Promise<boolean> {
  let ok = false;
  for (const h of hashes) ok = (await tokenMatches(token, h)) || ok;
  return ok;
}

async function jsonBody(c: Context): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "request body is not valid JSON");
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw ApiError.fromIssues(what, zodIssues(r.error));
  return r.data;
}

const DesiredQuery = z.object({
  node_id: z.string().min(1).max(128).optional(),
  generation: z.coerce.number().int().min(0).default(0),
  wait_ms: z.coerce.number().int().min(0).max(60_000).default(0),
});
const EventsQuery = z.object({
  after: z.coerce.number().int().min(0).optional(),
  subject: z.string().max(256).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
const ApiKeyBody = z.object({
  name: z.string().min(1).max(128),
  models: z.array(z.string().min(1).max(256)).max(1000).nullable().optional(),
}).strict();
const FabricName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, "must be a fabric name");
const FabricOverridesBody = z.object({
  fabric_overrides: z.record(FabricName, FabricName.nullable()),
}).strict();
const LabelsBody = z.object({
  labels: z.record(
    z.string().regex(/^[A-Za-z0-9]([A-Za-z0-9_./-]{0,251}[A-Za-z0-9])?$/, "must be a label key"),
    z.string().max(253).nullable(),
  ),
}).strict();
const LogsQuery = z.object({
  shard: z.coerce.number().int().min(0).max(1023).default(0),
  lines: z.coerce.number().int().min(1).max(10_000).default(100),
});
const ScaleBody = z.object({ replicas: z.number().int().min(0).max(10_000) }).strict();
const NodeIdParam = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "must be a node id");
const NameParam = z.string().regex(
  /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
  "must be a deployment name",
);

/** Builds the control plane's Hono app. */
export function createControlApi(cp: ControlPlane, auth: ApiAuth): Hono {
  const app = new Hono();
  const stats = new HttpStats();
  app.use("*", async (c, next) => {
    const t0 = performance.now();
    await next();
    // The route pattern, not the path: ids must not multiply the series.
    stats.record(
      c.req.method,
      c.req.routePath ?? "unmatched",
      c.res.status,
      (performance.now() - t0) / 1000,
    );
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, "too_large", `request body is larger than ${MAX_BODY_BYTES} bytes`);
      },
    }),
  );
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(err.body(), err.status as 400);
    console.error(JSON.stringify({ level: "error", component: "control-api", msg: String(err) }));
    return c.json({ error: { code: "internal", message: "internal error", path: null } }, 500);
  });
  app.notFound((c) =>
    c.json({
      error: { code: "not_found", message: `no route ${c.req.method} ${c.req.path}`, path: null },
    }, 404)
  );

  app.get("/healthz", (c) => c.json({ status: "ok" }));

  const requireAdmin = async (c: Context) => {
    const token = bearer(c.req.header("authorization"));
    if (token === null) {
      throw new ApiError(
        401,
        "unauthorized",
        "an admin token is required (Authorization: Bearer …)",
      );
    }
    if (!(await matchesAny(token, auth.adminTokenHashes))) {
      throw new ApiError(403, "forbidden", "this token may not use the admin API");
    }
  };
  // Checked before a body or query is read, so no token is 401 and a token
  // that is no node's credential 403 whatever the request holds.
  const requireSomeNode = async (c: Context): Promise<string> => {
    const token = bearer(c.req.header("authorization"));
    if (token === null) throw new ApiError(401, "unauthorized", "a node credential is required");
    const found = await cp.nodeForToken(token);
    if (found === null) throw new ApiError(403, "forbidden", "this token is no node's credential");
    return found;
  };
  const requireNode = async (c: Context, nodeId: string) => {
    const token = bearer(c.req.header("authorization"));
    if (token === null) throw new ApiError(401, "unauthorized", "a node credential is required");
    if (!(await cp.authenticateNode(nodeId, token))) {
      throw new ApiError(403, "forbidden", `this token is not node ${nodeId}'s credential`);
    }
  };

  // Agent API (plan §10).
  app.post("/v1/agent/register", async (c) => {
    const token = bearer(c.req.header("authorization"));
    if (token === null) throw new ApiError(401, "unauthorized", "a join token is required");
    if (!(await matchesAny(token, auth.joinTokenHashes))) {
      throw new ApiError(403, "forbidden", "this token is not a join token");
    }
    const req = parse(RegisterRequestSchema, await jsonBody(c), "Cannot register");
    return c.json(await cp.register(req, c.req.header("x-llmgw-node-token") ?? null));
  });
  app.post("/v1/agent/heartbeat", async (c) => {
    await requireSomeNode(c);
    const req = parse(HeartbeatRequestSchema, await jsonBody(c), "Cannot record heartbeat");
    await requireNode(c, req.node_id);
    return c.json(await cp.heartbeat(req));
  });
  app.get("/v1/agent/desired", async (c) => {
    // The node credential says which node asks (protocol/agent_protocol.ts).
    const asker = await requireSomeNode(c);
    const q = parse(DesiredQuery, c.req.query(), "Cannot read desired state");
    const nodeId = q.node_id ?? asker;
    await requireNode(c, nodeId);
    return c.json(await cp.desired(nodeId, q.generation, q.wait_ms, c.req.raw.signal));
  });

  // Admin API (plan §11).
  const admin = new Hono();
  admin.use("*", async (c, next) => {
    await requireAdmin(c);
    await next();
  });
  admin.get("/nodes", (c) => c.json({ nodes: cp.inventory.listNodes() }));
  admin.get("/nodes/:id", (c) => {
    const id = parse(NodeIdParam, c.req.param("id"), "Cannot show node");
    const node = cp.inventory.getNode(id);
    if (node === undefined) throw new ApiError(404, "not_found", `no node ${id}`);
    return c.json(node);
  });
  for (
    const [verb, intent] of [["cordon", "cordoned"], ["drain", "draining"], [
      "uncordon",
      "none",
    ]] as const
  ) {
    admin.post(`/nodes/:id/${verb}`, async (c) => {
      const id = parse(NodeIdParam, c.req.param("id"), `Cannot ${verb} node`);
      await cp.setIntent(id, intent);
      return c.json(cp.inventory.getNode(id));
    });
  }
  admin.post("/nodes/:id/labels", async (c) => {
    const id = parse(NodeIdParam, c.req.param("id"), "Cannot set labels");
    const body = parse(LabelsBody, await jsonBody(c), "Cannot set labels");
    return c.json({ node: id, label_overrides: await cp.setLabels(id, body.labels) });
  });
  admin.put("/nodes/:id/fabrics", async (c) => {
    const id = parse(NodeIdParam, c.req.param("id"), "Cannot set fabric overrides");
    const body = parse(FabricOverridesBody, await jsonBody(c), "Cannot set fabric overrides");
    return c.json({
      node: id,
      fabric_overrides: await cp.setFabricOverrides(id, body.fabric_overrides),
    });
  });
  admin.get("/deployments", (c) => c.json({ deployments: cp.deployments() }));
  admin.post("/deployments", async (c) => {
    const result = await cp.applyDeployment(await jsonBody(c));
    return c.json(result, result.created ? 201 : 200);
  });
  admin.delete("/deployments/:name", async (c) => {
    const name = parse(NameParam, c.req.param("name"), "Cannot delete deployment");
    await cp.deleteDeployment(name);
    return c.json({ deleted: name });
  });
  admin.post("/deployments/:name/scale", async (c) => {
    const name = parse(NameParam, c.req.param("name"), "Cannot scale deployment");
    const body = parse(ScaleBody, await jsonBody(c), "Cannot scale deployment");
    await cp.scale(name, body.replicas);
    return c.json({ deployment: name, replicas: body.replicas });
  });
  admin.get("/replicas", (c) => c.json({ replicas: cp.replicas() }));
  admin.get("/events", async (c) => {
    const q = parse(EventsQuery, c.req.query(), "Cannot list events");
    return c.json({ events: await cp.events(q) });
  });
  // What gateways follow: ready endpoints and API key hashes (plan §12).
  admin.get(
    "/endpoints",
    (c) => {
      // Gateways keep their last known set on an error (gateway/follow.ts).
      if (!cp.endpointsSettled()) {
        throw new ApiError(
          503,
          "settling",
          "the control plane restarted and waits for the agents' first reports; " +
            "keep the last known endpoints",
        );
      }
      return c.json({ endpoints: cp.readyEndpoints(), api_keys: cp.apiKeyHashes() });
    },
  );
  admin.get("/apikeys", (c) => c.json({ api_keys: cp.apiKeys() }));
  admin.post("/apikeys", async (c) => {
    const body = parse(ApiKeyBody, await jsonBody(c), "Cannot create API key");
    return c.json(await cp.createApiKey(body.name, body.models ?? null), 201);
  });
  admin.delete("/apikeys/:id", async (c) => {
    const id = parse(
      z.string().regex(/^key-[a-f0-9]{8}$/, "must be an API key id"),
      c.req.param("id"),
      "Cannot delete API key",
    );
    await cp.deleteApiKey(id);
    return c.json({ deleted: id });
  });
  admin.post("/plan", async (c) => c.json({ replicas: cp.dryRun(await jsonBody(c)) }));
  admin.get("/replicas/:id/logs", async (c) => {
    const q = parse(LogsQuery, c.req.query(), "Cannot fetch logs");
    const id = parse(z.string().min(1).max(256), c.req.param("id"), "Cannot fetch logs");
    return c.json(await cp.shardLogs(id, q.shard, q.lines));
  });
  app.route("/v1", admin);
  app.get("/metrics", async (c) => {
    await requireAdmin(c);
    return c.text(renderMetrics(cp, stats), 200, { "content-type": "text/plain; version=0.0.4" });
  });
  app.get("/openapi.json", async (c) => {
    await requireAdmin(c);
    return c.json(openApiDocument());
  });
  return app;
}
