/**
 * API keys as each engine checks them (dev/fake_engine/fake_engine.ts; engine
 * reference §6): which paths need a key, which headers carry it, and the
 * 401 a refused request gets.
 *
 * @module
 */

import type { EngineName } from "./fake_engine_command.ts";
import { json } from "./fake_engine_http.ts";

/**
 * Path prefixes vLLM's `AuthenticationMiddleware` checks, as `str.startswith`
 * (`GUARDED_PREFIX`, vllm/entrypoints/serve/middleware/authenticate.py;
 * engine reference §6.1). Everything else (`/health`, `/metrics`, `/ping`,
 * `/version`, `/invocations`, `/tokenize`, …) is open.
 */
export const VLLM_GUARDED_PREFIXES: readonly string[] = ["/v1", "/v2", "/inference", "/cohere"];

/**
 * Path prefixes SGLang's API-key middleware leaves open
 * (`decide_request_auth`, python/sglang/srt/utils/auth.py; engine reference
 * §6.2); it checks everything else, `/v1/models` included.
 */
export const SGLANG_OPEN_PREFIXES: readonly string[] = ["/health", "/ready", "/metrics"];

/** Equal strings, compared in time that depends on the length only (as the engines do). */
function sameSecret(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  }
  return diff === 0;
}

/** The credential of `Authorization: <scheme> <credential>` when the scheme is Bearer (any case). */
function bearer(headers: Headers): string | null {
  const value = headers.get("authorization");
  if (value === null) return null;
  const space = value.indexOf(" ");
  // Python's partition/split at the first space: "Bearer  k" presents " k".
  if (space < 0 || value.slice(0, space).toLowerCase() !== "bearer") return null;
  return value.slice(space + 1);
}

/**
 * Whether a request passes the engine's API-key check (engine reference
 * §6): always when there are no keys or for `OPTIONS` (CORS preflight).
 * vLLM checks only {@link VLLM_GUARDED_PREFIXES} and takes
 * `Authorization: Bearer KEY` with any of its keys; SGLang checks all but
 * {@link SGLANG_OPEN_PREFIXES} and also takes `x-api-key: KEY`. `path` is
 * the decoded path, as the engines' ASGI servers see it.
 */
export function apiKeyAllows(
  engine: EngineName,
  keys: readonly string[],
  method: string,
  path: string,
  headers: Headers,
): boolean {
  if (keys.length === 0 || method === "OPTIONS") return true;
  const presented = bearer(headers);
  if (engine === "vllm") {
    if (!VLLM_GUARDED_PREFIXES.some((p) => path.startsWith(p))) return true;
    // Every key is compared, so the time taken does not say which one matched.
    let ok = false;
    for (const k of keys) ok = sameSecret(presented ?? "", k) || ok;
    return ok;
  }
  if (SGLANG_OPEN_PREFIXES.some((p) => path.startsWith(p))) return true;
  const xApiKey = headers.get("x-api-key");
  return (presented !== null && sameSecret(presented, keys[0])) ||
    (xApiKey !== null && xApiKey !== "" && sameSecret(xApiKey, keys[0]));
}

/** The percent-decoded path (what an ASGI app's `scope["path"]` holds); the raw one when malformed. */
export function decodedPath(pathname: string): string {
  try {
    return decodeURIComponent(pathname);
  } catch {
    return pathname;
  }
}

/** What vLLM and SGLang answer a request their API-key check refuses. */
export const UNAUTHORIZED = (): Response => json(401, { error: "Unauthorized" });
