/**
 * Engine compile cache evictions an agent reports in its heartbeat become
 * `engine_cache_evicted` events on the node (issue #25 item 7); a report
 * without any (an older agent) makes none, and the wire schema takes both.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { registerNodes, testControl } from "../tests/control_fixture.ts";
import { type ModelCacheReport, ModelCacheReportSchema } from "../protocol/model_cache_report.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const MIB = 2 ** 20;

const report = (
  engine: ModelCacheReport["engine_caches_evicted"],
): ModelCacheReport => ({
  room_bytes: 10 * MIB,
  revisions: [],
  omitted: 0,
  evicted: [],
  ...(engine === undefined ? {} : { engine_caches_evicted: engine }),
});

Deno.test("an engine cache eviction the agent reports is an engine_cache_evicted event", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: report(undefined),
  });
  assertEquals((await cp.events.list()).filter((e) => e.kind === "engine_cache_evicted"), []);
  const evicted: ModelCacheReport["engine_caches_evicted"] = [{
    engine: "vllm",
    key: "acme--m_4b1c2a9d0e7f_h100-80g_tp1-pp1-n1_v0.11.1_0123456789ab",
    model: "acme/m",
    commit: COMMIT,
    bytes: 300 * MIB,
    at: 5,
    cause: "revision_evicted",
    reason: `acme/m@${COMMIT} is no longer in the model cache`,
  }, {
    engine: "sglang",
    key: "old",
    model: null,
    commit: null,
    bytes: 1024,
    at: 6,
    cause: "disk_pressure",
    reason: "disk 95% used",
  }, {
    // Its walk was cut short on the agent: a lower bound.
    engine: "vllm",
    key: "huge",
    model: null,
    commit: null,
    bytes: 2 * 1024 * MIB,
    bytes_at_least: true,
    at: 7,
    cause: "disk_pressure",
    reason: "disk 95% used",
  }];
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: report(evicted),
  });
  const events = (await cp.events.list()).filter((e) => e.kind === "engine_cache_evicted");
  assertEquals(events.map((e) => e.subject), ["node/n1", "node/n1", "node/n1"]);
  const message = (engine: string) =>
    events.find((e) => e.message.includes(`the ${engine} compile cache`))?.message ?? "";
  const first = message("vllm");
  const second = message("sglang");
  assertOk(
    first.includes(`vllm compile cache acme--m_`) && first.includes(`of acme/m@${COMMIT}`) &&
      first.includes("300.0 MiB freed") && first.includes("no longer in the model cache"),
    first,
  );
  assertOk(second.includes("sglang compile cache old, 1.0 KiB freed: disk 95% used"), second);
  const third = events.find((e) => e.message.includes("compile cache huge"))?.message ?? "";
  assertOk(third.includes("compile cache huge, at least 2.0 GiB freed: disk 95% used"), third);
});

Deno.test("the wire takes a report with or without engine cache evictions, and refuses a bad one", () => {
  assertEquals(ModelCacheReportSchema.safeParse(report(undefined)).success, true);
  const one = {
    engine: "vllm",
    key: "k",
    model: "/models/llama",
    commit: null,
    bytes: 1,
    at: 1,
    cause: "disk_pressure" as const,
    reason: "r",
  };
  assertEquals(ModelCacheReportSchema.safeParse(report([one])).success, true);
  const cut = { ...one, bytes_at_least: true };
  assertEquals(ModelCacheReportSchema.safeParse(report([cut])).success, true);
  const notBool = { ...report([one]), engine_caches_evicted: [{ ...one, bytes_at_least: "yes" }] };
  assertEquals(ModelCacheReportSchema.safeParse(notBool).success, false);
  const bad = { ...report([one]), engine_caches_evicted: [{ ...one, cause: "boredom" }] };
  assertEquals(ModelCacheReportSchema.safeParse(bad).success, false);
  assertEquals(
    ModelCacheReportSchema.safeParse({
      ...report([one]),
      engine_caches_evicted: [{ ...one, key: "" }],
    })
      .success,
    false,
  );
});
