import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { deploymentTable, eventTable, failureLines, replicaTable } from "./admin_views.ts";

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

Deno.test("get deployments: READY is ready replicas over desired", () => {
  const d = {
    name: "llama-8b",
    spec: {
      model: "m",
      served_model_name: "llama-8b",
      replicas: 3,
      profiles: [{ name: "p", engine: "vllm" }],
    },
    created_at: 0,
    updated_at: 0,
  };
  const replica = (id: string, state: string) => ({ ...failed, id, state });
  const table = deploymentTable([d], [
    replica("llama-8b-r0", "ready"),
    replica("llama-8b-r1", "loading"),
    replica("llama-8b-r2", "ready"),
  ]);
  const [header, row] = table.split("\n");
  assertOk(header.startsWith("DEPLOYMENT  READY"), header);
  assertOk(/^llama-8b\s+2\/3\s/.test(row), row);
});

Deno.test("get events: a multi-line or long message stays on one line, cut at a word", () => {
  const table = eventTable([
    { at: 0, kind: "replica_failed", subject: "replica/x-r0", message: "line one\nline two" },
    { at: 0, kind: "replica_placed", subject: "replica/x-r1", message: "word ".repeat(40).trim() },
  ]);
  const lines = table.split("\n");
  assertEquals(lines.length, 3, table);
  assertOk(lines[1].endsWith("line one …"), lines[1]);
  assertOk(lines[2].endsWith("…") && !lines[2].endsWith(" …"), lines[2]);
});

Deno.test("get replicas and explain: a crash-looping shard shows its count, restarts and last error", () => {
  const looping = {
    ...failed,
    state: "starting",
    failure: null,
    shards: [{
      rank: 0,
      node: "n1",
      gpu_indices: [0],
      state: "backoff",
      progress: null,
      restarts: 3,
      crash_loop: { failures: 3, limit: 5 },
      last_failure: {
        reason: "exited with code 1",
        log_tail: ["ModuleNotFoundError: No module named 'sglang'"],
      },
    }],
  };
  const [header, row] = replicaTable([looping]).split("\n");
  assertOk(/\bSHARD\s+RESTARTS\s+PROGRESS\b/.test(header), header);
  assertOk(/\bcrash_loop 3\/5\s+3\s+-/.test(row), row);
  assertEquals(failureLines(looping), [
    "  rank 0 is crash-looping on n1: 3 failures in a row (the agent gives up there at 5)",
    "  rank 0 last failure: exited with code 1",
    "    log tail:",
    "      ModuleNotFoundError: No module named 'sglang'",
  ]);
});
