/**
 * The fake engine stops where the real one stops when its model cannot run
 * on its GPUs (dev/fake_engine/fake_engine_model_fit.ts): at each step of
 * its start it asks whether the refusal belongs there and, if so, prints
 * the engine's lines and exits 1. vLLM: a config refusal in the API server
 * before the engine core starts; a load refusal in the engine core ("EngineCore
 * failed to start."), then the API server's "Engine core initialization
 * failed". SGLang: every refusal in the scheduler ("Scheduler hit an
 * exception"), then the launcher's "Received sigquit from a child process"
 * (real SGLang then kills its own process tree; the fake exits 1, as its
 * crash does). Engine reference §1.4 and §2.5 cite the texts.
 *
 * @module
 */
import type { Runtime } from "./fake_engine_runtime.ts";

/** Exits 1 with the engine's lines when its refusal comes at `phase` and `step`; returns otherwise. */
export function refuseAt(
  rt: Runtime,
  phase: "start" | "load",
  step: "config" | "weights" | "kv_cache",
): void {
  const refusal = rt.fit?.refusal ?? null;
  if (refusal === null || refusal.phase !== phase || refusal.step !== step) return;
  const { log } = rt;
  if (rt.cfg.engine === "vllm" && refusal.phase === "start") {
    log.api("ERROR", "api_server.py:1990", refusal.message);
  } else if (rt.cfg.engine === "vllm") {
    log.core("ERROR", "core.py:708", "EngineCore failed to start.");
    log.core("ERROR", "core.py:708", "Traceback (most recent call last):");
    log.core("ERROR", "core.py:708", refusal.message);
    log.stderrLine(
      "RuntimeError: Engine core initialization failed. See root cause above. " +
        "Failed core proc(s): {}",
    );
  } else {
    log.core(
      "ERROR",
      "scheduler.py",
      "Scheduler hit an exception: Traceback (most recent call last):",
    );
    log.core("ERROR", "scheduler.py", refusal.message);
    log.api(
      "ERROR",
      "",
      "Received sigquit from a child process. It usually means the child failed.",
    );
  }
  log.fake(`exiting with code 1 (the model does not fit: ${step})`);
  Deno.exit(1);
}
