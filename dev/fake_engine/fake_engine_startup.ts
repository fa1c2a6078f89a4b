/**
 * The fake engine's startup lines (dev/fake_engine/fake_engine.ts): its own banner,
 * argv and GPU environment (API keys as `***`), then the engine's config
 * lines (vLLM's `non-default args`, SGLang's `server_args=`), and the check
 * that enough GPUs are visible, which exits 1 as the real engines fail.
 *
 * @module
 */

import { SGLANG_OPEN_PREFIXES, VLLM_GUARDED_PREFIXES } from "./fake_engine_auth.ts";
import type { FlagValue } from "./fake_engine_argparse.ts";
import type { EngineConfig } from "./fake_engine_command.ts";
import { SGLANG_FLAGS, VLLM_FLAGS } from "./fake_engine_flags.ts";
import type { Runtime } from "./fake_engine_runtime.ts";
import { isFile, modelOpenProblem } from "./fake_engine_model_files.ts";
import { refuseAt } from "./fake_engine_refusal.ts";

/**
 * Logs the startup lines of `rt`'s engine; exits 1 when CUDA_VISIBLE_DEVICES
 * shows fewer GPUs than this node needs. `workerPid`: the worker child's.
 */
export function announceStartup(rt: Runtime, workerPid: number | null): void {
  const { cfg, knobs, log, version } = rt;
  const role = cfg.engine === "vllm"
    ? (cfg.headless || cfg.node_rank > 0
      ? `headless rank ${cfg.node_rank}`
      : `rank ${cfg.node_rank} (API server)`)
    : (cfg.node_rank > 0 ? `rank ${cfg.node_rank} (dummy health server)` : "rank 0 (API server)");
  log.fake(
    `llmgw FAKE ENGINE standing in for ${cfg.engine} ${version}, ${role}; no GPU is used (dev/fake_engine/fake_engine.ts)`,
  );
  log.fake(`argv: ${redactKeys(Deno.args.join(" "), cfg.api_keys)}`);
  log.fake(`GPU/NCCL environment: ${gpuEnvSummary(cfg.api_keys)}`);
  if (cfg.api_key_source !== null) {
    const guarded = cfg.engine === "vllm"
      ? `paths starting with ${VLLM_GUARDED_PREFIXES.join(", ")}`
      : `every path but those starting with ${SGLANG_OPEN_PREFIXES.join(", ")}`;
    log.fake(
      `API key required (${cfg.api_keys.length} from ${cfg.api_key_source}) on ${guarded}`,
    );
  }
  if (workerPid !== null) log.fake(`worker pid ${workerPid} (same process group)`);

  const gpuProblem = checkVisibleGpus(cfg);
  const isVllm = cfg.engine === "vllm";
  if (isVllm) {
    log.api("INFO", "api_server.py:1896", `vLLM API server version ${version}`);
    log.api(
      "INFO",
      "utils.py:328",
      `non-default args: ${
        flagDict(
          cfg.flags,
          [["model_tag", cfg.model]],
          new Set(knobs.leak_api_key ? [] : ["--api-key"]),
        )
      }`,
    );
    exitOnModelProblem(rt);
    // vLLM checks the heads against TP with the config, before any engine core starts.
    refuseAt(rt, "start", "config");
    if (cfg.executor_backend === "ray") {
      log.fake("--distributed-executor-backend ray: no Ray cluster is contacted");
    }
    log.core(
      "INFO",
      "core.py:93",
      `Initializing a V1 LLM engine (v${version}) with config: model='${cfg.model}', served_model_name=${
        cfg.served_names[0]
      }, tensor_parallel_size=${cfg.tp}, pipeline_parallel_size=${cfg.pp}, quantization=${
        cfg.quantization ?? "None"
      }, max_seq_len=${cfg.max_model_len}`,
    );
    if (cfg.nnodes > 1) {
      log.core(
        "INFO",
        "multiproc_executor.py:720",
        `nnodes=${cfg.nnodes} node_rank=${cfg.node_rank} master=${
          cfg.rendezvous ?? "127.0.0.1:29501"
        }`,
      );
    }
  } else {
    log.api(
      "INFO",
      "",
      `server_args=ServerArgs(model_path='${cfg.model}', served_model_name='${
        cfg.served_names[0]
      }', host='${cfg.host}', port=${cfg.port}, tp_size=${cfg.tp}, pp_size=${cfg.pp}, nnodes=${cfg.nnodes}, node_rank=${cfg.node_rank}, dist_init_addr=${
        cfg.rendezvous === null ? "None" : `'${cfg.rendezvous}'`
      }, quantization=${
        cfg.quantization === null ? "None" : `'${cfg.quantization}'`
      }, enable_metrics=${cfg.metrics ? "True" : "False"}${
        // Real SGLang prints the key here; the fake only when asked to.
        knobs.leak_api_key && cfg.api_keys.length > 0 ? `, api_key='${cfg.api_keys[0]}'` : ""})`,
    );
    exitOnModelProblem(rt);
  }
  if (gpuProblem !== null) {
    if (isVllm) log.core("ERROR", "core.py:710", `ValueError: ${gpuProblem}`);
    else log.core("ERROR", "", `ValueError: ${gpuProblem}`);
    log.fake("exiting with code 1 (not enough visible GPUs)");
    Deno.exit(1);
  }
}

/** Exits 1 with the engine's own lines when it cannot open its model (fake_engine_model_files.ts). */
function exitOnModelProblem(rt: Runtime): void {
  const { cfg, log } = rt;
  const engine = cfg.engine === "vllm" ? "vllm" : "sglang";
  const lines = modelOpenProblem(engine, cfg.model, (n) => Deno.env.get(n), isFile);
  if (lines === null) return;
  for (const line of lines) {
    if (engine === "vllm") log.api("ERROR", "api_server.py:1990", line);
    else log.api("ERROR", "", line);
  }
  log.fake("exiting with code 1 (the model cannot be opened)");
  Deno.exit(1);
}

/** A value as Python's repr() prints it. */
function pyRepr(value: unknown): string {
  if (typeof value === "string") {
    return `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  }
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  return "None";
}

/**
 * vLLM's `non-default args` dict. Flags in `redact` show `'***'`, as vLLM's
 * `redact_sensitive_args` prints `api_key` (engine reference §6.1).
 */
function flagDict(
  flags: Map<string, FlagValue>,
  extra: [string, unknown][] = [],
  redact: ReadonlySet<string> = new Set(),
): string {
  const entries: [string, unknown][] = [...extra];
  for (const [k, val] of flags) {
    const key = k.replace(/^-+/, "").replaceAll("-", "_");
    if (redact.has(k)) {
      entries.push([key, "***"]);
      continue;
    }
    const spec = [...VLLM_FLAGS, ...SGLANG_FLAGS].find((s) => s.names[0] === k);
    const typed = typeof val === "string" && (spec?.type === "int" || spec?.type === "float")
      ? Number(val)
      : val;
    entries.push([key, typed]);
  }
  return `{${entries.map(([k, x]) => `'${k}': ${pyRepr(x)}`).join(", ")}}`;
}

/** `text` with every API key in it replaced by `***`. */
export function redactKeys(text: string, keys: readonly string[]): string {
  return keys.reduce((t, k) => t.replaceAll(k, "***"), text);
}

/** The GPU, NCCL and engine variables, for the fake's own startup line; keys show as `***`. */
function gpuEnvSummary(apiKeys: readonly string[]): string {
  const env = Deno.env.toObject();
  const names = Object.keys(env)
    .filter((k) => /^(CUDA_|NCCL_|GLOO_|VLLM_|SGLANG_|RAY_ADDRESS$)/.test(k))
    .sort();
  if (names.length === 0) return "(none)";
  return names.map((k) =>
    k === "VLLM_API_KEY" && env[k] !== "" ? `${k}=***` : `${k}=${redactKeys(env[k], apiKeys)}`
  ).join(" ");
}

/** GPUs this node needs, checked against CUDA_VISIBLE_DEVICES when that is set. */
function checkVisibleGpus(cfg: EngineConfig): string | null {
  const cvd = Deno.env.get("CUDA_VISIBLE_DEVICES");
  if (cvd === undefined) return null;
  const visible = cvd.split(",").map((s) => s.trim()).filter((s) => s !== "" && s !== "-1").length;
  const needed = (cfg.tp * cfg.pp) / cfg.nnodes;
  if (visible >= needed) return null;
  return `this node needs ${needed} GPU(s) (tp ${cfg.tp} × pp ${cfg.pp} / nnodes ${cfg.nnodes}) but CUDA_VISIBLE_DEVICES=${
    JSON.stringify(cvd)
  } makes ${visible} visible`;
}
