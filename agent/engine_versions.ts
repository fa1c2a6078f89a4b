/**
 * The engine versions installed on this host (design §14), reported when the
 * agent registers: each engine's `version_command` is run with the
 * environment engines get (so an operator's PATH for a virtualenv counts),
 * and its output parsed by the engine's plugin. An engine that is not
 * installed, or whose command fails or hangs, is simply left out.
 *
 * @module
 */
import { runCommand } from "../discovery/run_command.ts";
import type { EngineRegistry } from "../engines/registry.ts";
import { BUILTIN_PLUGINS } from "../engines/registry.ts";
import { engineBaseEnv } from "../supervisor/engine_env.ts";

/** Limits of the version probe. */
export interface EngineVersionOptions {
  /** Extra environment, as engines get it (the supervisor's `env`). */
  env?: Record<string, string>;
  /** Per command. Default 20 s (a Python engine imports slowly). */
  timeoutMs?: number;
  /** Stops waiting (the agent is stopping). */
  signal?: AbortSignal;
}

const MAX_OUTPUT = 64 * 1024;

/** Runs `argv` with `env` in its own process group; its output, or null. */
async function runVersionCommand(
  argv: readonly string[],
  env: Record<string, string>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<string | null> {
  if (argv.length === 0 || signal?.aborted) return null;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
  } catch {
    return null; // Not installed.
  }
  const kill = () => {
    try {
      Deno.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  };
  const timer = setTimeout(kill, timeoutMs);
  signal?.addEventListener("abort", kill, { once: true });
  try {
    const out = await child.output();
    if (!out.success) return null;
    const dec = new TextDecoder();
    return (dec.decode(out.stdout) + "\n" + dec.decode(out.stderr)).slice(0, MAX_OUTPUT);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", kill);
  }
}

/**
 * Asks an executable plugin to parse its engine's version output
 * (`llmgw-engine-NAME parse-version`, docs/plugins.md).
 */
async function parseWithExecPlugin(path: string, output: string): Promise<string | null> {
  try {
    const out = await runCommand(path, ["parse-version"], {
      input: output,
      timeoutMs: 10_000,
      maxOutputBytes: 64 * 1024,
    });
    if (out.code !== 0) return null;
    const v = (JSON.parse(out.stdout) as { version?: unknown }).version;
    return typeof v === "string" && v !== "" ? v : null;
  } catch {
    return null;
  }
}

/** Engine name → installed version, for every engine in `registry` whose version is known. */
export async function engineVersions(
  registry: EngineRegistry,
  options: EngineVersionOptions = {},
): Promise<Record<string, string>> {
  const env = { ...engineBaseEnv(), ...options.env };
  const timeoutMs = options.timeoutMs ?? 20_000;
  const names = [...registry.names()].sort();
  const found = await Promise.all(names.map(async (name): Promise<[string, string | null]> => {
    const driver = registry.get(name)!;
    const output = await runVersionCommand(driver.version_command, env, timeoutMs, options.signal);
    if (output === null) return [name, null];
    const builtin = BUILTIN_PLUGINS.find((p) => p.name === name);
    if (builtin !== undefined && driver.source === "builtin") {
      return [name, builtin.parseVersion(output)];
    }
    return [name, await parseWithExecPlugin(driver.source, output)];
  }));
  const versions: Record<string, string> = {};
  for (const [name, v] of found) if (v !== null) versions[name] = v;
  return versions;
}
