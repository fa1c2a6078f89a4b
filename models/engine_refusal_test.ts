import { assertEquals } from "../tests/assert.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import { engineMemorySettings } from "../engines/memory_settings.ts";
import { sglangRefusal, vllmRefusal } from "./engine_refusal.ts";

const GIB = 2 ** 30;
const vllm = (args: string[] = [], tp = 1) => engineMemorySettings("vllm", args, tp)!;
const shape = (tp: number, pp = 1) => ({
  tensor_parallel: tp,
  pipeline_parallel: pp,
  quantization: "none",
});

Deno.test("a TP that does not divide the heads stops vLLM at start, in its words", () => {
  assertEquals(
    vllmRefusal(fixtureFacts("qwen2.5-7b-instruct", [15e9]), shape(8), vllm(), 80 * GIB),
    {
      phase: "start",
      step: "config",
      message:
        "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).",
    },
  );
});

Deno.test("weights beyond the GPU: CUDA out of memory at load", () => {
  // 405B at TP 8 on 45 GiB GPUs: 811,706,777,600 B ÷ 8 = 94.50 GiB of weights per GPU, 49.50 too many.
  const r = vllmRefusal(fixtureFacts("llama-3.1-405b-instruct"), shape(8), vllm([], 8), 45 * GIB);
  assertEquals(r, {
    phase: "load",
    step: "weights",
    message: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 49.50 GiB. GPU 0 has " +
      "a total capacity of 45.00 GiB of which 0.00 GiB is free.",
  });
});

Deno.test("weights that fit the GPU but not its fraction leave no memory for the cache", () => {
  // Llama-3.1-8B: 14.96 GiB of weights; a 16 GiB GPU × 0.9 = 14.4 GiB.
  assertEquals(
    vllmRefusal(fixtureFacts("llama-3.1-8b-instruct"), shape(1), vllm(), 16 * GIB)?.message,
    "ValueError: No available memory for the cache blocks. Try increasing " +
      "`gpu_memory_utilization` when initializing the engine.",
  );
});

Deno.test("not one full-length sequence: vLLM's KV cache refusal with the longest length that fits", () => {
  // Llama-3.1-8B on 24 GiB × 0.9 = 21.6 GiB: 6.64 GiB left after 14.96 GiB of weights;
  // 131,072 B per token → 54,400 tokens in whole blocks of 16.
  const r = vllmRefusal(fixtureFacts("llama-3.1-8b-instruct"), shape(1), vllm(), 24 * GIB);
  assertEquals(r, {
    phase: "load",
    step: "kv_cache",
    message: "ValueError: To serve at least one request with the models's max seq len (131072), " +
      "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory " +
      "(6.64 GiB). Based on the available memory, the estimated maximum model length is 54400. " +
      "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing " +
      "the engine.",
  });
  // With --max-model-len 8192 it starts.
  assertEquals(
    vllmRefusal(
      fixtureFacts("llama-3.1-8b-instruct"),
      shape(1),
      vllm(["--max-model-len", "8192"]),
      24 * GIB,
    ),
    null,
  );
});

Deno.test("SGLang: a TP that does not divide the heads asserts while the model is built; weights beyond the GPU or its fraction stop it; a short pool does not", () => {
  const sglang = (tp: number, args: string[] = []) => engineMemorySettings("sglang", args, tp)!;
  const qwen = fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]);
  assertEquals(sglangRefusal(qwen, shape(8), sglang(8), 80 * GIB), {
    phase: "load",
    step: "config",
    message: "AssertionError",
  });
  assertEquals(
    sglangRefusal(fixtureFacts("llama-3.1-405b-instruct"), shape(8), sglang(8), 45 * GIB)?.step,
    "weights",
  );
  // Llama-3.1-8B: 14.96 GiB of weights; 16 GiB × 0.88 = 14.08 GiB: not one token of pool.
  assertEquals(
    sglangRefusal(fixtureFacts("llama-3.1-8b-instruct"), shape(1), sglang(1), 16 * GIB),
    {
      phase: "load",
      step: "kv_cache",
      message: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    },
  );
  // On 24 GiB the pool (6.2 GiB) is shorter than one 131,072-token sequence (16 GiB): SGLang
  // serves shorter requests, where vLLM refuses.
  const llama = fixtureFacts("llama-3.1-8b-instruct");
  assertEquals(sglangRefusal(llama, shape(1), sglang(1), 24 * GIB), null);
  assertEquals(vllmRefusal(llama, shape(1), vllm(), 24 * GIB)?.step, "kv_cache");
});

Deno.test("KV heads that TP neither divides nor is divided by: both engines assert as the model is built", () => {
  // Qwen2.5-7B: 28 heads (TP 7 divides them), 4 KV heads (7 neither divides nor is divided by 4).
  const qwen = fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]);
  const refusal = { phase: "load", step: "config", message: "AssertionError" };
  assertEquals(vllmRefusal(qwen, shape(7), vllm([], 7), 80 * GIB), refusal);
  const sglang = engineMemorySettings("sglang", [], 7)!;
  assertEquals(sglangRefusal(qwen, shape(7), sglang, 80 * GIB), refusal);
  // TP 2 divides the 4 KV heads: it starts.
  assertEquals(vllmRefusal(qwen, shape(2), vllm([], 2), 80 * GIB), null);
});
