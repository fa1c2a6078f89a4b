/**
 * The engines llmgw knows: vLLM and SGLang built in, plus executable
 * plugins (design §8). The placement result names the engine; the supervisor
 * and `llmgw plan` look its driver up here.
 *
 * @module
 */
import { type EngineDriver, loadExecPlugins } from "./exec_plugin.ts";
import { prepareShard } from "./prepare.ts";
import { sglangPlugin } from "./sglang.ts";
import type { EnginePlugin } from "./types.ts";
import { vllmPlugin } from "./vllm.ts";

/** The built-in plugins. */
export const BUILTIN_PLUGINS: readonly EnginePlugin[] = [vllmPlugin, sglangPlugin];

/** Wraps an in-process plugin as a driver. */
export function inProcessDriver(plugin: EnginePlugin, source = "builtin"): EngineDriver {
  return {
    name: plugin.name,
    source,
    quantizations: plugin.quantizations,
    version_command: plugin.version_command,
    ...(plugin.api_key === undefined ? {} : { api_key: plugin.api_key }),
    prepare: (launch) => Promise.resolve(prepareShard(plugin, launch)),
  };
}

/** Engines by name. */
export class EngineRegistry {
  readonly #drivers = new Map<string, EngineDriver>();

  /**
   * Creates a registry. A later driver with a taken name is refused with a
   * problem: a plugin cannot replace a built-in engine by accident.
   */
  constructor(drivers: readonly EngineDriver[], readonly problems: string[] = []) {
    for (const d of drivers) {
      const taken = this.#drivers.get(d.name);
      if (taken !== undefined) {
        this.problems.push(
          `engine plugin ${d.source} is named ${d.name}, already provided by ${taken.source}; ignored`,
        );
        continue;
      }
      this.#drivers.set(d.name, d);
    }
  }

  /** The built-in engines only. */
  static builtin(): EngineRegistry {
    return new EngineRegistry(BUILTIN_PLUGINS.map((p) => inProcessDriver(p)));
  }

  /** The built-in engines plus the executable plugins found in `pluginDirs`. */
  static async load(pluginDirs: readonly string[] = []): Promise<EngineRegistry> {
    const { drivers, problems } = await loadExecPlugins(pluginDirs);
    return new EngineRegistry(
      [...BUILTIN_PLUGINS.map((p) => inProcessDriver(p)), ...drivers],
      problems,
    );
  }

  /** The driver for an engine name, if any. */
  get(name: string): EngineDriver | undefined {
    return this.#drivers.get(name);
  }

  /** Every engine name (for deployment validation, design §6.2). */
  names(): Set<string> {
    return new Set(this.#drivers.keys());
  }
}

/** Plugin directories from `LLMGW_ENGINE_PLUGINS` (colon-separated), when set. */
export function pluginDirsFromEnv(): string[] {
  const value = Deno.env.get("LLMGW_ENGINE_PLUGINS");
  return value === undefined ? [] : value.split(":").filter((d) => d !== "");
}
