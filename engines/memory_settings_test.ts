import { assertEquals } from "../tests/assert.ts";
import { engineMemorySettings, flagValue, parseLength } from "./memory_settings.ts";

Deno.test("vLLM: defaults, and the flags that change them", () => {
  assertEquals(engineMemorySettings("vllm", [], 4), {
    fraction: 0.9,
    fraction_from: "vllm default",
    max_model_len: null,
    max_model_len_auto: false,
    kv_cache_element_bytes: null,
  });
  assertEquals(
    engineMemorySettings("vllm", [
      "--gpu-memory-utilization=0.95",
      "--max-model-len",
      "32k",
      "--kv-cache-dtype",
      "fp8_e4m3",
    ], 1),
    {
      fraction: 0.95,
      fraction_from: "--gpu-memory-utilization 0.95",
      max_model_len: 32_000,
      max_model_len_auto: false,
      kv_cache_element_bytes: 1,
    },
  );
  // underscores as vLLM accepts them; the last one wins; a bad value keeps the default
  assertEquals(
    engineMemorySettings("vllm", ["--gpu_memory_utilization", "0.8", "--max-model-len", "-1"], 1)!
      .fraction,
    0.8,
  );
  assertEquals(
    engineMemorySettings("vllm", ["--max-model-len", "auto"], 1)!.max_model_len_auto,
    true,
  );
  assertEquals(engineMemorySettings("vllm", ["--gpu-memory-utilization", "9"], 1)!.fraction, 0.9);
});

Deno.test("SGLang: the default fraction falls with tensor parallelism", () => {
  const at = (tp: number) => engineMemorySettings("sglang", [], tp)!.fraction;
  assertEquals([at(1), at(2), at(4), at(8), at(16)], [0.88, 0.87, 0.85, 0.81, 0.79]);
  const s = engineMemorySettings("sglang", [
    "--mem-fraction-static",
    "0.7",
    "--context-length",
    "8192",
  ], 8)!;
  assertEquals([s.fraction, s.max_model_len], [0.7, 8192]);
});

Deno.test("an engine whose settings are unknown gets null", () => {
  assertEquals(engineMemorySettings("trtllm", [], 1), null);
});

Deno.test("parseLength reads vLLM's human-readable lengths", () => {
  assertEquals(
    ["8192", "1k", "1K", "25.6k", "1m", "x", "0"].map(parseLength),
    [8192, 1000, 1024, 25_600, 1_000_000, null, null],
  );
  assertEquals(flagValue(["--a", "1", "--a=2"], "--a"), "2");
  assertEquals(flagValue(["--a"], "--a"), null);
});
