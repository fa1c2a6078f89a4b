/**
 * The fake engine's worker child (dev/fake_engine/fake_engine.ts), standing in for
 * vLLM's EngineCore and SGLang's scheduler: a second `deno` process in the
 * leader's process group, sharing its stdout and stderr, that does not watch
 * its parent, so a SIGKILLed leader leaves it running.
 *
 * @module
 */

import type { EngineConfig } from "./fake_engine_command.ts";
import { readKnobs } from "./fake_engine_knobs.ts";
import { sglangTime, vllmTime, writeAll } from "./fake_engine_log.ts";

/** The entry script the worker runs as (`fake_engine.ts --worker …`), beside this file. */
const ENTRY = import.meta.dirname === undefined
  ? new URL("./fake_engine.ts", import.meta.url).pathname
  : `${import.meta.dirname}/fake_engine.ts`;

/** Starts the worker child for `cfg`'s engine. */
export function spawnWorker(cfg: EngineConfig): Deno.ChildProcess {
  // Same process group (no detached), stdout/stderr inherited: like vLLM's
  // EngineCore it holds the log pipe open for as long as it lives.
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      "--no-config",
      ENTRY,
      "--worker",
      cfg.engine,
      String(Deno.pid),
    ],
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
}

/** The worker child: stays alive (even when its parent is SIGKILLed) until signalled. */
export function runWorker(args: string[]): void {
  const engine = args[0] === "sglang" ? "sglang" : "vllm";
  const leader = args[1] ?? "?";
  const knobs = readKnobs();
  const name = engine === "vllm" ? `VLLM::EngineCore` : `sglang::scheduler_TP0`;
  const line = (msg: string) => {
    const text = engine === "vllm"
      ? `(EngineCore_DP0 pid=${Deno.pid}) INFO ${vllmTime()} [fake_engine.ts] ${msg}\n`
      : `[${sglangTime()} TP0] [fake_engine.ts] ${msg}\n`;
    writeAll(engine === "vllm" ? Deno.stdout : Deno.stderr, text);
  };
  line(`fake ${name} worker started (leader pid ${leader}); it does not watch its parent`);
  const onSignal = (sig: Deno.Signal) => {
    if (knobs.ignore_sigterm) {
      line(`fake worker ignoring ${sig} (FAKE_ENGINE_IGNORE_SIGTERM=1)`);
      return;
    }
    line(`fake worker shutting down on ${sig}`);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => onSignal("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => onSignal("SIGINT"));
  setTimeout(() => {
    line(`fake worker exiting after FAKE_ENGINE_WORKER_MAX_SECONDS=${knobs.worker_max_seconds}`);
    Deno.exit(0);
  }, knobs.worker_max_seconds * 1000);
}
