import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import type { ReplicaListing, ShardListing } from "../protocol/admin_protocol.ts";
import {
  deploymentTable,
  eventTable,
  failureLines,
  modelRevisionCell,
  modelRevisionText,
  replicaTable,
} from "./admin_views.ts";

const REASON =
  "exited with code 2: the engine refused its arguments: unrecognized arguments: --max-model-lenn";

const failed: ReplicaListing = {
  id: "llama-8b-r0",
  deployment: "llama-8b",
  state: "failed",
  profile: null,
  shards: [],
  explanation: null,
  failure: {
    reason: REASON,
    shard_id: "llama-8b-r0.3/0",
    node: "n1",
    at: 0,
    log_tail: ["usage: vllm serve [model_tag] [options]", "vllm serve: error: unrecognized …"],
    attempts: 3,
  },
  revision: 1,
  ready_at: null,
  retiring_at: null,
};

/** A shard as the API lists it: rank 0 on n1, its failure and crash loop as given. */
function shard(over: Partial<ShardListing>): ShardListing {
  return {
    shard_id: "llama-8b-r0.1/0",
    rank: 0,
    node: "n1",
    gpu_indices: [0],
    port: 0,
    state: "backoff",
    progress: null,
    last_failure: null,
    restarts: 0,
    crash_loop: null,
    cold_start: null,
    download: null,
    ...over,
  };
}

/** A shard's last failure with `reason` and `log_tail`. */
function lastFailure(reason: string, log_tail: string[]): ShardListing["last_failure"] {
  return { at: 0, reason, exit_code: 1, signal: null, log_tail };
}

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
  const crashing: ReplicaListing = {
    ...failed,
    state: "starting",
    failure: null,
    shards: [shard({ last_failure: lastFailure("exited with code 1", ["CUDA out of memory"]) })],
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
      name: "llama-8b",
      model: "m",
      served_model_name: "llama-8b",
      replicas: 3,
      profiles: [{ name: "p", engine: "vllm" }],
    },
    created_at: 0,
    updated_at: 0,
  };
  const replica = (id: string, state: ReplicaListing["state"]) => ({ ...failed, id, state });
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
    {
      id: 1,
      at: 0,
      kind: "replica_failed",
      subject: "replica/x-r0",
      message: "line one\nline two",
      uid: "",
    },
    {
      id: 2,
      at: 0,
      kind: "replica_placed",
      subject: "replica/x-r1",
      message: "word ".repeat(40).trim(),
      uid: "",
    },
  ]);
  const lines = table.split("\n");
  assertEquals(lines.length, 3, table);
  assertOk(lines[1].endsWith("line one …"), lines[1]);
  assertOk(lines[2].endsWith("…") && !lines[2].endsWith(" …"), lines[2]);
});

Deno.test("get replicas and explain: a crash-looping shard shows its count, restarts and last error", () => {
  const looping: ReplicaListing = {
    ...failed,
    state: "starting",
    failure: null,
    shards: [shard({
      restarts: 3,
      crash_loop: { failures: 3, limit: 5 },
      last_failure: lastFailure("exited with code 1", [
        "ModuleNotFoundError: No module named 'sglang'",
      ]),
    })],
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

Deno.test("get deployments: MODEL REVISION is the revision with its short commit, ? while unresolved, - for a path; describe shows it whole", () => {
  const commit = "0123456789abcdef0123456789abcdef01234567";
  const listing = (model: string, revision: string | undefined, model_commit: string | null) => ({
    name: "m",
    spec: {
      name: "m",
      model,
      ...(revision === undefined ? {} : { revision }),
      served_model_name: "m",
      replicas: 1,
      profiles: [{ name: "p", engine: "vllm" }],
    },
    created_at: 0,
    updated_at: 0,
    model_commit,
  });
  const cases: [ReturnType<typeof listing>, string, string][] = [
    [listing("org/m", "main", commit), "main@0123456", `main → ${commit}`],
    [
      listing("org/m", "v2", null),
      "v2@?",
      "v2 → not resolved yet (the control plane retries)",
    ],
    [listing("/models/m", undefined, null), "-", "- (a local path: used as it is)"],
  ];
  for (const [d, cell, text] of cases) {
    assertEquals([modelRevisionCell(d), modelRevisionText(d)], [cell, text]);
    const [header, row] = deploymentTable([d], []).split("\n");
    assertOk(header.includes("MODEL REVISION"), header);
    assertOk(row.includes(` ${cell} `), row);
  }
});
