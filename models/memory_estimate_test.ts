import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import { engineMemorySettings } from "../engines/memory_settings.ts";
import {
  classMemoryBytes,
  estimateMemory,
  fitsGpu,
  insufficientMemoryText,
  tensorParallelProblem,
} from "./memory_estimate.ts";
import type { ModelFacts } from "./model_facts.ts";

const GIB = 2 ** 30;
const vllm = (args: string[] = [], tp = 1) => engineMemorySettings("vllm", args, tp)!;
const shape = (tp: number, pp = 1, quantization = "none") => ({
  tensor_parallel: tp,
  pipeline_parallel: pp,
  quantization,
});

Deno.test("Llama-3.1-8B at TP 1: 14.96 GiB of weights + 16 GiB of KV cache for 131072 tokens", () => {
  const e = estimateMemory(fixtureFacts("llama-3.1-8b-instruct"), shape(1), vllm());
  // 16,060,522,496 B of weights; KV: 2 (K and V) × 8 heads × 128 × 2 B = 4,096 B
  // per token and layer, × 32 layers × 131,072 tokens = 16 GiB exactly.
  assertEquals(e.weights_bytes, 16_060_522_496);
  assertEquals(e.kv_cache_bytes, 16 * GIB);
  assertEquals(e.context_length, 131_072);
  // 30.96 GiB: fits an L40S (45 GiB × 0.9 = 40.5), not an RTX 4090 (24 × 0.9 = 21.6)
  assertOk(fitsGpu(e, 45 * GIB, 0.9));
  assertOk(!fitsGpu(e, 24 * GIB, 0.9));
  // --max-model-len 8192 brings the cache to 1 GiB and fits the 4090.
  const short = estimateMemory(
    fixtureFacts("llama-3.1-8b-instruct"),
    shape(1),
    vllm(["--max-model-len", "8192"]),
  );
  assertEquals(short.kv_cache_bytes, GIB);
  assertOk(fitsGpu(short, 24 * GIB, 0.9));
});

Deno.test("Llama-3.1-70B: TP 2 does not fit an H100, TP 4 does", () => {
  const facts = fixtureFacts("llama-3.1-70b-instruct");
  // TP 4: 141,107,412,992 ÷ 4 = 35,276,853,248 B (32.85 GiB); 2 KV heads per GPU:
  // 2 × 2 × 128 × 2 B × 80 layers × 131,072 = 10 GiB; 42.85 GiB ≤ 72.
  const tp4 = estimateMemory(facts, shape(4), vllm([], 4));
  assertEquals(tp4.weights_bytes, 35_276_853_248);
  assertEquals(tp4.kv_cache_bytes, 10 * GIB);
  assertOk(fitsGpu(tp4, 80 * GIB, 0.9));
  // TP 2: 65.71 GiB + 20 GiB = 85.71 GiB > 72.
  const tp2 = estimateMemory(facts, shape(2), vllm([], 2));
  assertEquals(tp2.kv_cache_bytes, 20 * GIB);
  assertOk(!fitsGpu(tp2, 80 * GIB, 0.9));
});

Deno.test("TP beyond the KV heads replicates them: one KV head per GPU, as vLLM does", () => {
  const facts = fixtureFacts("llama-3.1-405b-instruct");
  // TP 16 over 8 KV heads: still 1 head per GPU: 2 × 1 × 128 × 2 B × 126 × 131,072.
  const e = estimateMemory(facts, shape(16), vllm([], 16));
  assertEquals(e.kv_cache_bytes, 2 * 128 * 2 * 126 * 131_072);
  // PP 2 halves the layers a GPU holds (⌈126 ÷ 2⌉ = 63) and the weights.
  const pp = estimateMemory(facts, shape(8, 2), vllm([], 8));
  assertEquals(pp.kv_cache_bytes, 2 * 1 * 128 * 2 * 63 * 131_072);
  assertEquals(pp.weights_bytes, 811_706_777_600 / 16);
});

Deno.test("quantization: fp8 on the fly halves 16-bit weights; a quantized checkpoint loads as stored", () => {
  const bf16 = fixtureFacts("llama-3.1-70b-instruct");
  const online = estimateMemory(bf16, shape(4, 1, "fp8"), vllm([], 4));
  assertEquals(online.weights_bytes, 141_107_412_992 / 8);
  assertEquals(online.weights_note, "fp8 on the fly: ×0.5");
  const fp8 = fixtureFacts("llama-3.1-405b-instruct-fp8", [410e9]);
  assertEquals(estimateMemory(fp8, shape(8, 1, "fp8"), vllm([], 8)).weights_bytes, 410e9 / 8);
  // An fp32 checkpoint loads as 16-bit (vLLM dtype auto).
  const fp32: ModelFacts = { ...bf16, dtype: "float32" };
  assertEquals(estimateMemory(fp32, shape(1), vllm()).weights_bytes, 141_107_412_992 / 2);
  // fp8 KV cache: one byte per element.
  assertEquals(
    estimateMemory(bf16, shape(4), vllm(["--kv-cache-dtype", "fp8"], 4)).kv_cache_bytes,
    5 * GIB,
  );
});

Deno.test("latent attention (DeepSeek MLA) caches one 576-wide latent per token, on every rank", () => {
  const facts = fixtureFacts("deepseek-v2-lite-chat", [31e9]);
  // 576 × 2 B × 27 layers × 163,840 tokens = 5,096,079,360 B (4.75 GiB), at any TP.
  assertEquals(estimateMemory(facts, shape(1), vllm()).kv_cache_bytes, 5_096_079_360);
  assertEquals(estimateMemory(facts, shape(2), vllm([], 2)).kv_cache_bytes, 5_096_079_360);
});

Deno.test("--max-model-len auto counts no KV cache: the engine picks what fits", () => {
  const e = estimateMemory(
    fixtureFacts("llama-3.1-8b-instruct"),
    shape(1),
    vllm(["--max-model-len=auto"]),
  );
  assertEquals([e.kv_cache_bytes, e.context_length], [0, 0]);
});

Deno.test("the refusal says the numbers", () => {
  const facts = fixtureFacts("llama-3.1-405b-instruct-fp8", [410e9]);
  const settings = vllm([], 8);
  const e = estimateMemory(facts, shape(8, 2), settings);
  assertEquals(
    insufficientMemoryText(e, "a100-40g", 40 * GIB, settings),
    "needs 27.8 GiB per GPU (weights 23.9 + KV cache for one 131072-token sequence 3.9) " +
      "but an a100-40g GPU offers 36.0 GiB (40.0 GiB × 0.90)",
  );
  const tuned = vllm(["--gpu-memory-utilization", "0.5"], 8);
  assertEquals(
    insufficientMemoryText(e, "l40s-45g", 45 * GIB, tuned).split(" but ")[1],
    "an l40s-45g GPU offers 22.5 GiB (45.0 GiB × 0.50 from --gpu-memory-utilization 0.5)",
  );
});

Deno.test("tensor_parallel must divide the attention heads, in vLLM's words", () => {
  const qwen = fixtureFacts("qwen2.5-7b-instruct", [15e9]);
  assertEquals(tensorParallelProblem(qwen, 4), null);
  assertEquals(
    tensorParallelProblem(qwen, 8),
    "Total number of attention heads (28) must be divisible by tensor parallel size (8): " +
      "the engine refuses to start (tensor_parallel 1, 2, 4, 7, 14, 28 would divide them)",
  );
});

Deno.test("classMemoryBytes reads the class name's GiB", () => {
  assertEquals(classMemoryBytes("l40s-45g"), 45 * GIB);
  assertEquals(classMemoryBytes("weird"), null);
});

const factsArb: fc.Arbitrary<ModelFacts> = fc.record({
  heads: fc.integer({ min: 1, max: 128 }),
  kvDivisor: fc.integer({ min: 1, max: 16 }),
  layers: fc.integer({ min: 1, max: 160 }),
  headDim: fc.constantFrom(64, 80, 128, 256),
  context: fc.integer({ min: 1, max: 1_048_576 }),
  weights: fc.integer({ min: 1, max: 2 ** 40 }),
  mla: fc.option(fc.integer({ min: 64, max: 1024 }), { nil: null }),
}).map((r) => ({
  source: "prop",
  weight_bytes: r.weights,
  dtype: "bfloat16",
  layers: r.layers,
  hidden_size: r.heads * r.headDim,
  attention_heads: r.heads,
  kv_heads: Math.max(1, Math.floor(r.heads / r.kvDivisor)),
  head_dim: r.headDim,
  context_length: r.context,
  quantization: null,
  mla_latent_dim: r.mla,
}));

Deno.test("property: more tensor parallelism never needs more memory per GPU", () => {
  fc.assert(
    fc.property(
      factsArb,
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 8 }),
      (facts, a, b, pp) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        const small = estimateMemory(facts, shape(lo, pp), vllm([], lo));
        const big = estimateMemory(facts, shape(hi, pp), vllm([], hi));
        return big.total_bytes <= small.total_bytes &&
          big.kv_cache_bytes <= small.kv_cache_bytes;
      },
    ),
    { numRuns: 500 },
  );
});
