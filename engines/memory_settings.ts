/**
 * How much of a GPU an engine takes for weights and KV cache, and how long a
 * sequence it sizes the cache for: the engine's memory fraction, its maximum
 * model length and its KV cache dtype, read from a profile's `engine_args`
 * with the engine's own defaults. The memory estimate
 * (models/memory_estimate.ts) compares a model against these.
 *
 * - vLLM: `--gpu-memory-utilization` (default 0.90, `CacheConfig` in
 *   `vllm/config/cache.py`; newer releases default to 0.92, engine reference
 *   §1.2, so 0.90 is the cautious figure), `--max-model-len` (k/m/g suffixes
 *   as `ModelConfig.max_model_len` documents: `1k` = 1000, `1K` = 1024;
 *   `-1`/`auto` = the largest that fits), `--kv-cache-dtype`.
 * - SGLang: `--mem-fraction-static`, whose default depends on tensor
 *   parallelism (`ServerArgs.__post_init__` in `python/sglang/srt/server_args.py`:
 *   0.88 at TP 1, 0.87 at TP ≥ 2, 0.85 at ≥ 4, 0.81 at ≥ 8, 0.79 at ≥ 16;
 *   later releases derive it from the GPU's memory instead), `--context-length`,
 *   `--kv-cache-dtype`.
 *
 * Other engines (plugins) are unknown: null, and nothing is refused for them.
 * No imports, so the fake engine can read its own argv with it.
 *
 * @module
 */

/** An engine's memory settings for one profile. */
export interface EngineMemorySettings {
  /** Share of each GPU's memory the engine uses for weights and KV cache. */
  fraction: number;
  /** Where the fraction comes from, for messages: "vllm default" or the flag. */
  fraction_from: string;
  /** The maximum sequence length set by flag; null: the model's own (ModelFacts.context_length). */
  max_model_len: number | null;
  /** True when the flag asks the engine to pick the longest that fits (`-1`, `auto`). */
  max_model_len_auto: boolean;
  /** Bytes per KV cache element set by `--kv-cache-dtype`; null: the model's dtype (2 bytes). */
  kv_cache_element_bytes: number | null;
}

/** vLLM's `gpu_memory_utilization` default (see the module doc). */
export const VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

/** SGLang's `mem_fraction_static` default at a tensor-parallel size (see the module doc). */
export function sglangDefaultMemFraction(tensorParallel: number): number {
  if (tensorParallel >= 16) return 0.79;
  if (tensorParallel >= 8) return 0.81;
  if (tensorParallel >= 4) return 0.85;
  if (tensorParallel >= 2) return 0.87;
  return 0.88;
}

/** Per engine: its fraction flag, its length flag, and its default fraction. */
const FLAGS: Record<
  string,
  { fraction: string; length: string; byDefault: (tp: number) => number }
> = {
  vllm: {
    fraction: "--gpu-memory-utilization",
    length: "--max-model-len",
    byDefault: () => VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
  },
  sglang: {
    fraction: "--mem-fraction-static",
    length: "--context-length",
    byDefault: sglangDefaultMemFraction,
  },
};

/** The engines whose memory settings are known. */
export function knowsMemory(engine: string): boolean {
  return engine in FLAGS;
}

/**
 * The memory settings `engine` runs a profile with, from its arguments;
 * null for an engine whose settings are unknown. A flag value that does not
 * parse is left to the engine's own check and the default is used.
 */
export function engineMemorySettings(
  engine: string,
  args: readonly string[],
  tensorParallel: number,
): EngineMemorySettings | null {
  const flags = FLAGS[engine];
  if (flags === undefined) return null;
  const fractionText = flagValue(args, flags.fraction);
  const fraction = fractionText === null ? NaN : Number(fractionText);
  const given = Number.isFinite(fraction) && fraction > 0 && fraction <= 1;
  const lengthText = flagValue(args, flags.length);
  const auto = lengthText !== null && ["-1", "auto"].includes(lengthText.toLowerCase());
  return {
    fraction: given ? fraction : flags.byDefault(tensorParallel),
    fraction_from: given ? `${flags.fraction} ${fractionText}` : `${engine} default`,
    max_model_len: lengthText === null || auto ? null : parseLength(lengthText),
    max_model_len_auto: auto,
    kv_cache_element_bytes: kvElementBytes(flagValue(args, "--kv-cache-dtype")),
  };
}

/** The value of the last `--flag value` or `--flag=value` in `args` (later flags win, as in argparse). */
export function flagValue(args: readonly string[], flag: string): string | null {
  let value: string | null = null;
  const underscored = flag.replaceAll("-", "_").replace(/^__/, "--");
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    for (const name of [flag, underscored]) {
      if (a === name && i + 1 < args.length) value = args[i + 1];
      else if (a.startsWith(`${name}=`)) value = a.slice(name.length + 1);
    }
  }
  return value;
}

/**
 * "32768", "32k" (32,000), "32K" (32,768), "1.5m": vLLM's human-readable
 * lengths; null when it does not parse.
 */
export function parseLength(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([kmgKMG]?)$/.exec(text.trim());
  if (m === null) return null;
  const scale: Record<string, number> = {
    "": 1,
    k: 1e3,
    m: 1e6,
    g: 1e9,
    K: 2 ** 10,
    M: 2 ** 20,
    G: 2 ** 30,
  };
  const n = Math.floor(Number(m[1]) * scale[m[2]]);
  return n >= 1 ? n : null;
}

/** Bytes per element of a `--kv-cache-dtype`: 1 for the fp8 kinds, 2 for 16-bit ones; null for `auto`. */
function kvElementBytes(dtype: string | null): number | null {
  if (dtype === null || dtype === "auto") return null;
  const d = dtype.toLowerCase();
  if (d.startsWith("fp8") || d.includes("e4m3") || d.includes("e5m2")) return 1;
  if (["bf16", "bfloat16", "fp16", "float16", "half"].includes(d)) return 2;
  if (["fp32", "float32", "float"].includes(d)) return 4;
  return null;
}
