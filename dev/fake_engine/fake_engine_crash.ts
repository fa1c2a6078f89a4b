/**
 * The fake engine's crash (dev/fake_engine/fake_engine.ts): the CUDA-error traceback
 * a dying vLLM EngineCore or SGLang scheduler logs, then exit 1, for
 * FAKE_ENGINE_CRASH_AFTER_REQUESTS and FAKE_ENGINE_CRASH_AFTER_SECONDS.
 *
 * @module
 */

import type { EngineConfig } from "./fake_engine_command.ts";
import type { Logger } from "./fake_engine_log.ts";

/** Exits with the engine's CUDA-error crash output. */
export function crash(rt: { cfg: EngineConfig; log: Logger }, why: string): never {
  const { cfg, log } = rt;
  const cuda = "RuntimeError: CUDA error: an illegal memory access was encountered";
  if (cfg.engine === "vllm") {
    log.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.");
    log.core("ERROR", "core.py:710", "Traceback (most recent call last):");
    log.core(
      "ERROR",
      "core.py:710",
      '  File "vllm/v1/engine/core.py", line 701, in run_engine_core',
    );
    log.core("ERROR", "core.py:710", cuda);
    log.core(
      "ERROR",
      "core.py:710",
      "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    );
    log.api("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.");
    log.api(
      "ERROR",
      "async_llm.py:480",
      "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    );
  } else {
    log.core(
      "ERROR",
      "scheduler.py",
      "Scheduler hit an exception: Traceback (most recent call last):",
    );
    log.core(
      "ERROR",
      "scheduler.py",
      '  File "sglang/srt/managers/scheduler.py", line 2700, in run_scheduler_process',
    );
    log.core("ERROR", "scheduler.py", cuda);
    log.api(
      "ERROR",
      "",
      "Received sigquit from a child process. It usually means the child failed.",
    );
  }
  log.fake(`exiting with code 1 (${why})`);
  Deno.exit(1);
}
