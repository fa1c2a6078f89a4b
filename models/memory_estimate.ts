/**
 * Whether a model fits a profile's GPUs, before anything is placed: per GPU,
 * the weights (÷ tensor × pipeline parallel) plus the KV cache of one
 * sequence of the full context length, against the GPU's memory × the
 * engine's memory fraction. vLLM refuses to start in exactly that case
 * (`_check_enough_kv_cache_memory` in `vllm/v1/core/kv_cache_utils.py`: "To
 * serve at least one request with the models's max seq len (…), (… GiB KV
 * cache is needed, which is larger than the available KV cache memory (…
 * GiB)"), after it has loaded the weights.
 *
 * The estimate is a lower bound: it leaves out activations, CUDA graphs and
 * communication buffers, which vLLM measures at startup (its profile run)
 * and which no config file states. A profile it refuses cannot start; one
 * it passes may still fail by the margin those take (docs/models.md, "Model
 * facts and the memory estimate", compares it with published figures).
 *
 * Also the tensor-parallel rule: vLLM refuses a `tensor_parallel` that does
 * not divide the attention heads (`ModelConfig.verify_with_parallel_config`
 * in `vllm/config/model.py`), and SGLang's attention layers assert the same.
 *
 * Pure, without npm imports (see models/model_facts.ts).
 *
 * @module
 */
import type { EngineMemorySettings } from "../engines/memory_settings.ts";
import { needsFp8Hardware } from "../deployment/quantization.ts";
import type { ModelFacts } from "./model_facts.ts";

/** What of a profile the estimate reads. */
export interface MemoryShape {
  /** Tensor-parallel size. */
  tensor_parallel: number;
  /** Pipeline-parallel size. */
  pipeline_parallel: number;
  /** The profile's quantization (`none`, `fp8`, …). */
  quantization: string;
}

/** What one GPU of a replica needs, in bytes, and why. */
export interface MemoryEstimate {
  /** This GPU's share of the weights as loaded. */
  weights_bytes: number;
  /** The KV cache of one sequence of `context_length` tokens on this GPU. */
  kv_cache_bytes: number;
  /** The sequence length the cache is sized for; 0 when the engine picks it (`--max-model-len auto`). */
  context_length: number;
  /** `weights_bytes + kv_cache_bytes`. */
  total_bytes: number;
  /** How the weights were scaled from the checkpoint's bytes, e.g. "fp8 on the fly: ×0.5"; null when as stored. */
  weights_note: string | null;
}

const GIB = 2 ** 30;

/** Bytes per KV cache element when the engine keeps the model's 16-bit dtype (vLLM `auto`). */
const MODEL_KV_ELEMENT_BYTES = 2;

/**
 * The per-GPU need of `facts` run with `shape` and `settings`. The worst
 * pipeline stage is counted: ⌈layers ÷ PP⌉ layers of KV cache.
 */
export function estimateMemory(
  facts: ModelFacts,
  shape: MemoryShape,
  settings: EngineMemorySettings,
): MemoryEstimate {
  const tp = shape.tensor_parallel;
  const pp = shape.pipeline_parallel;
  const { scale, note } = weightScale(facts, shape.quantization);
  const weights = (facts.weight_bytes * scale) / (tp * pp);
  const context = settings.max_model_len_auto ? 0 : settings.max_model_len ?? facts.context_length;
  const element = settings.kv_cache_element_bytes ?? MODEL_KV_ELEMENT_BYTES;
  // vLLM keeps at least one KV head per GPU: it replicates them when TP > KV heads.
  const perTokenPerLayer = facts.mla_latent_dim !== null
    ? facts.mla_latent_dim * element // one latent per token, on every rank
    : 2 * Math.max(1, Math.floor(facts.kv_heads / tp)) * facts.head_dim * element;
  const kv = context * Math.ceil(facts.layers / pp) * perTokenPerLayer;
  return {
    weights_bytes: weights,
    kv_cache_bytes: kv,
    context_length: context,
    total_bytes: weights + kv,
    weights_note: note,
  };
}

/**
 * How the loaded weights compare with the checkpoint's bytes: vLLM loads an
 * fp32 checkpoint as 16-bit (`dtype: auto`), fp8 on the fly halves 16-bit
 * weights, bitsandbytes on the fly stores 4 bits. A checkpoint that is
 * already quantized loads as stored. (Embeddings and the LM head stay
 * 16-bit on the fly, so halving everything errs low, as the estimate must.)
 */
function weightScale(
  facts: ModelFacts,
  quantization: string,
): { scale: number; note: string | null } {
  if (facts.quantization !== null) return { scale: 1, note: null };
  const notes: string[] = [];
  let scale = 1;
  if ((facts.dtype ?? "").toLowerCase() === "float32") {
    scale *= 0.5;
    notes.push("float32 loaded as 16-bit: ×0.5");
  }
  if (needsFp8Hardware(quantization)) {
    scale *= 0.5;
    notes.push(`${quantization} on the fly: ×0.5`);
  } else if (quantization === "bitsandbytes") {
    scale *= 0.25;
    notes.push("bitsandbytes on the fly (4-bit): ×0.25");
  }
  return { scale, note: notes.length === 0 ? null : notes.join(", ") };
}

/** The bytes of one GPU the engine may use: its memory × the fraction. */
export function gpuBudget(gpuBytes: number, fraction: number): number {
  return gpuBytes * fraction;
}

/** Whether the estimate fits a GPU of `gpuBytes` at `fraction`. */
export function fitsGpu(estimate: MemoryEstimate, gpuBytes: number, fraction: number): boolean {
  return estimate.total_bytes <= gpuBudget(gpuBytes, fraction);
}

/** Bytes as GiB with one decimal: "94.0". */
export function gib(bytes: number): string {
  return (bytes / GIB).toFixed(1);
}

/**
 * "needs 101.2 GiB per GPU (weights 94.0 + KV cache for one 131072-token
 * sequence 7.2) but an l40s-45g GPU offers 40.5 GiB (45.0 GiB × 0.90)".
 */
export function insufficientMemoryText(
  estimate: MemoryEstimate,
  gpuClass: string,
  gpuBytes: number,
  settings: EngineMemorySettings,
): string {
  const kv = estimate.context_length === 0
    ? "no KV cache counted (the engine picks the length)"
    : `KV cache for one ${estimate.context_length}-token sequence ${gib(estimate.kv_cache_bytes)}`;
  const note = estimate.weights_note === null ? "" : `, ${estimate.weights_note}`;
  const from = settings.fraction_from.endsWith("default") ? "" : ` from ${settings.fraction_from}`;
  // Class names are read letter by letter: "an l40s-45g", "an h100-80g", "a b200-179g".
  const article = /^[aefhilmnorsx]/.test(gpuClass) ? "an" : "a";
  return `needs ${gib(estimate.total_bytes)} GiB per GPU (weights ${
    gib(estimate.weights_bytes)
  }${note} + ${kv}) but ${article} ${gpuClass} GPU offers ${
    gib(gpuBudget(gpuBytes, settings.fraction))
  } GiB (${gib(gpuBytes)} GiB × ${settings.fraction.toFixed(2)}${from})`;
}

/**
 * vLLM's words when `tensor_parallel` does not divide the attention heads,
 * with the sizes that would; null when it divides them.
 */
export function tensorParallelProblem(facts: ModelFacts, tensorParallel: number): string | null {
  const heads = facts.attention_heads;
  if (heads % tensorParallel === 0) return null;
  const fits: number[] = [];
  for (let d = 1; d <= heads && fits.length < 8; d++) if (heads % d === 0) fits.push(d);
  return `Total number of attention heads (${heads}) must be divisible by tensor parallel size (${tensorParallel}): the engine refuses to start (tensor_parallel ${
    fits.join(", ")
  }${fits.length === 8 ? ", …" : ""} would divide them)`;
}

/**
 * The GPU memory a class name promises: `l40s-45g` → 45 GiB (design §2:
 * the driver's MiB ÷ 1024, rounded); null when the name has no size.
 */
export function classMemoryBytes(gpuClass: string): number | null {
  const m = /-(\d+)g$/.exec(gpuClass);
  return m === null ? null : Number(m[1]) * GIB;
}
