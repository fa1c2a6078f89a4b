/**
 * How long llmgw's clients of an engine keep an idle connection, and the
 * engines' own keep-alive variables a profile's `env` may set only above it
 * (engine reference §11). Both engines serve through uvicorn, which closes a
 * connection idle for `timeout_keep_alive` seconds (5 by default). A client
 * that reuses a connection idle that long may send a request just as the
 * engine closes it: the request fails, or is sent twice. So llmgw's clients
 * drop idle connections first, and an engine must keep them longer.
 *
 * @module
 */

/** uvicorn's `timeout_keep_alive` default, which vLLM and SGLang both keep. */
export const UVICORN_KEEP_ALIVE_SECONDS = 5;

/**
 * llmgw's clients of an engine (the agent's engine proxy, the gateway's
 * upstream pool) drop a connection idle this long, under uvicorn's 5 s.
 */
export const ENGINE_CLIENT_IDLE_MS = 4_000;

/** Each engine's variable for uvicorn's `timeout_keep_alive` (engine reference §11). */
export const ENGINE_KEEP_ALIVE_VARS = {
  vllm: "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
  sglang: "SGLANG_TIMEOUT_KEEP_ALIVE",
} as const;

/** The least keep-alive, in whole seconds, that outlives {@link ENGINE_CLIENT_IDLE_MS}. */
export const MIN_ENGINE_KEEP_ALIVE_SECONDS = Math.floor(ENGINE_CLIENT_IDLE_MS / 1000) + 1;

/** Python's `int(text)`: digits with an optional sign, `_` between digits, blanks around. */
const PY_INT = /^\s*[+-]?\d+(?:_\d+)*\s*$/;

/** `int(text)` as Python reads it, as both engines read their variable; null where it raises. */
export function pythonInt(text: string): number | null {
  return PY_INT.test(text) ? Number(text.trim().replaceAll("_", "")) : null;
}

/**
 * Why a profile's `env` may not set `key` to `value`, or null when it may:
 * an engine keep-alive variable must be a whole number of seconds (vLLM
 * fails after loading the model on one `int()` cannot read; SGLang warns and
 * keeps 5) of at least {@link MIN_ENGINE_KEEP_ALIVE_SECONDS}.
 */
export function engineKeepAliveProblem(key: string, value: string): string | null {
  if (!Object.values<string>(ENGINE_KEEP_ALIVE_VARS).includes(key)) return null;
  const min = MIN_ENGINE_KEEP_ALIVE_SECONDS;
  const need = `at least ${min}: llmgw's clients drop an engine connection idle for ${
    ENGINE_CLIENT_IDLE_MS / 1000
  } s, so the engine must keep it longer, or a request sent as the engine closes it fails or is sent twice (docs/engine_reference.md §11)`;
  const seconds = pythonInt(value);
  if (seconds === null) {
    return `must be a whole number of seconds (the engine reads it with Python's int()), ${need}; got ${
      JSON.stringify(value)
    }`;
  }
  if (seconds < min) return `is ${seconds} s; it must be ${need}`;
  return null;
}
