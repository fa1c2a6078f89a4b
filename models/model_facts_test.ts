import { assertEquals, assertThrows } from "../tests/assert.ts";
import { fixtureFacts, modelConfigTexts } from "../tests/model_configs.ts";
import { type ModelFacts, ModelFactsError, parseModelFacts } from "./model_facts.ts";

type Expected = Omit<ModelFacts, "source">;

// Each fixture's facts, read by hand from its config.json (and index).
const TABLE: [string, number[] | undefined, Expected][] = [
  ["llama-3.1-8b-instruct", undefined, {
    weight_bytes: 16_060_522_496, // index metadata.total_size
    dtype: "bfloat16",
    layers: 32,
    hidden_size: 4096,
    attention_heads: 32,
    kv_heads: 8,
    head_dim: 128, // 4096 ÷ 32
    context_length: 131_072, // llama3 RoPE: already in max_position_embeddings
    quantization: null,
    mla_latent_dim: null,
  }],
  ["llama-3.1-70b-instruct", undefined, {
    weight_bytes: 141_107_412_992,
    dtype: "bfloat16",
    layers: 80,
    hidden_size: 8192,
    attention_heads: 64,
    kv_heads: 8,
    head_dim: 128,
    context_length: 131_072,
    quantization: null,
    mla_latent_dim: null,
  }],
  ["llama-3.1-405b-instruct", undefined, {
    weight_bytes: 811_706_777_600,
    dtype: "bfloat16",
    layers: 126,
    hidden_size: 16384,
    attention_heads: 128,
    kv_heads: 8,
    head_dim: 128,
    context_length: 131_072,
    quantization: null,
    mla_latent_dim: null,
  }],
  // No index: the sum of the shard sizes given.
  ["llama-3.1-405b-instruct-fp8", [200e9, 210e9], {
    weight_bytes: 410e9,
    dtype: "bfloat16",
    layers: 126,
    hidden_size: 16384,
    attention_heads: 128,
    kv_heads: 8,
    head_dim: 128,
    context_length: 131_072,
    quantization: { method: "fbgemm_fp8", bits: 8 },
    mla_latent_dim: null,
  }],
  ["qwen2.5-7b-instruct", [4e9, 4e9, 4e9, 3e9], {
    weight_bytes: 15e9,
    dtype: "bfloat16",
    layers: 28,
    hidden_size: 3584,
    attention_heads: 28, // TP 8 does not divide it
    kv_heads: 4,
    head_dim: 128, // 3584 ÷ 28
    context_length: 32_768, // sliding_window is not a length key for vLLM
    quantization: null,
    mla_latent_dim: null,
  }],
  ["mixtral-8x7b-instruct", [93e9], {
    weight_bytes: 93e9,
    dtype: "bfloat16",
    layers: 32,
    hidden_size: 4096,
    attention_heads: 32,
    kv_heads: 8,
    head_dim: 128,
    context_length: 32_768,
    quantization: null,
    mla_latent_dim: null,
  }],
  ["deepseek-v2-lite-chat", [31e9], {
    weight_bytes: 31e9,
    dtype: "bfloat16",
    layers: 27,
    hidden_size: 2048,
    attention_heads: 16,
    kv_heads: 16,
    head_dim: 128,
    context_length: 163_840, // yarn: original 4096 × factor 40
    quantization: null,
    mla_latent_dim: 576, // kv_lora_rank 512 + qk_rope_head_dim 64
  }],
];

for (const [name, sizes, expected] of TABLE) {
  Deno.test(`parseModelFacts reads ${name}`, () => {
    assertEquals(fixtureFacts(name, sizes), { source: name, ...expected });
  });
}

const LLAMA = JSON.parse(modelConfigTexts("llama-3.1-8b-instruct").config);

function facts(config: Record<string, unknown>, sizes = [1000]): ModelFacts {
  return parseModelFacts({ source: "m", config: JSON.stringify(config), safetensorsSizes: sizes });
}

Deno.test("context length follows vLLM's rules for RoPE scaling and length keys", () => {
  const base = { ...LLAMA, rope_scaling: null };
  assertEquals(facts(base).context_length, 131_072);
  // linear/dynamic scale the derived length by the factor ("type" read as rope_type)
  assertEquals(
    facts({ ...base, max_position_embeddings: 4096, rope_scaling: { type: "dynamic", factor: 2 } })
      .context_length,
    8192,
  );
  // the smallest length key wins; model_max_length overrides
  assertEquals(facts({ ...base, n_positions: 2048 }).context_length, 2048);
  assertEquals(facts({ ...base, model_max_length: 65536 }).context_length, 65536);
  // no length key at all: vLLM's 2048
  const { max_position_embeddings: _, ...none } = base;
  assertEquals(facts(none).context_length, 2048);
  // Transformers v5 rope_parameters keyed by layer type
  assertEquals(
    facts({
      ...base,
      max_position_embeddings: 4096,
      rope_parameters: { full_attention: { rope_type: "linear", factor: 4 } },
    }).context_length,
    16384,
  );
  // Gemma 3's length is already scaled
  assertEquals(
    facts({ ...base, model_type: "gemma3_text", rope_scaling: { rope_type: "linear", factor: 8 } })
      .context_length,
    131_072,
  );
});

Deno.test("a multimodal config is read from its text_config", () => {
  const f = facts({
    architectures: ["MllamaForConditionalGeneration"],
    model_type: "mllama",
    torch_dtype: "bfloat16",
    text_config: { ...LLAMA, torch_dtype: undefined },
    vision_config: { hidden_size: 1280 },
  });
  assertEquals([f.layers, f.attention_heads, f.kv_heads, f.dtype], [32, 32, 8, "bfloat16"]);
});

Deno.test("KV heads default to the attention heads; head_dim wins over hidden ÷ heads", () => {
  const { num_key_value_heads: _, ...mha } = LLAMA;
  assertEquals(facts(mha).kv_heads, 32);
  assertEquals(facts({ ...LLAMA, head_dim: 64 }).head_dim, 64);
});

Deno.test("bad or missing fields name the field and the file", () => {
  const { num_attention_heads: _, ...noHeads } = LLAMA;
  assertThrows(
    () => facts(noHeads),
    ModelFactsError,
    "Cannot read model facts from m/config.json: num_attention_heads must be a positive integer, missing",
  );
  assertThrows(
    () => facts({ ...LLAMA, num_hidden_layers: "32" }),
    ModelFactsError,
    'num_hidden_layers must be a positive integer, got "32"',
  );
  assertThrows(
    () => facts({ ...LLAMA, num_key_value_heads: 64 }),
    ModelFactsError,
    "num_key_value_heads (64) is more than num_attention_heads (32)",
  );
  assertThrows(
    () => facts({ ...LLAMA, rope_scaling: { rope_type: "yarn", factor: 4 } }),
    ModelFactsError,
    "yarn needs original_max_position_embeddings",
  );
  assertThrows(
    () => facts({ ...LLAMA, quantization_config: { bits: 4 } }),
    ModelFactsError,
    "quantization_config.quant_method must be a name, missing",
  );
  assertThrows(
    () => parseModelFacts({ source: "m", config: "{not json" }),
    ModelFactsError,
    "m/config.json: not JSON",
  );
  assertThrows(
    () => parseModelFacts({ source: "m", config: "[]" }),
    ModelFactsError,
    "not a JSON object",
  );
  assertThrows(
    () => parseModelFacts({ source: "m", config: JSON.stringify(LLAMA) }),
    ModelFactsError,
    "no model.safetensors.index.json and no *.safetensors file",
  );
  assertThrows(
    () =>
      parseModelFacts({
        source: "m",
        config: JSON.stringify(LLAMA),
        index: '{"metadata": {}}',
      }),
    ModelFactsError,
    "m/model.safetensors.index.json: metadata.total_size must be a positive integer, missing",
  );
});

Deno.test("quantization bits come from bits, w_bit or an fp8 method", () => {
  const q = (c: Record<string, unknown>) =>
    facts({ ...LLAMA, quantization_config: c }).quantization;
  assertEquals(q({ quant_method: "awq", w_bit: 4 }), { method: "awq", bits: 4 });
  assertEquals(q({ quant_method: "gptq", bits: 8 }), { method: "gptq", bits: 8 });
  assertEquals(q({ quant_method: "fp8" }), { method: "fp8", bits: 8 });
  assertEquals(q({ quant_method: "compressed-tensors" }), {
    method: "compressed-tensors",
    bits: null,
  });
});
