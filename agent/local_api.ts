/**
 * The agent's small local API (plan §3, §9.4): status and the in-memory log
 * tail of each shard, for `llmgw logs` and for an operator on the host.
 *
 * - `GET /healthz`: no token; 200 while the agent runs.
 * - `GET /v1/status`: node id, the generation it runs, registration, shards.
 * - `GET /v1/shards/:id/logs?lines=N`: the last N lines (1-10,000, default
 *   100) of the shard's in-memory tail.
 *
 * Everything under `/v1` needs `Authorization: Bearer <local token>`, compared
 * in constant time. Errors are JSON `{error: {code, message}}`: 400 for a bad
 * query (naming the parameter), 401 without a bearer token, 403 with another
 * token (an admin token or a gateway API key, say: the control plane's rule),
 * 404 for an unknown shard or path; no input makes a handler fail (500 would
 * mean a bug).
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import type { ShardStatus } from "../supervisor/types.ts";

/** What the agent reports about itself on `/v1/status`. */
export interface AgentStatus {
  /** The node id. */
  node_id: string;
  /** The desired-state generation the agent runs (0: none yet). */
  generation: number;
  /** Whether the agent holds a node token. */
  registered: boolean;
  /** When the last heartbeat was accepted (ms since epoch), or null. */
  last_heartbeat_at: number | null;
  /** Consecutive failed control-plane calls of the heartbeat loop. */
  control_plane_failures: number;
  /** Every shard the supervisor runs. */
  shards: ShardStatus[];
}

/** What the local API reads from the agent. */
export interface LocalApiView {
  /** The agent's status. */
  status(): AgentStatus;
  /** One shard's status and in-memory log tail, or null when unknown. */
  shard(id: string): { status: ShardStatus; log_tail: string[] } | null;
}

/** The most lines one logs request returns. */
export const MAX_LOG_LINES = 10_000;

const LogsQuerySchema = z.object({
  lines: z.string().regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(1).max(MAX_LOG_LINES))
    .optional(),
});

function digest(s: string): Uint8Array {
  return createHash("sha256").update(s).digest();
}

/**
 * True when the `Authorization` header carries `token` as a bearer token.
 * Both sides are hashed first, so the comparison takes the same time
 * whatever the input's length or content.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  const presented = m === null ? "" : m[1];
  const same = timingSafeEqual(digest(presented), digest(token));
  return same && m !== null;
}

function fail(c: Context, status: 400 | 401 | 403 | 404, code: string, message: string) {
  if (status === 401) c.header("WWW-Authenticate", 'Bearer realm="llmgw-agent"');
  return c.json({ error: { code, message } }, status);
}

/** The local API as a Hono app (served by the agent with `Deno.serve`). */
export function localApi(view: LocalApiView, token: string): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.use("/v1/*", async (c, next) => {
    const header = c.req.header("authorization");
    if (!/^Bearer\s+\S+\s*$/i.test(header ?? "")) {
      return fail(c, 401, "unauthorized", "a bearer token is required");
    }
    if (!bearerMatches(header, token)) {
      return fail(c, 403, "forbidden", "this token is not this agent's local API token");
    }
    await next();
  });
  app.get("/v1/status", (c) => c.json(view.status()));
  app.get("/v1/shards/:id/logs", (c) => {
    const parsed = LogsQuerySchema.safeParse({ lines: c.req.query("lines") });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return fail(c, 400, "bad_request", `query ${issue.path.join(".")}: ${issue.message}`);
    }
    const id = c.req.param("id");
    const shard = view.shard(id);
    if (shard === null) return fail(c, 404, "not_found", `no shard ${JSON.stringify(id)}`);
    const n = parsed.data.lines ?? 100;
    return c.json({ id, state: shard.status.state, lines: shard.log_tail.slice(-n) });
  });
  app.notFound((c) => fail(c, 404, "not_found", `no route ${c.req.method} ${c.req.path}`));
  // Only a bug reaches this: no input makes a handler throw.
  app.onError((e, c) =>
    c.json(
      { error: { code: "internal", message: e instanceof Error ? e.message : String(e) } },
      500,
    )
  );
  return app;
}
