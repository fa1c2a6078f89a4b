/**
 * The agent's small local API (design §3, §9.4): status and the in-memory log
 * tail of each shard, for `llmgw logs` and for an operator on the host. Its
 * answers are the contract in protocol/local_api_protocol.ts.
 *
 * - `GET /healthz`: no token; 200 while the agent runs.
 * - `GET /v1/status`: node id, the generation it runs, registration, shards.
 * - `GET /v1/shards/:id/logs?lines=N`: the last N lines (1-10,000, default
 *   100) of the shard's in-memory tail.
 * - `GET /metrics`: Prometheus text (agent/metrics.ts), for a metrics token.
 *
 * Everything under `/v1` needs `Authorization: Bearer <local token>`, compared
 * in constant time. `/metrics` needs a metrics token, one whose SHA-256 the
 * control plane sent in a heartbeat answer (design §11.2, least privilege: it
 * reads metrics only, and the local token is not Prometheus'). Errors are JSON
 * `{error: {code, message}}`: 400 for a bad query (naming the parameter), 401
 * without a bearer token, 403 with another token (an admin token or a gateway
 * API key, say: the control plane's rule), 404 for an unknown shard or path;
 * no input makes a handler fail (500 would mean a bug).
 *
 * @module
 */
import { bearer, bearerHashMatches, bearerMatches } from "../http/tokens.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import {
  type AgentStatusAnswer,
  type LocalApiErrorAnswer,
  MAX_LOG_LINE_CHARS,
  MAX_LOG_LINES,
  type ShardLogsAnswer,
} from "../protocol/local_api_protocol.ts";
import type { ShardReport } from "../supervisor/types.ts";
import { type AgentMetricsSnapshot, renderAgentMetrics } from "./metrics.ts";
import { shardReport } from "./reports.ts";
import { errorMessage } from "../text/error_message.ts";

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
  shards: ShardReport[];
}

/** What the local API reads from the agent. */
export interface LocalApiView {
  /** The agent's status. */
  status(): AgentStatus;
  /**
   * One shard's status and in-memory log tail, or null when unknown; with
   * the tail's identity and the position of its first line when known.
   */
  shard(id: string): ShardLogView | null;
  /** What `/metrics` shows now. */
  metrics(): AgentMetricsSnapshot;
  /** SHA-256 (hex) of every metrics token the control plane last sent; empty before the first. */
  metricsTokenHashes(): readonly string[];
}

/** The content type of Prometheus text exposition format 0.0.4. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const LogsQuerySchema = z.object({
  lines: z.string().regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(1).max(MAX_LOG_LINES))
    .optional(),
});

function fail(c: Context, status: 400 | 401 | 403 | 404, code: string, message: string) {
  if (status === 401) c.header("WWW-Authenticate", 'Bearer realm="llmgw-agent"');
  const answer: LocalApiErrorAnswer = { error: { code, message: message.slice(0, 4096) } };
  return c.json(answer, status);
}

/**
 * The status answer (protocol/local_api_protocol.ts): each shard as its
 * heartbeat report, clipped to the protocol's bounds, with its engine.
 */
export function statusAnswer(status: AgentStatus): AgentStatusAnswer {
  return {
    node_id: status.node_id,
    generation: status.generation,
    registered: status.registered,
    last_heartbeat_at: status.last_heartbeat_at,
    control_plane_failures: status.control_plane_failures,
    // The supervisor names every shard's engine; the heartbeat's clipping leaves it out.
    shards: status.shards.map((s) => ({
      ...shardReport(s),
      engine: (s.engine ?? "").slice(0, 64),
    })),
  };
}

/** What the local API needs of one shard for its logs. */
export interface ShardLogView {
  /** Its status. */
  status: ShardReport;
  /** The kept lines, oldest first. */
  log_tail: readonly string[];
  /** The tail's identity (LogTail.id). */
  log_id?: string;
  /** The position in the log of `log_tail[0]`. */
  log_first?: number;
  /** Probe lines the tail left out (supervisor/probe_lines.ts). */
  probe_lines_hidden?: number;
}

/**
 * The logs answer: the last `lines` lines of the tail, each clipped to the
 * protocol's bound, and where they start in the log when that is known.
 */
export function shardLogsAnswer(id: string, shard: ShardLogView, lines: number): ShardLogsAnswer {
  const kept = shard.log_tail.slice(-lines);
  return {
    id,
    state: shard.status.state,
    lines: kept.map((l) => l.slice(0, MAX_LOG_LINE_CHARS)),
    ...(shard.log_id === undefined || shard.log_first === undefined ? {} : {
      log_id: shard.log_id,
      first: shard.log_first + shard.log_tail.length - kept.length,
    }),
    ...(shard.probe_lines_hidden === undefined
      ? {}
      : { probe_lines_hidden: shard.probe_lines_hidden }),
  };
}

/** The local API as a Hono app (served by the agent with `Deno.serve`). */
export function localApi(view: LocalApiView, token: string): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/metrics", (c) => {
    const header = c.req.header("authorization");
    if (bearer(header) === null) {
      return fail(c, 401, "unauthorized", "a bearer token is required");
    }
    if (!bearerHashMatches(header, view.metricsTokenHashes())) {
      return fail(c, 403, "forbidden", "this token is not a metrics token of this cluster");
    }
    return c.body(renderAgentMetrics(view.metrics()), 200, {
      "content-type": METRICS_CONTENT_TYPE,
    });
  });
  app.use("/v1/*", async (c, next) => {
    const header = c.req.header("authorization");
    if (bearer(header) === null) {
      return fail(c, 401, "unauthorized", "a bearer token is required");
    }
    if (!bearerMatches(header, token)) {
      return fail(c, 403, "forbidden", "this token is not this agent's local API token");
    }
    await next();
  });
  app.get("/v1/status", (c) => c.json(statusAnswer(view.status())));
  app.get("/v1/shards/:id/logs", (c) => {
    const parsed = LogsQuerySchema.safeParse({ lines: c.req.query("lines") });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return fail(c, 400, "bad_request", `query ${issue.path.join(".")}: ${issue.message}`);
    }
    const id = c.req.param("id");
    const shard = view.shard(id);
    if (shard === null) return fail(c, 404, "not_found", `no shard ${JSON.stringify(id)}`);
    return c.json(shardLogsAnswer(id, shard, parsed.data.lines ?? 100));
  });
  app.notFound((c) => fail(c, 404, "not_found", `no route ${c.req.method} ${c.req.path}`));
  // Only a bug reaches this: no input makes a handler throw.
  app.onError((e, c) => {
    const message = errorMessage(e).slice(0, 4096);
    const answer: LocalApiErrorAnswer = { error: { code: "internal", message } };
    return c.json(answer, 500);
  });
  return app;
}
