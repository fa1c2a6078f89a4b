import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { lintExposition, promtoolCheckMetrics, promtoolPath } from "../tests/prometheus_lint.ts";
import type { ColdStartReceipt, PhaseReceipt } from "../protocol/cold_start_receipt.ts";
import { emptyAgentMetrics, renderAgentMetrics } from "./metrics.ts";
import { COLD_START_BUCKETS, observeColdStart } from "./cold_start_metrics.ts";

const p = (
  phase: PhaseReceipt["phase"],
  start_ms: number | null,
  end_ms: number | null,
  skipped = false,
): PhaseReceipt => ({ phase, start_ms, end_ms, engine_seconds: null, warm: false, skipped });

/** A cold start, then a warm one of the same engine: compile 30 s, then 0.05 s. */
const COLD: ColdStartReceipt = {
  spawned_at: 0,
  download: { seconds: 12, bytes: 1_000 },
  phases: [
    p("weights", 1_000, 21_000),
    p("compile", 21_000, 51_000),
    p("kv_cache", 51_000, 52_000),
    p("graph_capture", null, null, true),
    p("ready", 52_000, 53_000),
  ],
};
const WARM: ColdStartReceipt = {
  ...COLD,
  download: null,
  phases: COLD.phases.map((x) => x.phase === "compile" ? p("compile", 21_000, 21_050) : x),
};

Deno.test("each phase of each receipt is observed per engine; skipped phases are not", () => {
  let h = observeColdStart([], "vllm", COLD);
  h = observeColdStart(h, "vllm", WARM);
  h = observeColdStart(h, "sglang", COLD);
  assertEquals(
    h.map((x) => `${x.engine}/${x.phase}:${x.histogram.count}`),
    [
      "sglang/download:1",
      "sglang/weights:1",
      "sglang/compile:1",
      "sglang/kv_cache:1",
      "sglang/ready:1",
      "vllm/download:1",
      "vllm/weights:2",
      "vllm/compile:2",
      "vllm/kv_cache:2",
      "vllm/ready:2",
    ],
  );
  const compile = h.find((x) => x.engine === "vllm" && x.phase === "compile")!.histogram;
  assertEquals(compile.sum_seconds, 30.05);
  // The warm start's 0.05 s in the first bucket, the cold one's 30 s in the 30 s one.
  assertEquals(compile.bucket_counts[0], 1);
  assertEquals(compile.bucket_counts[COLD_START_BUCKETS.indexOf(30)], 1);
});

Deno.test("the agent's /metrics carries the histogram, lint-clean", async () => {
  const h = observeColdStart(observeColdStart([], "vllm", COLD), "vllm", WARM);
  const text = renderAgentMetrics({ ...emptyAgentMetrics(), cold_start: h });
  assertStringIncludes(
    text,
    'llmgw_agent_cold_start_phase_seconds_bucket{engine="vllm",phase="compile",le="0.1"} 1\n',
  );
  assertStringIncludes(
    text,
    'llmgw_agent_cold_start_phase_seconds_count{engine="vllm",phase="compile"} 2\n',
  );
  assertEquals(lintExposition(text), []);
  // With nothing observed: the family alone.
  const none = renderAgentMetrics(emptyAgentMetrics());
  assertStringIncludes(none, "# TYPE llmgw_agent_cold_start_phase_seconds histogram\n");
  assertEquals(lintExposition(none), []);
  const promtool = promtoolPath();
  if (promtool !== null) {
    const r = await promtoolCheckMetrics(text, promtool);
    assertEquals([r.code, r.output], [0, ""]);
  }
});
