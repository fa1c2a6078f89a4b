/**
 * The fake engine's behaviour knobs (dev/fake_engine/fake_engine.ts): the argv must
 * stay the real engine's, so behaviour is tuned with `FAKE_ENGINE_*`
 * environment variables (dev/fake_engine/README.md lists them).
 *
 * @module
 */

import {
  ENGINE_KEEP_ALIVE_VARS,
  pythonInt,
  UVICORN_KEEP_ALIVE_SECONDS,
} from "../../engines/engine_keep_alive.ts";

/** The engine being imitated. */
export type EngineName = "vllm" | "sglang";

/** Behaviour knobs, from `FAKE_ENGINE_*` environment variables. */
export interface Knobs {
  /** FAKE_ENGINE_LOAD_SECONDS (default 2): from start to ready. */
  load_seconds: number;
  /** FAKE_ENGINE_WORKER=1: fork a worker child in the same process group. */
  worker: boolean;
  /** FAKE_ENGINE_CRASH_AFTER_REQUESTS=N: exit 1 after N completed completions. */
  crash_after_requests: number | null;
  /** FAKE_ENGINE_CRASH_AFTER_SECONDS=S: exit 1 with a CUDA error S seconds after start. */
  crash_after_seconds: number | null;
  /** FAKE_ENGINE_NEVER_READY=1: loading never finishes. */
  never_ready: boolean;
  /** FAKE_ENGINE_IGNORE_SIGTERM=1: SIGTERM and SIGINT are logged and ignored (leader and worker). */
  ignore_sigterm: boolean;
  /** FAKE_ENGINE_TOKENS (default 8): tokens per completion (capped by max_tokens). */
  tokens: number;
  /** FAKE_ENGINE_TOKEN_DELAY_MS (default 5): delay before each token. */
  token_delay_ms: number;
  /** FAKE_ENGINE_PROGRESS: `cr` (default; tqdm's `\r` redraws) or `lines` (one line per update). */
  progress: "cr" | "lines";
  /** FAKE_ENGINE_ACCESS_LOG=0 turns off uvicorn-style access lines. */
  access_log: boolean;
  /** FAKE_ENGINE_WORKER_MAX_SECONDS (default 3600): a worker's safety lifetime. */
  worker_max_seconds: number;
  /**
   * FAKE_ENGINE_LEAK_API_KEY=1: the startup log prints the API key as the real
   * engines can (SGLang's `server_args=` line; vLLM's `non-default args` for
   * `--api-key` before it redacted them), to test that llmgw scrubs engine logs.
   */
  leak_api_key: boolean;
  /**
   * FAKE_ENGINE_GPU_MEMORY_MIB: each GPU's memory, as `nvidia-smi` reports
   * it; the model's weights and KV cache are checked against it (×
   * the engine's memory fraction). Unset: no memory is checked.
   */
  gpu_memory_mib: number | null;
}

/** A knob with a bad value. */
export class KnobError extends Error {
  /** `message` names the variable and the value refused. */
  constructor(message: string) {
    super(message);
    this.name = "KnobError";
  }
}

/** The version the fake reports: FAKE_ENGINE_VERSION, else 0.11.1 (vLLM) or 0.5.3 (SGLang). */
export function knobVersion(
  engine: EngineName,
  env: (k: string) => string | undefined = envGet,
): string {
  return env("FAKE_ENGINE_VERSION") ?? (engine === "vllm" ? "0.11.1" : "0.5.3");
}

/** An idle keep-alive connection's life, from the engine's own variable. */
export interface KeepAlive {
  /** Seconds an idle keep-alive connection stays open (uvicorn's `timeout_keep_alive`). */
  seconds: number;
  /** The warning SGLang prints for a value it cannot read (it then uses 5); null if none. */
  warning: string | null;
  /**
   * vLLM's error for a value `int()` cannot read (`ValueError: …`), raised
   * only when the API server starts, after the model loaded; null if none.
   */
  error: string | null;
}

/** Python's `repr()` of a string, as its `int()` error quotes it (common cases). */
function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const body = text.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll("\t", "\\t");
  return quote + (quote === "'" ? body.replaceAll("'", "\\'") : body) + quote;
}

/**
 * The keep-alive timeout the engine passes to uvicorn (engine reference §11):
 * vLLM reads `VLLM_HTTP_TIMEOUT_KEEP_ALIVE` with `int()` (a value it cannot
 * read is a ValueError when the API server starts: {@link KeepAlive.error}),
 * SGLang reads `SGLANG_TIMEOUT_KEEP_ALIVE` as an EnvInt (a value it cannot
 * read is a warning, then the default); both default to 5.
 */
export function readKeepAlive(
  engine: EngineName,
  env: (k: string) => string | undefined = envGet,
): KeepAlive {
  const key = ENGINE_KEEP_ALIVE_VARS[engine];
  const raw = env(key);
  const ok = { seconds: UVICORN_KEEP_ALIVE_SECONDS, warning: null, error: null };
  if (raw === undefined) return ok;
  const seconds = pythonInt(raw);
  if (seconds !== null) return { ...ok, seconds };
  if (engine === "vllm") {
    return { ...ok, error: `ValueError: invalid literal for int() with base 10: ${pyRepr(raw)}` };
  }
  return {
    ...ok,
    warning: `UserWarning: Invalid value for ${key}: "${raw}" is not a valid integer value, ` +
      `using default "${UVICORN_KEEP_ALIVE_SECONDS}"`,
  };
}

/** The process environment, as the knobs and the command line read it. */
export function envGet(key: string): string | undefined {
  return Deno.env.get(key);
}

/** Reads the knobs; throws {@link KnobError} on a value that is not understood. */
export function readKnobs(env: (k: string) => string | undefined = envGet): Knobs {
  const num = (key: string, dflt: number | null, integer: boolean): number | null => {
    const raw = env(key);
    if (raw === undefined || raw.trim() === "") return dflt;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
      throw new KnobError(
        `${key} must be a ${integer ? "whole" : ""} number ≥ 0, got ${JSON.stringify(raw)}`,
      );
    }
    return n;
  };
  const bool = (key: string): boolean => {
    const raw = (env(key) ?? "").trim().toLowerCase();
    if (["", "0", "false", "no", "off"].includes(raw)) return false;
    if (["1", "true", "yes", "on"].includes(raw)) return true;
    throw new KnobError(`${key} must be 1 or 0, got ${JSON.stringify(env(key))}`);
  };
  const progress = env("FAKE_ENGINE_PROGRESS") ?? "cr";
  if (progress !== "cr" && progress !== "lines") {
    throw new KnobError(
      `FAKE_ENGINE_PROGRESS must be cr or lines, got ${JSON.stringify(progress)}`,
    );
  }
  const accessRaw = env("FAKE_ENGINE_ACCESS_LOG");
  const gpuMemory = num("FAKE_ENGINE_GPU_MEMORY_MIB", null, false);
  if (gpuMemory === 0) throw new KnobError("FAKE_ENGINE_GPU_MEMORY_MIB must be more than 0, got 0");
  return {
    load_seconds: num("FAKE_ENGINE_LOAD_SECONDS", 2, false)!,
    worker: bool("FAKE_ENGINE_WORKER"),
    crash_after_requests: num("FAKE_ENGINE_CRASH_AFTER_REQUESTS", null, true),
    crash_after_seconds: num("FAKE_ENGINE_CRASH_AFTER_SECONDS", null, false),
    never_ready: bool("FAKE_ENGINE_NEVER_READY"),
    ignore_sigterm: bool("FAKE_ENGINE_IGNORE_SIGTERM"),
    tokens: num("FAKE_ENGINE_TOKENS", 8, true)!,
    token_delay_ms: num("FAKE_ENGINE_TOKEN_DELAY_MS", 5, false)!,
    progress,
    access_log: accessRaw === undefined ? true : bool("FAKE_ENGINE_ACCESS_LOG"),
    worker_max_seconds: num("FAKE_ENGINE_WORKER_MAX_SECONDS", 3600, false)!,
    leak_api_key: bool("FAKE_ENGINE_LEAK_API_KEY"),
    gpu_memory_mib: gpuMemory,
  };
}
