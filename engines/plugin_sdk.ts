/**
 * The engine plugin SDK: {@link serveEnginePlugin} turns an
 * {@link EnginePlugin} object into an executable that speaks llmgw's engine
 * plugin protocol (docs/plugins.md). It imports nothing but the plugin
 * types, so a plugin script runs with no configuration and no permissions.
 *
 * Protocol (version {@link ENGINE_API_VERSION}), one call per process:
 * - `llmgw-engine-NAME describe` prints
 *   `{"api_version", "name", "quantizations", "version_command"}`, plus
 *   `"api_key": {"env": NAME} | {"flag": NAME} | {"config_file": {"flag":
 *   NAME, "field": KEY}}` when the engine takes an API key (design §11.2,
 *   engines/types.ts `EngineApiKey`).
 * - `llmgw-engine-NAME shard` reads a {@link ShardLaunch} as JSON on stdin
 *   and prints `{"problems", "command", "probes", "metrics"}`
 *   (command and probes are null when there are problems).
 * - `llmgw-engine-NAME parse-version` reads the output of `version_command`
 *   on stdin and prints `{"version": "…" | null}`.
 * Exit status 0 with JSON on stdout; anything else is a plugin failure.
 *
 * @module
 */
import {
  ENGINE_API_VERSION,
  type EngineApiKey,
  type EnginePlugin,
  type ShardLaunch,
  type ShardSpec,
} from "./types.ts";

export * from "./types.ts";
import { errorMessage } from "../text/error_message.ts";

/** What `describe` prints. */
export interface PluginDescription {
  /** Protocol version. */
  api_version: number;
  /** The engine name. */
  name: string;
  /** Quantizations it accepts. */
  quantizations: string[];
  /** How to ask a host for the installed version (design §14). */
  version_command: string[];
  /** How the engine takes its API key; absent when it takes none. */
  api_key?: EngineApiKey;
}

/**
 * Asks a plugin about one shard: validate, then command and probes only when
 * valid. Its answer, before llmgw's shared checks and environment.
 */
export function askPlugin(plugin: EnginePlugin, launch: ShardLaunch): ShardSpec {
  const metrics = plugin.metrics(launch.engine_version);
  const problems = plugin.validate(launch);
  if (problems.length > 0) return { problems, command: null, probes: null, metrics };
  return { problems, command: plugin.command(launch), probes: plugin.probes(launch), metrics };
}

/** Where {@link serveEnginePlugin} reads and writes; injectable for tests. */
export interface PluginIo {
  /** The verb and its arguments. */
  args: string[];
  /** Reads all of standard input. */
  readInput: () => Promise<string>;
  /** Writes to standard output. */
  write: (text: string) => void;
  /** Writes to standard error. */
  error: (text: string) => void;
}

/**
 * Runs the plugin protocol once and returns the exit status. A plugin
 * script ends with `Deno.exit(await serveEnginePlugin(myPlugin))`.
 */
export async function serveEnginePlugin(plugin: EnginePlugin, io?: PluginIo): Promise<number> {
  const { args, readInput, write, error } = io ?? defaultIo();
  try {
    switch (args[0]) {
      case "describe": {
        const d: PluginDescription = {
          api_version: ENGINE_API_VERSION,
          name: plugin.name,
          quantizations: [...plugin.quantizations],
          version_command: [...plugin.version_command],
          ...(plugin.api_key === undefined ? {} : { api_key: { ...plugin.api_key } }),
        };
        write(JSON.stringify(d) + "\n");
        return 0;
      }
      case "shard": {
        // The agent validated the launch against its schema before sending it
        // (protocol/shard_launch.ts); the SDK takes no dependencies, so plugins
        // run with `--no-config`, and checks only the format version here.
        const launch = JSON.parse(await readInput()) as ShardLaunch;
        if (launch?.api_version !== ENGINE_API_VERSION) {
          error(
            `${plugin.name}: launch format ${launch?.api_version} is not ${ENGINE_API_VERSION}\n`,
          );
          return 2;
        }
        write(JSON.stringify(askPlugin(plugin, launch)) + "\n");
        return 0;
      }
      case "parse-version":
        write(JSON.stringify({ version: plugin.parseVersion(await readInput()) }) + "\n");
        return 0;
      default:
        error(
          `${plugin.name}: expected one of describe, shard, parse-version; got ${
            args[0] ?? "nothing"
          }\n`,
        );
        return 2;
    }
  } catch (e) {
    error(`${plugin.name}: ${errorMessage(e)}\n`);
    return 1;
  }
}

function defaultIo(): PluginIo {
  const encoder = new TextEncoder();
  return {
    args: Deno.args,
    readInput: () => new Response(Deno.stdin.readable).text(),
    write: (t) => Deno.stdout.writeSync(encoder.encode(t)),
    error: (t) => Deno.stderr.writeSync(encoder.encode(t)),
  };
}
