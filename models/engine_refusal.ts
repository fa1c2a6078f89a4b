/**
 * What vLLM and SGLang say when a model cannot run on a shard's GPUs, from the same
 * facts and estimate placement uses (models/memory_estimate.ts), so that a
 * fake engine fails as the real one fails: at start for a tensor_parallel
 * that does not divide the heads, at load when the weights or one
 * sequence's KV cache do not fit. The texts are vLLM's own:
 *
 * - start: `ModelConfig.verify_with_parallel_config` (`vllm/config/model.py`):
 *   "Total number of attention heads (28) must be divisible by tensor
 *   parallel size (8)."
 * - load, building the model: KV heads that TP neither divides nor is
 *   divided by (`assert self.total_num_kv_heads % tp_size == 0`, else
 *   `tp_size % …`, in the models' attention layers): a bare AssertionError.
 * - load, weights beyond the GPU itself: PyTorch's caching allocator
 *   (`c10/cuda/CUDACachingAllocator.cpp`): "CUDA out of memory. Tried to
 *   allocate … GiB. GPU 0 has a total capacity of … GiB of which … GiB is
 *   free."
 * - load, nothing left for the cache: "No available memory for the cache
 *   blocks. Try increasing `gpu_memory_utilization` when initializing the
 *   engine." (`vllm/v1/core/kv_cache_utils.py`)
 * - load, not one full sequence: "To serve at least one request with the
 *   models's max seq len (…), (… GiB KV cache is needed, which is larger
 *   than the available KV cache memory (… GiB). Based on the available
 *   memory, the estimated maximum model length is …. Try increasing
 *   `gpu_memory_utilization` or decreasing `max_model_len` when initializing
 *   the engine." (the same file; recorded in vllm-project/vllm#25350). The
 *   estimated length is the longest whose cache fits, in whole blocks of 16
 *   tokens, as vLLM's search over block-rounded lengths finds it.
 *
 * SGLang (`sglangRefusal`) checks less before it loads and stops at fewer
 * points: its attention layers `assert self.total_num_heads % tp_size == 0`
 * while the model is built (a bare `AssertionError`, at load); weights beyond
 * the GPU are the same CUDA out of memory; weights that leave no room for a
 * single token of KV cache under `--mem-fraction-static` end in "Not enough
 * memory. Please try to increase --mem-fraction-static." (`init_memory_pool`
 * in `python/sglang/srt/model_executor/model_runner.py`, later
 * `MemoryPoolConfig` in `pool_configurator.py`). A pool shorter than one
 * full-length sequence is no error to SGLang: it serves shorter requests
 * (`max_req_input_len` is capped by the pool), so nothing is refused there.
 *
 * Pure, no npm imports (the fake engine runs with `--no-config`).
 *
 * @module
 */
import type { EngineMemorySettings } from "../engines/memory_settings.ts";
import { estimateMemory, gpuBudget, type MemoryShape } from "./memory_estimate.ts";
import type { ModelFacts } from "./model_facts.ts";

/** Why an engine stops, and when. */
export interface EngineRefusal {
  /** `start`: before loading anything; `load`: after (some of) the weights are in. */
  phase: "start" | "load";
  /**
   * The step it fails at: `config` (checking the config, or building the
   * model before its weights), `weights` (loading them), `kv_cache` (sizing
   * the cache after the weights and the profile run).
   */
  step: "config" | "weights" | "kv_cache";
  /** The engine's words. */
  message: string;
}

/** vLLM's KV cache block: lengths are counted in whole blocks. */
const BLOCK_TOKENS = 16;

const GIB = 2 ** 30;
const gib = (bytes: number) => `${(bytes / GIB).toFixed(2)} GiB`;

/**
 * What vLLM says running `facts` with `shape` and `settings` on a GPU of
 * `gpuBytes`; null when it starts.
 */
export function vllmRefusal(
  facts: ModelFacts,
  shape: MemoryShape,
  settings: EngineMemorySettings,
  gpuBytes: number,
): EngineRefusal | null {
  const tp = shape.tensor_parallel;
  if (facts.attention_heads % tp !== 0) {
    return {
      phase: "start",
      step: "config",
      message: `ValueError: Total number of attention heads (${facts.attention_heads}) must be ` +
        `divisible by tensor parallel size (${tp}).`,
    };
  }
  if (!kvHeadsSplit(facts, tp)) return { phase: "load", step: "config", message: "AssertionError" };
  const e = estimateMemory(facts, shape, settings);
  if (e.weights_bytes > gpuBytes) return cudaOutOfMemory(e.weights_bytes, gpuBytes);
  const available = gpuBudget(gpuBytes, settings.fraction) - e.weights_bytes;
  if (available <= 0) {
    return {
      phase: "load",
      step: "kv_cache",
      message: "ValueError: No available memory for the cache blocks. Try increasing " +
        "`gpu_memory_utilization` when initializing the engine.",
    };
  }
  if (e.kv_cache_bytes <= available) return null;
  const perToken = e.kv_cache_bytes / e.context_length;
  const longest = Math.floor(available / (perToken * BLOCK_TOKENS)) * BLOCK_TOKENS;
  return {
    phase: "load",
    step: "kv_cache",
    message:
      `ValueError: To serve at least one request with the models's max seq len (${e.context_length}), (${
        gib(e.kv_cache_bytes)
      } KV cache is needed, which is larger than the available KV ` +
      `cache memory (${gib(available)}). Based on the available memory, the estimated maximum ` +
      `model length is ${longest}. Try increasing \`gpu_memory_utilization\` or decreasing ` +
      "`max_model_len` when initializing the engine.",
  };
}

/**
 * What SGLang says running `facts` with `shape` and `settings` on a GPU of
 * `gpuBytes`; null when it starts (see the module doc: SGLang refuses
 * nothing at start, and a pool shorter than one sequence is no error).
 */
export function sglangRefusal(
  facts: ModelFacts,
  shape: MemoryShape,
  settings: EngineMemorySettings,
  gpuBytes: number,
): EngineRefusal | null {
  const tp = shape.tensor_parallel;
  if (facts.attention_heads % tp !== 0 || !kvHeadsSplit(facts, tp)) {
    return { phase: "load", step: "config", message: "AssertionError" };
  }
  const e = estimateMemory(facts, shape, settings);
  if (e.weights_bytes > gpuBytes) return cudaOutOfMemory(e.weights_bytes, gpuBytes);
  if (gpuBudget(gpuBytes, settings.fraction) - e.weights_bytes > 0) return null;
  return {
    phase: "load",
    step: "kv_cache",
    message: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
  };
}

/** What `engine` (vllm or sglang) says; null when it starts, or for an engine not known here. */
export function engineRefusal(
  engine: string,
  facts: ModelFacts,
  shape: MemoryShape,
  settings: EngineMemorySettings,
  gpuBytes: number,
): EngineRefusal | null {
  if (engine === "vllm") return vllmRefusal(facts, shape, settings, gpuBytes);
  if (engine === "sglang") return sglangRefusal(facts, shape, settings, gpuBytes);
  return null;
}

/** PyTorch's caching allocator when the weights outgrow the GPU itself. */
function cudaOutOfMemory(weights: number, gpuBytes: number): EngineRefusal {
  return {
    phase: "load",
    step: "weights",
    message: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ${
      gib(weights - gpuBytes)
    }. GPU 0 has a total capacity of ${gib(gpuBytes)} of which 0.00 GiB is free.`,
  };
}

/**
 * Whether the KV heads split over `tp` ranks as both engines' attention
 * layers assert while the model is built: TP divides them, or they divide
 * TP (each replicated); latent attention has none to split.
 */
function kvHeadsSplit(facts: ModelFacts, tp: number): boolean {
  if (facts.mla_latent_dim !== null) return true;
  return facts.kv_heads >= tp ? facts.kv_heads % tp === 0 : tp % facts.kv_heads === 0;
}
