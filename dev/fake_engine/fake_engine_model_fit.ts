/**
 * The fake engine fails as the real one fails from the model's own files
 * (issue #25 item 6): when its model is a local directory with a
 * `config.json` (the agent's `model_path` snapshot, or a local model), it
 * reads the model's facts (models/model_facts.ts), sizes its memory with
 * its own argv's settings (engines/memory_settings.ts:
 * `--gpu-memory-utilization`, `--mem-fraction-static`, `--max-model-len`,
 * `--context-length`, `--kv-cache-dtype`, the engines' defaults) and says
 * what vLLM or SGLang would say (models/engine_refusal.ts): a tensor
 * parallel size that does not divide the heads, CUDA out of memory while
 * the weights load, no room for the KV cache after them.
 *
 * Its GPU's memory comes from `FAKE_ENGINE_GPU_MEMORY_MIB`, set by whoever
 * starts it (`llmgw dev` sets it per simulated machine). Without it no
 * memory is checked, only the heads. Imports by relative path, no npm: it
 * runs with `--no-config`.
 *
 * @module
 */
import { readModelDir } from "../../models/facts_source.ts";
import type { ModelFacts } from "../../models/model_facts.ts";
import { estimateMemory, gpuBudget } from "../../models/memory_estimate.ts";
import { type EngineRefusal, engineRefusal } from "../../models/engine_refusal.ts";
import { engineMemorySettings } from "../../engines/memory_settings.ts";
import type { EngineConfig } from "./fake_engine_command.ts";

/** What the fake knows of its model on its GPU. */
export interface ModelFit {
  /** The model's facts. */
  facts: ModelFacts;
  /** This GPU's share of the weights as loaded, in bytes. */
  weightsBytes: number;
  /** Bytes left for the KV cache after the weights; null when the GPU's memory is unknown. */
  kvBytes: number | null;
  /** KV cache bytes per token on this GPU. */
  kvBytesPerToken: number;
  /** How the real engine stops; null when it starts. */
  refusal: EngineRefusal | null;
}

/** The directory of a local model argument, or null for a hub id. */
function localDir(model: string): string | null {
  if (model.startsWith("file://")) return decodeURIComponent(new URL(model).pathname);
  return model.startsWith("/") || model.startsWith("./") ? model.replace(/\/+$/, "") : null;
}

/**
 * The fit of `cfg`'s model, from its directory's files and `gpuMib`;
 * null when its model is not a local directory with a `config.json`.
 *
 * @throws {Error} When the files are there but cannot be read (naming the file).
 */
export async function modelFit(
  cfg: EngineConfig,
  args: readonly string[],
  gpuMib: number | null,
): Promise<ModelFit | null> {
  const dir = localDir(cfg.model);
  if (dir === null) return null;
  try {
    if (!Deno.statSync(`${dir}/config.json`).isFile) return null;
  } catch {
    return null;
  }
  const facts = await readModelDir(dir);
  const settings = engineMemorySettings(cfg.engine, args, cfg.tp)!;
  const shape = {
    tensor_parallel: cfg.tp,
    pipeline_parallel: cfg.pp,
    quantization: cfg.quantization ?? "none",
  };
  const e = estimateMemory(facts, shape, settings);
  // Unknown memory: as a GPU of any size, so only the heads can refuse.
  const gpuBytes = gpuMib === null ? Infinity : gpuMib * 2 ** 20;
  return {
    facts,
    weightsBytes: e.weights_bytes,
    kvBytes: gpuMib === null ? null : gpuBudget(gpuBytes, settings.fraction) - e.weights_bytes,
    kvBytesPerToken: e.context_length === 0 ? 0 : e.kv_cache_bytes / e.context_length,
    refusal: engineRefusal(cfg.engine, facts, shape, settings, gpuBytes),
  };
}
