/**
 * The local API as a plain Hono app (no sockets): token checks, the
 * status, logs and metrics endpoints, and JSON errors for every malformed
 * request.
 */
import { createHash } from "node:crypto";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import {
  localApiErrorMessage,
  MAX_LOG_LINE_CHARS,
  parseAgentStatusAnswer,
  parseShardLogsAnswer,
} from "../protocol/local_api_protocol.ts";
import type { ShardReport } from "../supervisor/types.ts";
import { lintExposition } from "../tests/prometheus_lint.ts";
import { bearerHashMatches, bearerMatches } from "../http/tokens.ts";
import {
  localApi,
  type LocalApiView,
  METRICS_CONTENT_TYPE,
  shardLogsAnswer,
  statusAnswer,
} from "./local_api.ts";
import { type AgentMetricsSnapshot, emptyTimeToReady, renderAgentMetrics } from "./metrics.ts";

const TOKEN = "local-token-0123456789";
const METRICS_TOKEN = "llmgw_metrics_abcdefghijklmnop";
const OLD_METRICS_TOKEN = "llmgw_metrics_rotated-out-but-still-valid";
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

const SHARD: ShardReport = {
  id: "r1/s0",
  engine: "vllm",
  state: "ready",
  since: 1,
  pid: 123,
  port: 8000,
  rendezvous_port: null,
  notice: null,
  serves_http: true,
  progress: null,
  restarts: 0,
  adopted: false,
  last_failure: null,
  spec_hash: "abc",
};

const VIEW: LocalApiView = {
  status: () => ({
    node_id: "n1",
    generation: 4,
    registered: true,
    last_heartbeat_at: null,
    control_plane_failures: 0,
    shards: [SHARD],
  }),
  shard: (id) =>
    id === SHARD.id
      ? { status: SHARD, log_tail: Array.from({ length: 300 }, (_, i) => `line ${i}`) }
      : null,
  metrics: () => METRICS,
  // Upper case: the hashes' case does not matter.
  metricsTokenHashes: () => [sha256(OLD_METRICS_TOKEN).toUpperCase(), sha256(METRICS_TOKEN)],
};

const METRICS: AgentMetricsSnapshot = {
  gpus: [{
    index: 0,
    uuid: "GPU-0",
    class: "h100-80g",
    memory_total_mb: 81559,
    memory_used_mb: null,
    health: { ecc_errors: 0, temperature_c: 35, problems: [] },
    allocated_to: SHARD.id,
  }],
  shards: [{ ...SHARD, restarts_total: 0, last_time_to_ready_seconds: 12 }],
  time_to_ready: emptyTimeToReady(),
  discovery_errors: { nvidia_smi: 0, sysfs: 1 },
  certificate_not_after_ms: null,
  certificate_renewal_failures: 0,
};

const app = localApi(VIEW, TOKEN);

async function get(path: string, auth?: string) {
  const res = await app.request(path, {
    headers: auth === undefined ? {} : { authorization: auth },
  });
  return { status: res.status, body: await res.json(), res };
}

Deno.test("local API: /healthz is open, /v1 needs the bearer token", async () => {
  assertEquals((await get("/healthz")).status, 200);
  for (const auth of [undefined, "", "Bearer", `Basic ${TOKEN}`, `${TOKEN}`]) {
    const r = await get("/v1/status", auth);
    assertEquals(r.status, 401, String(auth));
    assertEquals(r.body.error.code, "unauthorized");
    assertStringIncludes(r.res.headers.get("www-authenticate") ?? "", "Bearer");
  }
  // Another token is refused as the wrong credential (the control plane's rule).
  const wrong = await get("/v1/status", "Bearer wrong");
  assertEquals([wrong.status, wrong.body.error.code], [403, "forbidden"]);
  const ok = await get("/v1/status", `Bearer ${TOKEN}`);
  assertEquals(ok.status, 200);
  assertEquals([ok.body.node_id, ok.body.generation, ok.body.shards[0].id], ["n1", 4, "r1/s0"]);
  // Unknown paths need the token too before saying 404.
  assertEquals((await get("/v1/nothing")).status, 401);
  assertEquals((await get("/v1/nothing", `Bearer ${TOKEN}`)).status, 404);
  assertEquals((await get("/nothing")).body.error.code, "not_found");
});

Deno.test("local API: /metrics is for metrics tokens only", async () => {
  const metrics = (auth?: string) =>
    app.request("/metrics", { headers: auth === undefined ? {} : { authorization: auth } });
  for (
    const auth of [undefined, "", "Bearer", "Bearer  ", `Basic ${METRICS_TOKEN}`, METRICS_TOKEN]
  ) {
    const r = await metrics(auth);
    assertEquals(r.status, 401, String(auth));
    assertEquals((await r.json()).error.code, "unauthorized");
    assertStringIncludes(r.headers.get("www-authenticate") ?? "", "Bearer");
  }
  // Least privilege: the local token is not Prometheus', nor is a token that
  // merely resembles a metrics token or is its hash.
  for (
    const token of [
      TOKEN,
      "wrong",
      `${METRICS_TOKEN}x`,
      METRICS_TOKEN.slice(1),
      sha256(METRICS_TOKEN),
    ]
  ) {
    const r = await metrics(`Bearer ${token}`);
    assertEquals(r.status, 403, token);
    const body = await r.json();
    assertEquals(body.error.code, "forbidden");
    assertOk(localApiErrorMessage(body) !== null);
  }
  for (const token of [METRICS_TOKEN, OLD_METRICS_TOKEN]) {
    const r = await metrics(`bearer ${token}`);
    assertEquals(r.status, 200, token);
    assertEquals(r.headers.get("content-type"), METRICS_CONTENT_TYPE);
    const text = await r.text();
    assertEquals(text, renderAgentMetrics(METRICS));
    assertStringIncludes(
      text,
      'llmgw_agent_gpu_shard_info{gpu="0",uuid="GPU-0",class="h100-80g",shard="r1/s0"} 1',
    );
    assertEquals(lintExposition(text), []);
  }
  // A metrics token opens nothing else.
  assertEquals((await get("/v1/status", `Bearer ${METRICS_TOKEN}`)).status, 403);
  // Before the control plane sent any hash, no token reads metrics.
  const closed = localApi({ ...VIEW, metricsTokenHashes: () => [] }, TOKEN);
  const r = await closed.request("/metrics", {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  assertEquals(r.status, 403);
  await r.body?.cancel();
});

Deno.test("local API: logs, with the line count validated and unknown shards 404", async () => {
  const auth = `Bearer ${TOKEN}`;
  const id = encodeURIComponent("r1/s0");
  const def = await get(`/v1/shards/${id}/logs`, auth);
  assertEquals(def.status, 200);
  assertEquals(def.body.lines.length, 100);
  assertEquals(def.body.lines.at(-1), "line 299");
  assertEquals((await get(`/v1/shards/${id}/logs?lines=2`, auth)).body.lines, [
    "line 298",
    "line 299",
  ]);
  assertEquals((await get(`/v1/shards/${id}/logs?lines=10000`, auth)).body.lines.length, 300);
  for (const q of ["0", "-1", "1.5", "abc", "", "10001", "1e3", "99999999999999999999"]) {
    const r = await get(`/v1/shards/${id}/logs?lines=${q}`, auth);
    assertEquals(r.status, 400, q);
    assertEquals(r.body.error.code, "bad_request");
    assertStringIncludes(r.body.error.message, "lines");
  }
  const missing = await get("/v1/shards/nope/logs", auth);
  assertEquals([missing.status, missing.body.error.code], [404, "not_found"]);
  const post = await app.request("/v1/status", {
    method: "POST",
    headers: { authorization: auth },
  });
  assertOk(post.status === 404 || post.status === 405);
  await post.body?.cancel();
});

Deno.test("local API: every answer is what protocol/local_api_protocol.ts says", async () => {
  const auth = `Bearer ${TOKEN}`;
  const status = await get("/v1/status", auth);
  assertEquals(parseAgentStatusAnswer(status.body), status.body);
  assertEquals(status.body.shards[0].engine, "vllm");
  const logs = await get(`/v1/shards/${encodeURIComponent(SHARD.id)}/logs?lines=3`, auth);
  assertEquals(parseShardLogsAnswer(logs.body), {
    id: SHARD.id,
    state: "ready",
    lines: ["line 297", "line 298", "line 299"],
  });
  for (const [path, header] of [["/v1/status", undefined], ["/v1/shards/nope/logs", auth]]) {
    const e = await get(path!, header);
    assertOk(localApiErrorMessage(e.body) !== null, `${path}: ${JSON.stringify(e.body)}`);
  }
});

Deno.test("local API answers: fields beyond the protocol's bounds are clipped, not sent", () => {
  const long = "x".repeat(MAX_LOG_LINE_CHARS + 10);
  const logs = shardLogsAnswer("s", { status: SHARD, log_tail: ["a", long] }, 5);
  assertEquals(logs.lines.map((l) => l.length), [1, MAX_LOG_LINE_CHARS]);
  assertEquals(parseShardLogsAnswer(logs), logs);
  const failed: ShardReport = {
    ...SHARD,
    state: "failed",
    last_failure: {
      at: 3,
      reason: "r".repeat(5000),
      exit_code: 1,
      signal: null,
      log_tail: [long],
      permanent: false,
    },
  };
  const answer = statusAnswer({ ...VIEW.status(), shards: [failed] });
  assertEquals(parseAgentStatusAnswer(answer), answer);
  assertEquals(answer.shards[0].last_failure?.reason.length, 4096);
});

Deno.test("bearerHashMatches: a token whose SHA-256 is listed, in any position", () => {
  const hashes = ["not-a-hash", sha256("a"), sha256("b").toUpperCase()];
  assertOk(bearerHashMatches("Bearer a", hashes));
  assertOk(bearerHashMatches("Bearer b", hashes));
  assertOk(!bearerHashMatches("Bearer c", hashes));
  assertOk(!bearerHashMatches("Bearer not-a-hash", hashes));
  assertOk(!bearerHashMatches(`Bearer ${sha256("a")}`, hashes));
  assertOk(!bearerHashMatches("Bearer a", []));
  assertOk(!bearerHashMatches(undefined, hashes));
  // An empty header is no token, even when the empty string's hash is listed.
  assertOk(!bearerHashMatches("", [sha256("")]));
  assertOk(!bearerHashMatches("Bearer ", [sha256("")]));
});

Deno.test("bearerMatches: exact token only", () => {
  assertOk(bearerMatches(`Bearer ${TOKEN}`, TOKEN));
  assertOk(bearerMatches(`bearer ${TOKEN}`, TOKEN));
  assertOk(!bearerMatches(`Bearer ${TOKEN}x`, TOKEN));
  assertOk(!bearerMatches(`Bearer ${TOKEN.slice(1)}`, TOKEN));
  assertOk(!bearerMatches(undefined, TOKEN));
  assertOk(!bearerMatches("Bearer ", ""));
});

Deno.test("shardLogsAnswer: the position of the first line answered", () => {
  const status = { state: "ready" } as ShardReport;
  const view = { status, log_tail: ["a", "b", "c"], log_id: "L", log_first: 7 };
  assertEquals(shardLogsAnswer("s", view, 2), {
    id: "s",
    state: "ready",
    lines: ["b", "c"],
    log_id: "L",
    first: 8,
  });
  assertEquals("first" in shardLogsAnswer("s", { status, log_tail: ["a"] }, 2), false);
});

Deno.test("shardLogsAnswer: the count of probe lines the tail left out", () => {
  const status = { state: "ready" } as ShardReport;
  const view = { status, log_tail: ["a"], log_id: "L", log_first: 0, probe_lines_hidden: 42 };
  const answer = shardLogsAnswer("s", view, 10);
  assertEquals(answer.probe_lines_hidden, 42);
  assertEquals(parseShardLogsAnswer(answer).probe_lines_hidden, 42);
  assertEquals("probe_lines_hidden" in shardLogsAnswer("s", { status, log_tail: ["a"] }, 2), false);
});
