/**
 * Spawning an engine (design §9.1), and the key it is started with: in a session and process group of its
 * own, with a clean environment, and its stdout and stderr written straight
 * to its log file (log_file.ts), so an agent restart cannot break its pipe.
 *
 * @module
 */
import { join } from "node:path";
import { ENGINE_KEY_CONFIG_FILE } from "../engines/api_key.ts";
import type { EngineApiKey } from "../engines/types.ts";
import {
  createOwnerOnlyDir,
  randomSecret,
  readSecretFile,
  writeSecretFile,
} from "../http/secret_file.ts";

/** The wrapper's script: `$1` is the log, the rest the engine's argv. */
const SPAWN_WRAPPER = 'log=$1; shift; mask=$(umask); umask 077; exec >>"$log" 2>&1; ' +
  'umask "$mask"; exec "$@"';

/**
 * Starts `argv` with `env` only, its output appended to `logPath`. A
 * `/bin/sh` wrapper opens the file and `exec`s, so the pid is the engine's.
 * A log it creates is owner-only (umask 077 for the open alone: the engine
 * itself keeps the agent's umask for its caches).
 *
 * @throws {Error} When the process cannot be spawned.
 */
export function spawnEngine(
  logPath: string,
  argv: readonly string[],
  env: Record<string, string>,
): Deno.ChildProcess {
  return new Deno.Command("/bin/sh", {
    args: ["-c", SPAWN_WRAPPER, "llmgw-shard", logPath, ...argv],
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
}

/** Where a shard's engine key is kept: `engine_key` in its directory (0600). */
export function engineKeyPath(dir: string): string {
  return join(dir, "engine_key");
}

/**
 * The shard's engine key, kept in its directory (owner-only) so restarts
 * and a restarted agent use the same one: vLLM hashes its key into its
 * compile cache, and a new key every start would miss it every time.
 * `create: false` only reads it (an adopted engine has one already).
 * A new key starts `ek-`, never `-`: argparse reads a value starting with
 * `-` as an option, so `--api-key -…` (or SGLang's file entry, which becomes
 * that argument) would fail the engine's start for good.
 */
export function engineKey(dir: string, create: boolean): string | null {
  const path = engineKeyPath(dir);
  const stored = readSecretFile(path);
  if (!create) return stored;
  // An older agent's key starting with `-` (one in 64) is replaced. That is
  // safe: an engine taking it as an argument refused it, so none ever
  // started with it; one taking it from the environment (vLLM) only misses
  // its compile cache once.
  if (stored !== null && !stored.startsWith("-")) return stored;
  createOwnerOnlyDir(dir);
  const key = `ek-${randomSecret()}`;
  writeSecretFile(path, key + "\n");
  return key;
}

/**
 * What to add to an adopted engine's event when its key is in its command
 * line although its engine now takes it from the environment or a file:
 * an older agent started it with `--api-key KEY`, and every local user can
 * read that in `ps` until the shard restarts. "" otherwise. Never the key.
 */
export function adoptedKeyNote(
  cmdline: readonly string[],
  key: string | null,
  form: EngineApiKey | undefined,
): string {
  if (key === null || form === undefined || "flag" in form) return "";
  if (!cmdline.some((arg) => arg.includes(key))) return "";
  const moved = "env" in form ? `its environment (${form.env})` : ENGINE_KEY_CONFIG_FILE;
  return `; its engine key is in its command line (an older agent started it so), where every local user can read it in ps, until the shard restarts and takes it from ${moved}`;
}
