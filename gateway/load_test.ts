import { assertEquals } from "../tests/assert.ts";
import { effectiveLoad, metricValue, parseEngineLoad, STALE_MS } from "./load.ts";

const VLLM = {
  running: ["vllm:num_requests_running"],
  waiting: ["vllm:num_requests_waiting"],
  kv_cache_usage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
};

const TEXT = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_running_extra{model_name="m"} 100
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 4
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
`;

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
