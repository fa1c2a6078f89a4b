/**
 * Spawning an engine (design §9.1), and the key it is started with: in a session and process group of its
 * own, with a clean environment, and its stdout and stderr written straight
 * to its log file (log_file.ts), so an agent restart cannot break its pipe.
 *
 * @module
 */
import { join } from "node:path";
import { loadOrCreateSecret, readSecretFile } from "../http/secret_file.ts";

/**
 * Starts `argv` with `env` only, its output appended to `logPath`. A
 * `/bin/sh` wrapper opens the file and `exec`s, so the pid is the engine's.
 *
 * @throws {Error} When the process cannot be spawned.
 */
export function spawnEngine(
  logPath: string,
  argv: readonly string[],
  env: Record<string, string>,
): Deno.ChildProcess {
  return new Deno.Command("/bin/sh", {
    args: ["-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "llmgw-shard", logPath, ...argv],
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
}

/**
 * The shard's engine key, kept in its directory (owner-only) so restarts
 * and a restarted agent use the same one: vLLM hashes its key into its
 * compile cache, and a new key every start would miss it every time.
 * `create: false` only reads it (an adopted engine has one already).
 */
export function engineKey(dir: string, create: boolean): string | null {
  const path = join(dir, "engine_key");
  if (!create) return readSecretFile(path);
  Deno.mkdirSync(dir, { recursive: true });
  return loadOrCreateSecret(path);
}
