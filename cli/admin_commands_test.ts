import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { cutAtWord, failureLines, replicaTable } from "./admin_commands.ts";

const REASON =
  "exited with code 2: the engine refused its arguments: unrecognized arguments: --max-model-lenn";

const failed = {
  id: "llama-8b-r0",
  deployment: "llama-8b",
  state: "failed",
  profile: null,
  shards: [],
  explanation: null,
  failure: {
    reason: REASON,
    log_tail: ["usage: vllm serve [model_tag] [options]", "vllm serve: error: unrecognized …"],
    attempts: 3,
  },
};

Deno.test("get replicas: a failed replica shows its reason, cut at a word", () => {
  const table = replicaTable([failed]);
  const row = table.split("\n")[1];
  assertStringIncludes(row, "llama-8b-r0");
  assertStringIncludes(row, "failed");
  assertStringIncludes(row, "exited with code 2: the engine refused its arguments");
  assertOk(row.trimEnd().endsWith("…"), row);
  assertOk(!row.includes("lenn"), "cut before the end, at a word");
});

Deno.test("explain: the reason and the log tail of a failed replica and of failing shards", () => {
  assertEquals(failureLines(failed), [
    "  failed after 3 placement(s), not retried until the deployment changes:",
    `    ${REASON}`,
    "    log tail:",
    "      usage: vllm serve [model_tag] [options]",
    "      vllm serve: error: unrecognized …",
  ]);
  const crashing = {
    ...failed,
    state: "starting",
    failure: null,
    shards: [{
      rank: 0,
      node: "n1",
      gpu_indices: [0],
      state: "backoff",
      progress: null,
      last_failure: { reason: "exited with code 1", log_tail: ["CUDA out of memory"] },
    }],
  };
  assertEquals(failureLines(crashing), [
    "  rank 0 last failure: exited with code 1",
    "    log tail:",
    "      CUDA out of memory",
  ]);
});

Deno.test("cutAtWord: short text whole, long text at a word, other lines marked", () => {
  assertEquals(cutAtWord("short", 80), "short");
  assertEquals(cutAtWord("one two three four", 10), "one two…");
  assertEquals(cutAtWord("first line\nsecond line", 80), "first line …");
  assertEquals(cutAtWord("x".repeat(20), 10), `${"x".repeat(9)}…`);
});
