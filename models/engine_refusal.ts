/**
 * What vLLM says when a model cannot run on a shard's GPUs, from the same
 * facts and estimate placement uses (models/memory_estimate.ts), so that a
 * fake engine fails as the real one fails: at start for a tensor_parallel
 * that does not divide the heads, at load when the weights or one
 * sequence's KV cache do not fit. The texts are vLLM's own:
 *
 * - start: `ModelConfig.verify_with_parallel_config` (`vllm/config/model.py`):
 *   "Total number of attention heads (28) must be divisible by tensor
 *   parallel size (8)."
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
      message: `ValueError: Total number of attention heads (${facts.attention_heads}) must be ` +
        `divisible by tensor parallel size (${tp}).`,
    };
  }
  const e = estimateMemory(facts, shape, settings);
  if (e.weights_bytes > gpuBytes) {
    return {
      phase: "load",
      message: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ${
        gib(e.weights_bytes - gpuBytes)
      }. GPU 0 has a total capacity of ${gib(gpuBytes)} of which 0.00 GiB is free.`,
    };
  }
  const available = gpuBudget(gpuBytes, settings.fraction) - e.weights_bytes;
  if (available <= 0) {
    return {
      phase: "load",
      message: "ValueError: No available memory for the cache blocks. Try increasing " +
        "`gpu_memory_utilization` when initializing the engine.",
    };
  }
  if (e.kv_cache_bytes <= available) return null;
  const perToken = e.kv_cache_bytes / e.context_length;
  const longest = Math.floor(available / (perToken * BLOCK_TOKENS)) * BLOCK_TOKENS;
  return {
    phase: "load",
    message:
      `ValueError: To serve at least one request with the models's max seq len (${e.context_length}), (${
        gib(e.kv_cache_bytes)
      } KV cache is needed, which is larger than the available KV ` +
      `cache memory (${gib(available)}). Based on the available memory, the estimated maximum ` +
      `model length is ${longest}. Try increasing \`gpu_memory_utilization\` or decreasing ` +
      "`max_model_len` when initializing the engine.",
  };
}
