/**
 * Tests of the fake engine's /metrics (dev/fake_engine/fake_engine_metrics.ts): the
 * metric names of each engine and vLLM version, and, as real processes
 * started through the shims, running and waiting requests during slow
 * streams.
 */
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import {
  type Engine,
  freePort,
  metric,
  POLL,
  sglangArgv,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";
import { metricsText } from "./fake_engine_metrics.ts";

Deno.test("metric names follow the engine and the vLLM version", () => {
  const s = {
    running: 2,
    waiting: 1,
    max: 4,
    completed: 0,
    prompt_tokens: 0,
    generation_tokens: 0,
  };
  const v011 = metricsText("vllm", "0.11.1", "fake-model", s);
  assertEquals([
    metric(v011, "vllm:num_requests_running"),
    metric(v011, "vllm:num_requests_waiting"),
    metric(v011, "vllm:kv_cache_usage_perc"),
  ], [2, 1, 0.5]);
  assertEquals(metric(v011, "vllm:gpu_cache_usage_perc"), undefined);
  const v010 = metricsText("vllm", "0.10.1", "fake-model", s);
  assertEquals([
    metric(v010, "vllm:kv_cache_usage_perc"),
    metric(v010, "vllm:gpu_cache_usage_perc"),
  ], [0.5, 0.5]);
  const sg = metricsText("sglang", "0.5.3", "fake-model", s);
  assertEquals([
    metric(sg, "sglang:num_running_reqs"),
    metric(sg, "sglang:num_queue_reqs"),
    metric(sg, "sglang:token_usage"),
  ], [2, 1, 0.5]);
});

/** Two slow streams with one slot: one runs, one waits; disconnects free the slots. */
async function runningAndWaiting(
  e: Engine,
  names: [string, string],
  chatBody: unknown,
): Promise<void> {
  const counts = async () => {
    const m = await e.request("/metrics");
    assertEquals(m?.status, 200);
    return [metric(m!.body, names[0]), metric(m!.body, names[1])];
  };
  assertEquals(await counts(), [0, 0]);
  const a = await e.stream("/v1/chat/completions", chatBody);
  try {
    const first = await a.read();
    assertOk(!first.done && first.value.startsWith("data: {"));
    assertEquals(await counts(), [1, 0]);
    const b = await e.stream("/v1/chat/completions", chatBody);
    try {
      await until("one running, one waiting", async () => {
        const c = await counts();
        return c[0] === 1 && c[1] === 1 || undefined;
      }, POLL);
      // Chunks keep arriving one by one while the request runs.
      const next = await a.read();
      assertOk(!next.done && !next.value.includes("[DONE]"));
      await a.cancel();
      await until("the waiting request to run", async () => {
        const c = await counts();
        return c[0] === 1 && c[1] === 0 || undefined;
      }, POLL);
      const bFirst = await b.read();
      assertOk(!bFirst.done && bFirst.value.startsWith("data: {"));
    } finally {
      await b.cancel();
    }
    await until("all slots free after disconnects", async () => {
      const c = await counts();
      return c[0] === 0 && c[1] === 0 || undefined;
    }, POLL);
  } finally {
    await a.cancel().catch(() => {});
  }
}

Deno.test("vLLM: /metrics shows running and waiting requests during slow streams", async () => {
  const port = freePort();
  const slow = {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "100000",
    FAKE_ENGINE_TOKEN_DELAY_MS: "50",
  };
  await withEngine(vllmArgv(port, ["--max-num-seqs", "1"]), slow, port, async (e) => {
    await e.waitHealthy();
    await runningAndWaiting(e, ["vllm:num_requests_running", "vllm:num_requests_waiting"], {
      model: "fake-model",
      messages: [{ role: "user", content: "go on" }],
      stream: true,
    });
    const m = (await e.request("/metrics"))!.body;
    assertEquals(metric(m, "vllm:kv_cache_usage_perc"), 0);
  });
});

Deno.test("SGLang: /metrics shows sglang:num_running_reqs and num_queue_reqs during slow streams", async () => {
  const port = freePort();
  const slow = {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "100000",
    FAKE_ENGINE_TOKEN_DELAY_MS: "50",
  };
  await withEngine(sglangArgv(port, ["--max-running-requests", "1"]), slow, port, async (e) => {
    await e.waitHealthy();
    const m = (await e.request("/metrics"))!.body;
    assertEquals(metric(m, "sglang:token_usage"), 0);
    await runningAndWaiting(e, ["sglang:num_running_reqs", "sglang:num_queue_reqs"], {
      model: "fake-model",
      messages: [{ role: "user", content: "go on" }],
      stream: true,
    });
  });
});
