/**
 * What a model revision's own files say about it, before anything runs:
 * weight bytes, dtype, layers, attention and KV heads, head size, context
 * length and quantization, read from its `config.json` and its safetensors
 * index (or the sizes of its `*.safetensors` files). Placement and `apply`
 * compare these with a GPU's memory (models/memory_estimate.ts).
 *
 * The fields are read the way vLLM reads them (`vllm/config/model.py`,
 * `ModelConfig`): the text config of a multimodal model (`text_config`, as
 * `get_hf_text_config` does), KV heads from `num_key_value_heads` (or
 * `n_head_kv`, `num_kv_heads`, `multi_query_group_num`), else the attention
 * heads (`get_total_num_kv_heads`), the head size from `head_dim`, else
 * hidden ÷ heads (`get_head_size`), and DeepSeek's latent attention (MLA,
 * `is_deepseek_mla`: `kv_lora_rank` set) as one latent of `kv_lora_rank +
 * qk_rope_head_dim` per token. The context length follows
 * `_get_and_verify_max_len` (see {@link contextLength}).
 *
 * Pure and without npm imports (its one import, text/error_message.ts, has none), validated by hand, so the fake engine
 * (which runs with `--no-config`) can import it by relative path.
 *
 * @module
 */
import { errorMessage } from "../text/error_message.ts";

/** The quantization a checkpoint declares in `quantization_config`. */
export interface CheckpointQuantization {
  /** `quant_method`, e.g. `fp8`, `fbgemm_fp8`, `awq`, `gptq`, `compressed-tensors`. */
  method: string;
  /** Bits per weight when the config says (`bits`, `w_bit`, `num_bits`), else null. */
  bits: number | null;
}

/** A model revision's facts, as far as they decide what fits on a GPU. */
export interface ModelFacts {
  /** Where the facts were read from, for messages (`meta-llama/Llama-3.1-8B-Instruct`, a path). */
  source: string;
  /** Bytes of the weights as stored (already quantized when the checkpoint is). */
  weight_bytes: number;
  /** `torch_dtype` (or `dtype`) of the text config; null when it names none. */
  dtype: string | null;
  /** Transformer layers (`num_hidden_layers`). */
  layers: number;
  /** `hidden_size`. */
  hidden_size: number;
  /** `num_attention_heads`: tensor_parallel must divide it (vLLM refuses otherwise). */
  attention_heads: number;
  /** KV heads; equal to the attention heads for a model without grouped-query attention. */
  kv_heads: number;
  /** Size of one attention head (`head_dim`, else hidden ÷ heads). */
  head_dim: number;
  /** The longest sequence the engine serves by default, derived as vLLM derives `max_model_len`. */
  context_length: number;
  /** What `quantization_config` declares; null for an unquantized checkpoint. */
  quantization: CheckpointQuantization | null;
  /**
   * Latent attention (DeepSeek MLA): the width of the one latent cached per
   * token and layer (`kv_lora_rank + qk_rope_head_dim`), the same on every
   * tensor-parallel rank; null for ordinary attention.
   */
  mla_latent_dim: number | null;
  /**
   * Bytes of every file of the revision, when its source listed them: what a
   * download writes to a model cache (placement's `insufficient_disk`),
   * beside `weight_bytes`, what loads into GPUs. Absent: `weight_bytes`
   * stands in.
   */
  download_bytes?: number;
}

/**
 * The name a model revision's facts are known by: the model and the commit
 * its revision resolved to when that is known
 * (`meta-llama/Llama-3.1-8B-Instruct@0e9e39f…`), so a branch that moves is
 * read again at its new commit; else the model and the revision
 * (`…@main`); the model alone for a local path, which takes neither.
 */
export function factsKey(model: string, revision?: string, commit?: string | null): string {
  const at = commit ?? revision;
  return at === undefined ? model : `${model}@${at}`;
}

/** A file the facts are read from that is missing a field or holds a bad one. */
export class ModelFactsError extends Error {
  /** Creates the error; `file` names the file, `problem` what is wrong there. */
  constructor(file: string, problem: string) {
    super(`Cannot read model facts from ${file}: ${problem}`);
    this.name = "ModelFactsError";
  }
}

/** What {@link parseModelFacts} reads. */
export interface ModelFiles {
  /** Where the files are, for messages and `ModelFacts.source`. */
  source: string;
  /** The text of `config.json`. */
  config: string;
  /** The text of `model.safetensors.index.json`, when the revision has one. */
  index?: string;
  /** Sizes in bytes of the revision's `*.safetensors` files, when it has no index. */
  safetensorsSizes?: readonly number[];
  /** Sizes in bytes of every file of the revision, when listed (`download_bytes`). */
  fileSizes?: readonly number[];
}

type Json = Record<string, unknown>;

/** Keys vLLM reads a maximum length from, smallest wins (`_get_and_verify_max_len`). */
const MAX_LEN_KEYS = [
  "max_position_embeddings",
  "n_positions",
  "max_seq_len",
  "seq_length",
  "model_max_length",
  "max_target_positions",
  "max_sequence_length",
  "max_seq_length",
  "seq_len",
] as const;

/** vLLM's length when a config names none (`default_max_len`, with a warning). */
export const DEFAULT_CONTEXT_LENGTH = 2048;

/** The model types vLLM reads as latent attention when `kv_lora_rank` is set (`is_deepseek_mla`). */
const MLA_MODEL_TYPES: ReadonlySet<string> = new Set([
  "deepseek_v2",
  "deepseek_v3",
  "deepseek_v32",
  "deepseek_mtp",
  "kimi_k2",
  "kimi_linear",
  "longcat_flash",
  "pangu_ultra_moe",
  "pangu_ultra_moe_mtp",
]);

/**
 * Reads a model revision's facts from its files.
 *
 * @throws {ModelFactsError} Naming the file and the field that is missing or bad.
 */
export function parseModelFacts(files: ModelFiles): ModelFacts {
  const configFile = `${files.source}/config.json`;
  const root = parseObject(files.config, configFile);
  const text = textConfig(root, configFile);
  const at = text === root ? "" : "text_config.";
  const heads = positiveInt(text, "num_attention_heads", configFile, at);
  const hidden = positiveInt(text, "hidden_size", configFile, at);
  const layers = positiveInt(text, "num_hidden_layers", configFile, at);
  const kvHeads = firstPositiveInt(
    text,
    ["n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"],
    configFile,
    at,
  ) ?? heads;
  if (kvHeads > heads) {
    throw new ModelFactsError(
      configFile,
      `${at}num_key_value_heads (${kvHeads}) is more than ${at}num_attention_heads (${heads})`,
    );
  }
  const headDim = optionalPositiveInt(text, "head_dim", configFile, at) ??
    Math.floor(hidden / heads);
  if (headDim < 1) {
    throw new ModelFactsError(configFile, `${at}hidden_size ${hidden} is smaller than its heads`);
  }
  return {
    source: files.source,
    weight_bytes: weightBytes(files),
    dtype: dtypeOf(root, text, configFile, at),
    layers,
    hidden_size: hidden,
    attention_heads: heads,
    kv_heads: kvHeads,
    head_dim: headDim,
    context_length: contextLength(text, configFile, at),
    quantization: quantizationOf(root, text, configFile),
    mla_latent_dim: mlaLatentDim(text, configFile, at),
    ...(files.fileSizes === undefined
      ? {}
      : { download_bytes: files.fileSizes.reduce((a, b) => a + b, 0) }),
  };
}

function parseObject(text: string, file: string): Json {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ModelFactsError(file, `not JSON (${errorMessage(e)})`);
  }
  if (!isObject(value)) throw new ModelFactsError(file, "not a JSON object");
  return value;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The config the language model's fields are in: the root, or for a
 * multimodal model whose root has no `num_hidden_layers`, its `text_config`
 * (Llama 3.2 Vision, Gemma 3, LLaVA, …), as vLLM's `get_hf_text_config` does.
 */
function textConfig(root: Json, file: string): Json {
  if (root.num_hidden_layers !== undefined) return root;
  for (const key of ["text_config", "llm_config", "language_config"]) {
    const nested = root[key];
    if (nested === undefined) continue;
    if (!isObject(nested)) throw new ModelFactsError(file, `${key} must be an object`);
    return nested;
  }
  return root;
}

function describe(value: unknown): string {
  return value === undefined ? "missing" : `got ${JSON.stringify(value)}`;
}

function positiveInt(config: Json, key: string, file: string, at: string): number {
  const value = config[key];
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new ModelFactsError(
      file,
      `${at}${key} must be a positive integer, ${describe(value)}`,
    );
  }
  return value;
}

function optionalPositiveInt(config: Json, key: string, file: string, at: string): number | null {
  return config[key] === undefined || config[key] === null
    ? null
    : positiveInt(config, key, file, at);
}

function firstPositiveInt(
  config: Json,
  keys: readonly string[],
  file: string,
  at: string,
): number | null {
  for (const key of keys) {
    const value = optionalPositiveInt(config, key, file, at);
    if (value !== null) return value;
  }
  return null;
}

function dtypeOf(root: Json, text: Json, file: string, at: string): string | null {
  for (const [config, prefix] of [[text, at], [root, ""]] as const) {
    for (const key of ["torch_dtype", "dtype"]) {
      const value = config[key];
      if (value === undefined || value === null) continue;
      if (typeof value !== "string" || value === "") {
        throw new ModelFactsError(file, `${prefix}${key} must be a dtype name, ${describe(value)}`);
      }
      return value;
    }
  }
  return null;
}

/**
 * The longest sequence vLLM serves when `--max-model-len` is not given, as
 * `_get_and_verify_max_len` in `vllm/config/model.py` derives it: the
 * smallest of the length keys present (`max_position_embeddings`,
 * `n_positions`, `max_seq_len`, …), or `model_max_length` when set, else
 * 2048; then scaled by RoPE scaling (`rope_parameters`, or `rope_scaling`
 * with `type` read as `rope_type`), except for `su`, `longrope` and `llama3`
 * (already in `max_position_embeddings`) and for Gemma 3; `yarn` starts from
 * `original_max_position_embeddings`. `longrope` defaults to
 * `original_max_position_embeddings`.
 */
function contextLength(config: Json, file: string, at: string): number {
  let derived = Infinity;
  for (const key of MAX_LEN_KEYS) {
    const value = config[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== "number" || !(value > 0)) {
      throw new ModelFactsError(file, `${at}${key} must be a positive number, ${describe(value)}`);
    }
    derived = Math.min(derived, value);
  }
  const modelMax = config.model_max_length;
  if (typeof modelMax === "number" && modelMax > 0) derived = modelMax;
  if (derived === Infinity) derived = DEFAULT_CONTEXT_LENGTH;
  const ropes = ropeParameters(config, file, at);
  const modelType = typeof config.model_type === "string" ? config.model_type : "";
  if (ropes.length > 0 && !modelType.includes("gemma3")) {
    let factor = 1;
    for (const rope of ropes) {
      if (["su", "longrope", "llama3"].includes(rope.type)) continue;
      if (rope.factor !== null) factor = rope.factor;
      if (rope.type === "yarn") {
        if (rope.original === null) {
          throw new ModelFactsError(
            file,
            `${at}rope_scaling of type yarn needs original_max_position_embeddings`,
          );
        }
        derived = rope.original;
      }
    }
    derived *= factor;
    if (ropes.some((r) => r.type === "longrope")) {
      const original = config.original_max_position_embeddings;
      if (typeof original === "number" && original > 0) derived = original;
    }
  }
  return Math.floor(derived);
}

interface Rope {
  type: string;
  factor: number | null;
  original: number | null;
}

function ropeParameters(config: Json, file: string, at: string): Rope[] {
  const key = config.rope_parameters !== undefined && config.rope_parameters !== null
    ? "rope_parameters"
    : "rope_scaling";
  const value = config[key];
  if (value === undefined || value === null) return [];
  if (!isObject(value)) throw new ModelFactsError(file, `${at}${key} must be an object`);
  // Transformers v5 may key rope parameters by layer type.
  const single = "rope_type" in value || "type" in value || "factor" in value;
  const entries = single ? [value] : Object.values(value);
  return entries.map((rope) => {
    if (!isObject(rope)) throw new ModelFactsError(file, `${at}${key} must hold objects`);
    const type = rope.rope_type ?? rope.type ?? "default";
    if (typeof type !== "string") {
      throw new ModelFactsError(file, `${at}${key}.rope_type must be a name, ${describe(type)}`);
    }
    const factor = rope.factor;
    if (factor !== undefined && factor !== null && (typeof factor !== "number" || !(factor > 0))) {
      throw new ModelFactsError(file, `${at}${key}.factor must be a positive number`);
    }
    const original = rope.original_max_position_embeddings;
    return {
      type,
      factor: typeof factor === "number" ? factor : null,
      original: typeof original === "number" && original > 0 ? original : null,
    };
  });
}

function quantizationOf(root: Json, text: Json, file: string): CheckpointQuantization | null {
  const q = root.quantization_config ?? text.quantization_config;
  if (q === undefined || q === null) return null;
  if (!isObject(q)) throw new ModelFactsError(file, "quantization_config must be an object");
  const method = q.quant_method;
  if (typeof method !== "string" || method === "") {
    throw new ModelFactsError(
      file,
      `quantization_config.quant_method must be a name, ${describe(method)}`,
    );
  }
  return { method, bits: bitsOf(q, method) };
}

/** Bits per weight: `bits` (GPTQ, AWQ), `w_bit` (older AWQ), 8 for an fp8 method, else null. */
function bitsOf(q: Json, method: string): number | null {
  for (const key of ["bits", "w_bit", "num_bits"]) {
    const value = q[key];
    if (typeof value === "number" && Number.isInteger(value) && value > 0) return value;
  }
  return method.toLowerCase().includes("fp8") ? 8 : null;
}

function mlaLatentDim(config: Json, file: string, at: string): number | null {
  const type = config.model_type;
  if (typeof type !== "string" || !MLA_MODEL_TYPES.has(type)) return null;
  const rank = optionalPositiveInt(config, "kv_lora_rank", file, at);
  if (rank === null) return null;
  return rank + (optionalPositiveInt(config, "qk_rope_head_dim", file, at) ?? 0);
}

function weightBytes(files: ModelFiles): number {
  if (files.index !== undefined) {
    const indexFile = `${files.source}/model.safetensors.index.json`;
    const index = parseObject(files.index, indexFile);
    const metadata = index.metadata;
    const total = isObject(metadata) ? metadata.total_size : undefined;
    if (typeof total !== "number" || !Number.isSafeInteger(total) || total < 1) {
      throw new ModelFactsError(
        indexFile,
        `metadata.total_size must be a positive integer, ${describe(total)}`,
      );
    }
    return total;
  }
  const sizes = files.safetensorsSizes ?? [];
  if (sizes.length === 0) {
    throw new ModelFactsError(
      files.source,
      "no model.safetensors.index.json and no *.safetensors file, so the size of the weights is unknown",
    );
  }
  for (const size of sizes) {
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new ModelFactsError(files.source, `a *.safetensors file size is ${size}`);
    }
  }
  return sizes.reduce((a, b) => a + b, 0);
}
