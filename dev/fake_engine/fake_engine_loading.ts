/**
 * The fake engine's model loading (dev/fake_engine/fake_engine.ts): weights, KV
 * cache and CUDA graphs in FAKE_ENGINE_LOAD_SECONDS, with each engine's log
 * lines and tqdm's weight-loading bar, or never done with
 * FAKE_ENGINE_NEVER_READY=1.
 *
 * @module
 */

import { sleep } from "./fake_engine_generation.ts";
import type { Runtime } from "./fake_engine_runtime.ts";

/** Loading: tqdm bar (when shown) over 70% of the load time, then the rest; never returns when never_ready. */
export async function load(rt: Runtime, showBar: boolean, fraction: number): Promise<void> {
  const total = 4;
  const ms = rt.knobs.load_seconds * 1000 * fraction;
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const isVllm = rt.cfg.engine === "vllm";
  if (isVllm) {
    rt.log.core("INFO", "gpu_model_runner.py:2338", `Starting to load model ${rt.cfg.model}...`);
  } else {
    rt.log.core("INFO", "", "Load weight begin. avail mem=78.50 GB");
  }
  if (showBar) rt.log.bar(0, total, 0);
  if (rt.knobs.never_ready) {
    rt.log.fake("FAKE_ENGINE_NEVER_READY=1: loading will never finish");
    await new Promise<never>(() => {});
  }
  for (let i = 1; i <= total; i++) {
    await sleep((ms * 0.7) / total);
    if (showBar) rt.log.bar(i, total, elapsed());
  }
  const weightSecs = elapsed().toFixed(2);
  if (isVllm) {
    rt.log.core("INFO", "default_loader.py:267", `Loading weights took ${weightSecs} seconds`);
    rt.log.core(
      "INFO",
      "gpu_model_runner.py:2370",
      `Model loading took 14.99 GiB and ${weightSecs} seconds`,
    );
    await sleep(ms * 0.15);
    rt.log.core("INFO", "gpu_worker.py:298", "Available KV cache memory: 48.00 GiB");
    rt.log.core("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 393,216 tokens");
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "gpu_model_runner.py:3480",
      "Graph capturing finished in 1 secs, took 0.50 GiB",
    );
    rt.log.core(
      "INFO",
      "core.py:218",
      `init engine (profile, create kv cache, warmup model) took ${elapsed().toFixed(2)} seconds`,
    );
  } else {
    rt.log.core(
      "INFO",
      "",
      "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.50 GB, mem usage=15.00 GB.",
    );
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
