/**
 * The fake engine's model loading (dev/fake_engine/fake_engine.ts): weights,
 * torch.compile (vLLM; warm from its compile cache when that holds its key,
 * dev/fake_engine/fake_engine_compile.ts), KV cache and CUDA graphs in
 * FAKE_ENGINE_LOAD_SECONDS, with each engine's log lines for every phase
 * (engine reference §9) and tqdm's bars, or never done with
 * FAKE_ENGINE_NEVER_READY=1.
 *
 * @module
 */

import { sleep } from "./fake_engine_generation.ts";
import { openCompileCache, saveCompiled } from "./fake_engine_compile.ts";
import type { ModelFit } from "./fake_engine_model_fit.ts";
import { refuseAt } from "./fake_engine_refusal.ts";
import type { Runtime } from "./fake_engine_runtime.ts";

const GIB = 2 ** 30;

/** Tokens the KV cache holds: from the model's fit when known, else the fake's fixed figure. */
function cacheTokens(fit: ModelFit | null, kvBytes: number | null): number {
  if (fit === null || kvBytes === null || fit.kvBytesPerToken === 0) return 393_216;
  // Whole blocks of 16 tokens, as vLLM counts its cache.
  return Math.floor(kvBytes / fit.kvBytesPerToken / 16) * 16;
}

/**
 * Loading: tqdm bar (when shown) over the weights' share of the load time
 * (vLLM 50%, SGLang 70%), then the other phases; a warm compile cache makes
 * a vLLM start shorter. Never returns when never_ready.
 */
export async function load(rt: Runtime, showBar: boolean, fraction: number): Promise<void> {
  const total = 4;
  const ms = rt.knobs.load_seconds * 1000 * fraction;
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const isVllm = rt.cfg.engine === "vllm";
  if (isVllm) {
    rt.log.core("INFO", "gpu_model_runner.py:2602", `Starting to load model ${rt.cfg.model}...`);
    // The model's attention layers assert the KV heads against TP as it is built.
    refuseAt(rt, "load", "config");
  } else {
    rt.log.core("INFO", "", "Load weight begin. avail mem=78.50 GB");
    // SGLang's attention layers assert the heads against TP as the model is built.
    refuseAt(rt, "load", "config");
  }
  if (showBar) rt.log.bar(0, total, 0);
  if (rt.knobs.never_ready) {
    rt.log.fake("FAKE_ENGINE_NEVER_READY=1: loading will never finish");
    await new Promise<never>(() => {});
  }
  const weightShare = isVllm ? 0.5 : 0.7;
  for (let i = 1; i <= total; i++) {
    await sleep((ms * weightShare) / total);
    if (showBar) rt.log.bar(i, total, elapsed());
    // Weights beyond the GPU run out of memory part-way through the shards.
    if (i === total / 2) refuseAt(rt, "load", "weights");
  }
  const weightsGib = ((rt.fit?.weightsBytes ?? 14.99 * GIB) / GIB).toFixed(2);
  const weightSecs = elapsed().toFixed(2);
  if (isVllm) {
    rt.log.core("INFO", "default_loader.py:267", `Loading weights took ${weightSecs} seconds`);
    rt.log.core(
      "INFO",
      "gpu_model_runner.py:2653",
      `Model loading took ${weightsGib} GiB and ${weightSecs} seconds`,
    );
    // --enforce-eager: no torch.compile and no CUDA graphs, as in vLLM.
    const eager = rt.cfg.flags.get("--enforce-eager") === true;
    if (!eager) await compile(rt, ms);
    await sleep(ms * 0.15);
    const kv = rt.fit?.kvBytes ?? null;
    rt.log.core(
      "INFO",
      "gpu_worker.py:298",
      `Available KV cache memory: ${kv === null ? "48.00" : (kv / GIB).toFixed(2)} GiB`,
    );
    refuseAt(rt, "load", "kv_cache");
    rt.log.core(
      "INFO",
      "kv_cache_utils.py:1087",
      `GPU KV cache size: ${cacheTokens(rt.fit, kv).toLocaleString("en-US")} tokens`,
    );
    // CUDA graphs are captured on every start, warm or not: vLLM keeps no graph on disk.
    if (!eager) await captureGraphs(rt, ms * 0.15);
    rt.log.core(
      "INFO",
      "core.py:210",
      `init engine (profile, create kv cache, warmup model) took ${elapsed().toFixed(2)} seconds`,
    );
  } else {
    rt.log.core(
      "INFO",
      "",
      `Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.50 GB, mem usage=${weightsGib} GB.`,
    );
    refuseAt(rt, "load", "kv_cache");
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "",
      "KV Cache is allocated. #tokens: 393216, K size: 24.00 GB, V size: 24.00 GB",
    );
    rt.log.core(
      "INFO",
      "",
      "Capture cuda graph begin. This can take up to several minutes. avail mem=14.00 GB",
    );
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "",
      "Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.50 GB. avail mem=13.50 GB.",
    );
    rt.log.core(
      "INFO",
      "",
      `max_total_num_tokens=393216, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=${rt.cfg.max_running}, context_len=${rt.cfg.max_model_len}, available_gpu_mem=13.50 GB`,
    );
  }
}

/**
 * vLLM's torch.compile (engine reference §9): cold, it compiles (20% of the
 * load time) and records the graphs in its cache directory; warm, it loads
 * them in a tenth of that and says so.
 */
async function compile(rt: Runtime, ms: number): Promise<void> {
  const t0 = performance.now();
  const took = () => ((performance.now() - t0) / 1000).toFixed(2);
  let cache;
  try {
    cache = await openCompileCache(rt.cfg, rt.version, Deno.env);
  } catch (e) {
    // vLLM's os.makedirs raises in the engine core, which fails the start.
    rt.log.core("ERROR", "core.py:708", "EngineCore failed to start.");
    rt.log.core("ERROR", "core.py:708", `OSError: ${e instanceof Error ? e.message : String(e)}`);
    rt.log.fake("exiting with code 1 (the torch.compile cache directory cannot be created)");
    Deno.exit(1);
  }
  if (cache.dir !== null) {
    rt.log.core(
      "INFO",
      "backends.py:548",
      `Using cache directory: ${cache.dir} for vLLM's torch.compile`,
    );
  } else if (Deno.env.get("VLLM_DISABLE_COMPILE_CACHE") === "1") {
    rt.log.core("INFO", "backends.py:541", "vLLM's torch.compile cache is disabled.");
  } else {
    rt.log.fake("VLLM_CACHE_ROOT is not set: compiling without a cache (nothing is written)");
  }
  await sleep(ms * 0.01);
  const dynamo = took();
  rt.log.core("INFO", "backends.py:559", `Dynamo bytecode transform time: ${dynamo} s`);
  const t1 = performance.now();
  const since1 = () => ((performance.now() - t1) / 1000).toFixed(3);
  if (cache.warm) {
    await sleep(ms * 0.01);
    rt.log.core(
      "INFO",
      "backends.py:161",
      `Directly load the compiled graph(s) for dynamic shape from the cache, took ${since1()} s`,
    );
  } else {
    rt.log.core("INFO", "backends.py:197", "Cache the graph for dynamic shape for later use");
    await sleep(ms * 0.19);
    rt.log.core(
      "INFO",
      "backends.py:218",
      `Compiling a graph for dynamic shape takes ${Number(since1()).toFixed(2)} s`,
    );
    saveCompiled(cache);
  }
  rt.log.core("INFO", "monitor.py:34", `torch.compile takes ${took()} s in total`);
}

/** vLLM's CUDA graph capture: tqdm's bar, then its summary line. */
async function captureGraphs(rt: Runtime, ms: number): Promise<void> {
  const t0 = performance.now();
  const label = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)";
  rt.log.stderrLine(`${label}:   0%|          | 0/67 [00:00<?, ?it/s]`);
  await sleep(ms);
  const secs = (performance.now() - t0) / 1000;
  const rate = (67 / Math.max(secs, 0.001)).toFixed(2);
  const whole = Math.round(secs);
  const mmss = `${String(Math.floor(whole / 60)).padStart(2, "0")}:${
    String(whole % 60).padStart(2, "0")
  }`;
  rt.log.stderrLine(`${label}: 100%|██████████| 67/67 [${mmss}<00:00, ${rate}it/s]`);
  rt.log.core(
    "INFO",
    "gpu_model_runner.py:3480",
    `Graph capturing finished in ${Math.round(secs)} secs, took 0.50 GiB`,
  );
}
