/** The agent local API's answers: valid ones parse to themselves, bad ones name the path. */
import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import {
  type AgentStatusAnswer,
  localApiErrorMessage,
  MAX_LOG_LINE_CHARS,
  MAX_LOG_LINES,
  parseAgentStatusAnswer,
  parseShardLogsAnswer,
  type ShardLogsAnswer,
} from "./local_api_protocol.ts";
import { WireFormatError } from "./wire_error.ts";

const LOGS: ShardLogsAnswer = { id: "dep-r0/0", state: "loading", lines: ["a", "b"] };

const STATUS: AgentStatusAnswer = {
  node_id: "n1",
  generation: 3,
  registered: true,
  last_heartbeat_at: 1_700_000_000_000,
  control_plane_failures: 0,
  shards: [{
    id: "dep-r0/0",
    state: "failed",
    since: 1,
    pid: null,
    port: 8000,
    serves_http: true,
    progress: { percent: 40, done: null, total: null },
    restarts: 2,
    adopted: false,
    last_failure: {
      at: 2,
      reason: "exited with code 1",
      exit_code: 1,
      signal: null,
      log_tail: ["boom"],
    },
    spec_hash: "abc",
    engine: "vllm",
  }],
};

Deno.test("shard logs answer: valid answers parse to themselves", () => {
  assertEquals(parseShardLogsAnswer(LOGS), LOGS);
  assertEquals(parseShardLogsAnswer({ ...LOGS, lines: [] }), { ...LOGS, lines: [] });
  const full = { ...LOGS, lines: Array(MAX_LOG_LINES).fill("x".repeat(MAX_LOG_LINE_CHARS)) };
  assertEquals(parseShardLogsAnswer(full).lines.length, MAX_LOG_LINES);
});

Deno.test("shard logs answer: each bad field is refused with its path", () => {
  const cases: [string, unknown, string][] = [
    ["a line that is not text", { ...LOGS, lines: ["a", 7] }, "lines[1]: "],
    ["too many lines", { ...LOGS, lines: Array(MAX_LOG_LINES + 1).fill("") }, "lines: Too big"],
    ["a line too long", { ...LOGS, lines: ["x".repeat(MAX_LOG_LINE_CHARS + 1)] }, "lines[0]: "],
    ["unknown state", { ...LOGS, state: "sleeping" }, "state: "],
    ["no id", { state: "ready", lines: [] }, "id: "],
    ["an error answer", { error: { code: "not_found", message: "no shard" } }, "id: "],
  ];
  for (const [name, value, part] of cases) {
    const e = assertThrows(() => parseShardLogsAnswer(value), WireFormatError);
    assertStringIncludes(e.message, `Cannot use the shard's logs: ${part}`, name);
  }
});

Deno.test("status answer: valid parses to itself, a bad shard field names its path", () => {
  assertEquals(parseAgentStatusAnswer(STATUS), STATUS);
  const bad = structuredClone(STATUS);
  bad.shards[0].port = 70_000;
  const e = assertThrows(() => parseAgentStatusAnswer(bad), WireFormatError);
  assertStringIncludes(e.message, "Cannot use the agent's status: shards[0].port: Too big");
  const noEngine = structuredClone(STATUS) as { shards: Record<string, unknown>[] };
  delete noEngine.shards[0].engine;
  assertThrows(() => parseAgentStatusAnswer(noEngine), WireFormatError, "shards[0].engine");
});

Deno.test("localApiErrorMessage: the server's message, or null for anything else", () => {
  assertEquals(
    localApiErrorMessage({ error: { code: "not_found", message: "no shard" } }),
    "no shard",
  );
  assertEquals(localApiErrorMessage({ error: "no shard" }), null);
  assertEquals(localApiErrorMessage("<html>bad gateway</html>"), null);
  assertEquals(localApiErrorMessage(LOGS), null);
});
