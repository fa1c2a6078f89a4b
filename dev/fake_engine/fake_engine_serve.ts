/**
 * A fake engine process's life (dev/fake_engine/fake_engine.ts): the worker child,
 * signals (a clean exit 0 unless FAKE_ENGINE_IGNORE_SIGTERM=1), the crash
 * timers, the startup lines, loading, and when and what each engine and rank
 * listens on: vLLM opens its port once loaded and headless ranks never do;
 * SGLang rank 0 listens at once and is ready once loaded and warm; SGLang
 * ranks ≥ 1 open a dummy health server once loaded.
 *
 * @module
 */

import { PrefixCache, type PrefixCacheKnobs } from "./fake_prefix_cache.ts";
import type { EngineConfig } from "./fake_engine_command.ts";
import { crash } from "./fake_engine_crash.ts";
import { sleep } from "./fake_engine_generation.ts";
import { apiError } from "./fake_engine_http.ts";
import { type KeepAlive, type Knobs, knobVersion } from "./fake_engine_knobs.ts";
import { load } from "./fake_engine_loading.ts";
import { type ModelFit, modelFit } from "./fake_engine_model_fit.ts";
import { Logger } from "./fake_engine_log.ts";
import { dummyRoutes, handler, mainRoutes, type Routes } from "./fake_engine_routes.ts";
import type { Runtime } from "./fake_engine_runtime.ts";
import { Scheduler } from "./fake_engine_scheduler.ts";
import { announceStartup } from "./fake_engine_startup.ts";
import { serveUvicorn } from "./fake_engine_uvicorn.ts";
import { spawnWorker } from "./fake_engine_worker.ts";

/**
 * Serves `routes` on the configured address through uvicorn's connection
 * handling (an idle keep-alive connection closed after `keepAliveSeconds`); a
 * port that cannot be bound exits 1. vLLM's uvicorn parses with httptools
 * (vLLM requires `fastapi[standard]`), SGLang's with h11 (it requires plain
 * `uvicorn`, without httptools): engine reference §11.
 */
function listen(
  rt: Runtime,
  routes: Routes,
  keys: readonly string[],
  keepAliveSeconds: number,
  onListen: () => void,
): void {
  serveUvicorn({
    hostname: rt.cfg.host,
    port: rt.cfg.port,
    keepAliveMs: Math.max(0, keepAliveSeconds * 1000),
    http: rt.cfg.engine === "vllm" ? "httptools" : "h11",
    onListen,
    onListenError: (e) => {
      const msg = e.code === "EADDRINUSE"
        ? `OSError: [Errno 98] error while attempting to bind on address ('${rt.cfg.host}', ${rt.cfg.port}): address already in use`
        : `OSError: cannot listen on ${rt.cfg.host}:${rt.cfg.port}: ${e.message}`;
      rt.log.api("ERROR", "launcher.py:80", msg);
      rt.log.fake("exiting with code 1 (cannot listen)");
      Deno.exit(1);
    },
    onError: (e) =>
      apiError(500, "InternalServerError", `fake engine: ${e instanceof Error ? e.message : e}`),
  }, handler(rt, routes, keys));
}

/**
 * The model's fit, when its directory has a config.json; files that cannot
 * be read leave it unknown (the fake's own line says why), as the engine's
 * own parser, not this one, decides what a config must hold.
 */
async function readFit(cfg: EngineConfig, knobs: Knobs, log: Logger): Promise<ModelFit | null> {
  try {
    return await modelFit(cfg, Deno.args, knobs.gpu_memory_mib);
  } catch (e) {
    log.fake(`model facts not read, nothing checked: ${e instanceof Error ? e.message : e}`);
    return null;
  }
}

/**
 * vLLM's uncaught ValueError for a `VLLM_HTTP_TIMEOUT_KEEP_ALIVE` that `int()`
 * cannot read: Python's traceback on stderr, the engine core shut down as
 * the engine client's context exits, then exit 1.
 */
function badKeepAlive(log: Logger, error: string, workerPid: number | null): never {
  // The frames (run_server_worker → vllm/envs.py) are left out: their line
  // numbers change with every release, and readers match the last line.
  log.stderrLine("Traceback (most recent call last):");
  log.stderrLine(error);
  if (workerPid !== null) {
    try {
      Deno.kill(workerPid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  log.fake("exiting with code 1 (VLLM_HTTP_TIMEOUT_KEEP_ALIVE is not a whole number)");
  Deno.exit(1);
}

/** Runs the engine `cfg` describes until a signal or a crash ends the process. */
export async function serve(
  cfg: EngineConfig,
  knobs: Knobs,
  prefix: PrefixCacheKnobs,
  keepAlive: KeepAlive,
): Promise<void> {
  const started = Date.now();
  // Signal listeners and a pending promise do not keep Deno alive on their own.
  setInterval(() => {}, 1 << 30);
  const worker = knobs.worker ? spawnWorker(cfg) : null;
  const log = new Logger(cfg, worker?.pid ?? Deno.pid, knobs.progress);
  const fit = await readFit(cfg, knobs, log);
  const version = knobVersion(cfg.engine);
  const sched = new Scheduler(cfg.max_running, prefix.cache);
  const rt: Runtime = {
    cfg,
    knobs,
    log,
    sched,
    cache: prefix.cache === null ? null : new PrefixCache(prefix.cache),
    prefix,
    ready: false,
    version,
    started_ms: started,
    fit,
    onCompleted: () => {
      if (knobs.crash_after_requests !== null && sched.completed >= knobs.crash_after_requests) {
        // Let the response that completed it reach the client first.
        setTimeout(
          () => crash(rt, `FAKE_ENGINE_CRASH_AFTER_REQUESTS=${knobs.crash_after_requests}`),
          200,
        );
      }
    },
  };

  let stopping = false;
  const onSignal = (sig: Deno.Signal) => {
    if (knobs.ignore_sigterm) {
      log.fake(`ignoring ${sig} (FAKE_ENGINE_IGNORE_SIGTERM=1)`);
      return;
    }
    if (stopping) return;
    stopping = true;
    if (cfg.engine === "vllm") {
      log.api("INFO", "launcher.py:101", "Shutting down FastAPI HTTP server.");
    } else {
      log.api("INFO", "", `Received ${sig}. Shutting down.`);
    }
    log.uvicorn("Shutting down");
    log.uvicorn("Finished server process [" + Deno.pid + "]");
    if (worker !== null) {
      try {
        Deno.kill(worker.pid, "SIGTERM");
      } catch {
        // Already gone.
      }
    }
    log.fake(`exiting with code 0 after ${sig}`);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => onSignal("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => onSignal("SIGINT"));
  if (knobs.crash_after_seconds !== null) {
    setTimeout(
      () => crash(rt, `FAKE_ENGINE_CRASH_AFTER_SECONDS=${knobs.crash_after_seconds}`),
      knobs.crash_after_seconds * 1000,
    );
  }

  announceStartup(rt, worker?.pid ?? null);
  // Python's warnings.warn, as SGLang's EnvInt gives it for a value it cannot read.
  if (keepAlive.warning !== null) log.stderrLine(`sglang/srt/environ.py: ${keepAlive.warning}`);
  const isVllm = cfg.engine === "vllm";

  const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${cfg.port}`;
  const uvicornUp = () => {
    log.uvicorn(`Started server process [${Deno.pid}]`);
    log.uvicorn("Waiting for application startup.");
    log.uvicorn("Application startup complete.");
  };

  if (isVllm) {
    if (cfg.headless || cfg.node_rank > 0) {
      log.api(
        "INFO",
        "api_server.py:1710",
        `Launching vLLM in headless mode (node rank ${cfg.node_rank} of ${cfg.nnodes}); no API server on this node.`,
      );
      // Only global rank 0 shows tqdm bars (vLLM's enable_tqdm).
      await load(rt, false, 1);
      log.fake(`headless rank ${cfg.node_rank} loaded; serving no HTTP, waiting for a signal`);
      return;
    }
    await load(rt, true, 1);
    rt.ready = true;
    log.api("INFO", "api_server.py:1971", `Starting vLLM API server 0 on ${url}`);
    // vLLM reads the variable as it calls serve_http, after loading.
    if (keepAlive.error !== null) badKeepAlive(log, keepAlive.error, worker?.pid ?? null);
    log.api(
      "INFO",
      "launcher.py:36",
      "Available routes are: /health, /ping, /version, /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /metrics",
    );
    listen(rt, mainRoutes("vllm"), cfg.api_keys, keepAlive.seconds, uvicornUp);
    return;
  }

  if (cfg.node_rank > 0) {
    await load(rt, false, 1);
    // A separate app without the key middleware (engine.py `launch_dummy_health_check_server`).
    listen(rt, dummyRoutes(), [], keepAlive.seconds, () => {
      log.api(
        "INFO",
        "",
        `Dummy health check server started on ${url} (node rank ${cfg.node_rank}); /health answers 200.`,
      );
    });
    return;
  }
  listen(rt, mainRoutes("sglang"), cfg.api_keys, keepAlive.seconds, () => {
    uvicornUp();
    log.uvicorn(`Uvicorn running on ${url} (Press CTRL+C to quit)`);
  });
  await load(rt, true, cfg.skip_warmup ? 1 : 0.9);
  if (!cfg.skip_warmup) {
    log.core(
      "INFO",
      "",
      "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
    );
    await sleep(knobs.load_seconds * 1000 * 0.1);
  }
  rt.ready = true;
  log.api("INFO", "", "The server is fired up and ready to roll!");
}
