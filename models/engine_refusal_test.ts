import { assertEquals } from "../tests/assert.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import { engineMemorySettings } from "../engines/memory_settings.ts";
import { vllmRefusal } from "./engine_refusal.ts";

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
