/**
 * The agent's local API (design §3, §9.4): what the control plane, `llmgw
 * logs` and an operator on the host read from an agent, with the agent's
 * local token (agent/local_api.ts serves it).
 *
 * - `GET /v1/status` → {@link AgentStatusAnswer}.
 * - `GET /v1/shards/:id/logs?lines=N` → {@link ShardLogsAnswer}: the last N
 *   lines (1 to {@link MAX_LOG_LINES}) of the shard's in-memory log tail.
 * - Errors → {@link LocalApiErrorAnswer}, `{error: {code, message}}`.
 *
 * @module
 */
import { z } from "zod";
import { ShardReportSchema } from "./agent_protocol.ts";
import { parseWire } from "./wire_error.ts";

/** The most lines one logs request returns. */
export const MAX_LOG_LINES = 10_000;

/** The most characters of one log line in an answer (the default log tail's whole budget). */
export const MAX_LOG_LINE_CHARS = 64 * 1024;

/** A shard in the status answer: its report, which here always names its engine plugin. */
export const LocalShardStatusSchema = ShardReportSchema.extend({
  engine: z.string().min(1).max(64),
});

/** The answer to `GET /v1/status`. */
export const AgentStatusAnswerSchema = z.object({
  node_id: z.string().min(1).max(253),
  generation: z.number().int().min(0),
  registered: z.boolean(),
  last_heartbeat_at: z.number().nullable(),
  control_plane_failures: z.number().int().min(0),
  shards: z.array(LocalShardStatusSchema).max(1024),
});

/** The answer to `GET /v1/shards/:id/logs`. */
export const ShardLogsAnswerSchema = z.object({
  id: z.string().min(1).max(256),
  state: ShardReportSchema.shape.state,
  lines: z.array(z.string().max(MAX_LOG_LINE_CHARS)).max(MAX_LOG_LINES),
  // Where the lines are in the log, so a follower prints each once (absent
  // from older agents): the log's identity, and the position of lines[0].
  log_id: z.string().min(1).max(64).optional(),
  first: z.number().int().min(0).optional(),
  // llmgw's own probe lines the tail left out, counted (absent from older agents).
  probe_lines_hidden: z.number().int().min(0).optional(),
});

/** Every error answer of the local API. */
export const LocalApiErrorAnswerSchema = z.object({
  error: z.object({
    code: z.string().min(1).max(128),
    message: z.string().max(4096),
  }),
});

/** A parsed status answer. */
export type AgentStatusAnswer = z.infer<typeof AgentStatusAnswerSchema>;
/** A parsed logs answer. */
export type ShardLogsAnswer = z.infer<typeof ShardLogsAnswerSchema>;
/** A parsed error answer. */
export type LocalApiErrorAnswer = z.infer<typeof LocalApiErrorAnswerSchema>;

/**
 * Parses the answer to `GET /v1/shards/:id/logs`.
 *
 * @throws {WireFormatError} Naming each wrong field's path, e.g. `lines[3]`.
 */
export function parseShardLogsAnswer(value: unknown): ShardLogsAnswer {
  return parseWire(ShardLogsAnswerSchema, value, "the shard's logs");
}

/**
 * Parses the answer to `GET /v1/status`.
 *
 * @throws {WireFormatError} Naming each wrong field's path.
 */
export function parseAgentStatusAnswer(value: unknown): AgentStatusAnswer {
  return parseWire(AgentStatusAnswerSchema, value, "the agent's status");
}

/** The server's message in an error answer, or null when the body is not one. */
export function localApiErrorMessage(value: unknown): string | null {
  const parsed = LocalApiErrorAnswerSchema.safeParse(value);
  return parsed.success ? parsed.data.error.message : null;
}
