/**
 * `config.json` of a few real models, as their hub repos publish them, for
 * synthetic models that look like the real thing to whatever reads their
 * facts (the control plane's memory estimate, the fake engine). Each is the
 * file at `https://huggingface.co/{repo}/blob/main/config.json`; the same
 * files are recorded in tests/fixtures/model_configs/, and
 * model_presets_test.ts checks that both agree.
 *
 * @module
 */

const LLAMA_3_1_COMMON = {
  architectures: ["LlamaForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 128000,
  eos_token_id: [128001, 128008, 128009],
  hidden_act: "silu",
  initializer_range: 0.02,
  max_position_embeddings: 131072,
  mlp_bias: false,
  model_type: "llama",
  num_key_value_heads: 8,
  pretraining_tp: 1,
  rms_norm_eps: 1e-05,
  rope_scaling: {
    factor: 8.0,
    low_freq_factor: 1.0,
    high_freq_factor: 4.0,
    original_max_position_embeddings: 8192,
    rope_type: "llama3",
  },
  rope_theta: 500000.0,
  tie_word_embeddings: false,
  torch_dtype: "bfloat16",
  transformers_version: "4.42.3",
  use_cache: true,
  vocab_size: 128256,
};

/** A real model's repo id and `config.json`. */
export interface ModelPreset {
  /** The repo it was published in. */
  repo: string;
  /** Its `config.json`. */
  config: Record<string, unknown>;
  /** The weight bytes of the real model (its index's `metadata.total_size`, where recorded). */
  weightBytes: number;
}

/** Presets by short name. */
export const MODEL_PRESETS: Readonly<Record<string, ModelPreset>> = {
  "llama-3.1-8b-instruct": {
    repo: "meta-llama/Llama-3.1-8B-Instruct",
    config: {
      ...LLAMA_3_1_COMMON,
      hidden_size: 4096,
      intermediate_size: 14336,
      num_attention_heads: 32,
      num_hidden_layers: 32,
    },
    weightBytes: 16060522496,
  },
  "llama-3.1-70b-instruct": {
    repo: "meta-llama/Llama-3.1-70B-Instruct",
    config: {
      ...LLAMA_3_1_COMMON,
      hidden_size: 8192,
      intermediate_size: 28672,
      num_attention_heads: 64,
      num_hidden_layers: 80,
    },
    weightBytes: 141107412992,
  },
  "llama-3.1-405b-instruct-fp8": {
    repo: "meta-llama/Llama-3.1-405B-Instruct-FP8",
    config: {
      ...LLAMA_3_1_COMMON,
      hidden_size: 16384,
      intermediate_size: 53248,
      num_attention_heads: 128,
      num_hidden_layers: 126,
      quantization_config: {
        activation_scale_ub: 1200.0,
        modules_to_not_convert: ["lm_head"],
        quant_method: "fbgemm_fp8",
      },
    },
    // No index recorded (tests/fixtures/model_configs/README.md): computed from the config, the
    // 126 layers' linear weights in FP8 (126 × 3,187,671,040 bytes), the embeddings and lm_head
    // in BF16 (2 × 128256 × 16384 × 2 bytes), their per-row scales and the norms: ≈ 410.1 GB.
    weightBytes: 410_140_000_000,
  },
  "qwen2.5-7b-instruct": {
    repo: "Qwen/Qwen2.5-7B-Instruct",
    config: {
      architectures: ["Qwen2ForCausalLM"],
      attention_dropout: 0.0,
      bos_token_id: 151643,
      eos_token_id: 151645,
      hidden_act: "silu",
      hidden_size: 3584,
      initializer_range: 0.02,
      intermediate_size: 18944,
      max_position_embeddings: 32768,
      max_window_layers: 28,
      model_type: "qwen2",
      num_attention_heads: 28,
      num_hidden_layers: 28,
      num_key_value_heads: 4,
      rms_norm_eps: 1e-06,
      rope_theta: 1000000.0,
      sliding_window: 131072,
      tie_word_embeddings: false,
      torch_dtype: "bfloat16",
      transformers_version: "4.43.1",
      use_cache: true,
      use_sliding_window: false,
      vocab_size: 152064,
    },
    weightBytes: 15231233024,
  },
};
