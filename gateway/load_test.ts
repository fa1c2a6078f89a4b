import { VLLM_LOAD_NAMES, VLLM_METRICS_TEXT } from "../tests/engine_metrics_fixture.ts";
import { assertEquals } from "../tests/assert.ts";
import { effectiveLoad, metricValue, parseEngineLoad, STALE_MS } from "./load.ts";

const VLLM = VLLM_LOAD_NAMES;
const TEXT = VLLM_METRICS_TEXT;

Deno.test("metricValue: sums a name's series, skips longer names, takes the first name present", () => {
  assertEquals(metricValue(TEXT, ["vllm:num_requests_running"]), 5);
  assertEquals(metricValue(TEXT, ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]), 0.5);
  assertEquals(metricValue(TEXT, ["sglang:num_running_reqs"]), null);
  assertEquals(metricValue("sglang:num_queue_reqs 7\n", ["sglang:num_queue_reqs"]), 7);
  assertEquals(metricValue('x{a="1"} NaN\nx 2\n', ["x"]), 2);
});

Deno.test("parseEngineLoad and effectiveLoad: the larger of own and engine counts while fresh", () => {
  const load = parseEngineLoad(TEXT, VLLM, 1_000)!;
  assertEquals(load, { running: 5, waiting: 4, kvUsage: 0.5, at: 1_000 });
  assertEquals(parseEngineLoad("vllm:num_requests_running 1\n", VLLM, 0), null, "waiting missing");
  const e = { outstanding: 2, engineLoad: load };
  assertEquals(effectiveLoad(e, 1_000 + STALE_MS), 9);
  assertEquals(effectiveLoad(e, 1_001 + STALE_MS), 2, "a stale reading is not used");
  assertEquals(effectiveLoad({ ...e, outstanding: 12 }, 1_000), 12);
  assertEquals(effectiveLoad({ ...e, engineLoad: null }, 1_000), 2);
});
