/**
 * A vLLM metrics page and the load-metric names the vLLM plugin gives, for
 * the gateway's engine-load tests.
 *
 * @module
 */

/** The load-metric names of the vLLM plugin. */
export const VLLM_LOAD_NAMES = {
  running: ["vllm:num_requests_running"],
  waiting: ["vllm:num_requests_waiting"],
  kv_cache_usage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
};

/** A vLLM `/metrics` page: two engines' running, waiting and the older cache-usage name. */
export const VLLM_METRICS_TEXT =
  `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_running_extra{model_name="m"} 100
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 4
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
`;
