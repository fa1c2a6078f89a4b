/**
 * A shard's recent log lines, fetched from its agent's local API: what
 * `llmgw logs REPLICA` shows.
 *
 * @module
 */
import {
  localApiErrorMessage,
  parseShardLogsAnswer,
  type ShardLogsAnswer as LocalShardLogs,
} from "../protocol/local_api_protocol.ts";
import { readLimited } from "../http/read_limited.ts";
import { AgentUnavailableError, errorMessage, NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";

/** A shard's log as the admin API answers it. */
export interface ShardLogs {
  /** Shard id. */
  shard_id: string;
  /** Its node. */
  node: string;
  /** Its state, as its agent says. */
  state: string;
  /** The lines, oldest first. */
  lines: string[];
  /** The log's identity on its agent; null from an agent that does not say. */
  log_id: string | null;
  /** The position in that log of `lines[0]`; null from an agent that does not say. */
  first: number | null;
  /** llmgw's own probe lines the agent left out of the tail; null from an agent that does not say. */
  probe_lines_hidden: number | null;
}

/** How the service reaches agents; `fetch` unless a test gives another. */
export type Fetch = (input: URL, init: RequestInit) => Promise<Response>;

/** The largest log answer read from an agent: 10,000 lines of up to 1 KiB each, and more. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** How long an agent may take to answer. */
const AGENT_TIMEOUT_MS = 10_000;

/** Fetches shard logs from agents. */
export class AgentLogs {
  readonly #state: ControlState;
  readonly #fetch: Fetch;

  /** Creates the service. */
  constructor(state: ControlState, fetcher: Fetch = fetch) {
    this.#state = state;
    this.#fetch = fetcher;
  }

  /** The last `lines` lines of the shard of `rank` of a replica. */
  async shard(replicaId: string, rank: number, lines: number): Promise<ShardLogs> {
    const r = this.#state.replicas.get(replicaId);
    if (r === undefined) throw new NotFoundError(`no replica ${replicaId}`);
    const shard = r.placement?.shards.find((s) => s.rank === rank);
    if (shard === undefined) {
      throw new NotFoundError(`replica ${replicaId} has no shard of rank ${rank} placed`);
    }
    const reg = this.#state.nodes.get(shard.node)?.registration;
    if (reg?.agent_url === null || reg?.agent_url === undefined || reg.agent_token === undefined) {
      throw new AgentUnavailableError(
        "agent_unavailable",
        `node ${shard.node}'s agent serves no local API the control plane can use`,
      );
    }
    let res: Response;
    try {
      const url = new URL(
        `v1/shards/${encodeURIComponent(shard.shard_id)}/logs?lines=${lines}`,
        reg.agent_url.replace(/\/?$/, "/"),
      );
      res = await this.#fetch(url, {
        headers: { authorization: `Bearer ${reg.agent_token}` },
        signal: AbortSignal.timeout(AGENT_TIMEOUT_MS),
      });
    } catch (e) {
      throw new AgentUnavailableError(
        "agent_unreachable",
        `cannot reach node ${shard.node}'s agent: ${errorMessage(e)}`,
      );
    }
    const bytes = res.body === null
      ? new Uint8Array()
      : await readLimited(res.body, MAX_ANSWER_BYTES);
    if (bytes === null) {
      throw new AgentUnavailableError(
        "agent_error",
        `node ${shard.node}'s agent answered with more than ${MAX_ANSWER_BYTES} bytes`,
      );
    }
    let body: unknown = null;
    try {
      body = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      // Not JSON: reported below as a bad answer.
    }
    if (!res.ok) {
      throw new AgentUnavailableError(
        "agent_error",
        `node ${shard.node}'s agent answered ${res.status}: ${
          localApiErrorMessage(body) ?? "no log"
        }`,
      );
    }
    let answer: LocalShardLogs;
    try {
      answer = parseShardLogsAnswer(body);
    } catch (e) {
      throw new AgentUnavailableError(
        "agent_error",
        `node ${shard.node}'s agent answered with ${errorMessage(e)}`,
      );
    }
    return {
      shard_id: shard.shard_id,
      node: shard.node,
      state: answer.state,
      lines: answer.lines,
      log_id: answer.log_id ?? null,
      first: answer.first ?? null,
      probe_lines_hidden: answer.probe_lines_hidden ?? null,
    };
  }
}
