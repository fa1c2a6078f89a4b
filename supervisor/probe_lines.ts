/**
 * Which engine log lines are llmgw's own probes (issue #23 item 10): the
 * access lines of the supervisor's readiness and liveness checks (`GET
 * /health`, `GET /v1/models`, engines/vllm.ts and engines/sglang.ts) and of
 * the agent's metrics scrapes (`GET /metrics`). They come every few seconds
 * per shard and would push everything else out of the tail an operator
 * reads, so the tail leaves them out and counts them (supervisor/shard_log.ts);
 * the log file on the node keeps every line.
 *
 * Both engines write uvicorn's access format (docs/engine_reference.md §7):
 *
 * - vLLM: uvicorn's default `%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s`,
 *   `INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK`, prefixed with
 *   `(APIServer pid=N) ` by vLLM's V1 multi-process front end;
 * - SGLang: `[%(asctime)s] ` before the same (`set_uvicorn_logging_configs`),
 *   `[2025-06-01 12:00:00] INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK`.
 *
 * @module
 */

/** The paths llmgw's probes and scrapes ask an engine for. */
export const PROBE_PATHS: readonly string[] = ["/health", "/v1/models", "/metrics"];

// An optional vLLM process prefix or SGLang timestamp, uvicorn's level, the
// client, the request line and the status code.
const ACCESS_LINE =
  /^(?:\([A-Za-z]+ pid=\d+\) |\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?INFO: +\S+ - "GET ([^ "?]+)(?:\?[^ "]*)? HTTP\/[\d.]+" (\d{3})(?: |$)/;

/**
 * Whether `line` is the access line of a successful (2xx) probe: a probe that
 * failed stays in the tail, since it may say why a shard is not ready.
 */
export function isProbeLine(line: string): boolean {
  const m = ACCESS_LINE.exec(line);
  return m !== null && PROBE_PATHS.includes(m[1]) && m[2].startsWith("2");
}

/**
 * What a reader of a tail is told of the probe lines it left out: "" for
 * none (or an agent that does not say), else e.g. "120 probe lines hidden".
 */
export function probeLinesNote(hidden: number | null | undefined): string {
  if (hidden === null || hidden === undefined || hidden <= 0) return "";
  return `${hidden} probe line${hidden === 1 ? "" : "s"} hidden`;
}
