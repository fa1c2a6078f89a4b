/**
 * The discovery flags `llmgw agent inventory` and `llmgw agent run` share:
 * `--config FILE`, `--nvidia-smi`, `--sysfs-root` and `--fabric` (design §5.2,
 * §5.5). Flags win over the config file; a `--fabric` replaces the config's
 * fabric of the same name.
 *
 * @module
 */
import type { PortRange } from "../supervisor/port_allocator.ts";
import { type FabricConfig, FabricConfigError, parseFabricFlag } from "../discovery/mod.ts";
import {
  type AgentConfig,
  AgentConfigError,
  mergeFabrics,
  parseAgentConfig,
  resolveConfigPaths,
} from "../agent/config.ts";
import { UsageError } from "./usage_error.ts";

/** The flag values as node:util parseArgs gives them. */
export interface DiscoveryFlagValues {
  /** `--config FILE`. */
  config?: string;
  /** `--nvidia-smi PATH`. */
  "nvidia-smi"?: string;
  /** `--sysfs-root DIR`. */
  "sysfs-root"?: string;
  /** `--fabric NAME=HCA,…`, repeatable. */
  fabric?: string[];
}

/** Where discovery reads from and the fabric assignment, resolved. */
export interface DiscoverySettings {
  /** nvidia-smi executable, when set. */
  nvidiaSmi?: string;
  /** sysfs root, when set. */
  sysfsRoot?: string;
  /** Fabric name → adapters. */
  fabrics: FabricConfig;
  /** The engines' port range from the config file, when set. */
  ports?: PortRange;
  /** The state directory from the config file, when set. */
  stateDir?: string;
  /** The control planes' URLs from the config file, when set. */
  control?: string[];
  /** The model cache's settings from the config file (issue #25), each when set. */
  models: ModelConfig;
}

/** The config file's model cache keys (agent/config.ts), paths resolved. */
export type ModelConfig = Pick<
  AgentConfig,
  "model_cache" | "download_rate" | "cache_high" | "cache_low" | "hf_token_file"
>;

/**
 * Reads the config file (if any) and merges the flags over it.
 *
 * @throws {UsageError} Naming the command, the file or flag, and what is wrong.
 */
export async function discoverySettings(
  command: string,
  values: DiscoveryFlagValues,
): Promise<DiscoverySettings> {
  let configFabrics: FabricConfig = {};
  let ports: PortRange | undefined;
  let stateDir: string | undefined;
  let control: string[] | undefined;
  let models: ModelConfig = {};
  let nvidiaSmi = values["nvidia-smi"];
  let sysfsRoot = values["sysfs-root"];
  if (values.config !== undefined) {
    let text: string;
    try {
      text = await Deno.readTextFile(values.config);
    } catch (e) {
      throw new UsageError(
        `${command}: cannot read --config ${values.config}: ${
          e instanceof Deno.errors.NotFound ? "no such file" : String(e)
        }`,
      );
    }
    try {
      const config = resolveConfigPaths(parseAgentConfig(text, values.config), values.config);
      configFabrics = config.fabrics ?? {};
      nvidiaSmi ??= config.nvidia_smi;
      sysfsRoot ??= config.sysfs_root;
      ports = config.ports;
      stateDir = config.state_dir;
      control = config.control;
      const { model_cache, download_rate, cache_high, cache_low, hf_token_file } = config;
      models = { model_cache, download_rate, cache_high, cache_low, hf_token_file };
    } catch (e) {
      if (e instanceof AgentConfigError) throw new UsageError(e.message);
      throw e;
    }
  }
  try {
    return {
      nvidiaSmi,
      sysfsRoot,
      fabrics: mergeFabrics(configFabrics, (values.fabric ?? []).map(parseFabricFlag)),
      ...(ports === undefined ? {} : { ports }),
      ...(stateDir === undefined ? {} : { stateDir }),
      ...(control === undefined ? {} : { control }),
      models,
    };
  } catch (e) {
    if (e instanceof FabricConfigError) throw new UsageError(e.message);
    throw e;
  }
}
