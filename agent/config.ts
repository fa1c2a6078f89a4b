/**
 * The agent's configuration file (JSON): where discovery reads from and which
 * adapters belong to which fabric (design §5.2, §5.5).
 *
 * @module
 */
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { type FabricConfig, validateFabricConfig } from "../discovery/mod.ts";
import { validatePortRange } from "../supervisor/port_allocator.ts";
import { errorMessage } from "../text/error_message.ts";
import { parseDownloadRate } from "./model_cache/download_rate.ts";
import { parseWatermark } from "./model_cache/eviction_plan.ts";

/** The schema of the agent config file; field names are snake_case. */
export const AgentConfigSchema = z.object({
  /** nvidia-smi executable (design §5.5). */
  nvidia_smi: z.string().min(1).optional(),
  /** sysfs root (design §5.5). */
  sysfs_root: z.string().min(1).optional(),
  /** Fabric name → adapters, e.g. `{"ib-a": ["mlx5_0", "mlx5_1:1"]}` (design §5.2). */
  fabrics: z.record(z.string(), z.array(z.string())).optional(),
  /** The ports the agent gives its engines, e.g. `{"from": 20000, "to": 28999}` (design §8). */
  ports: z.object({ from: z.number().int(), to: z.number().int() }).strict().optional(),
  /** The agent's state directory (`--state-dir`). */
  state_dir: z.string().min(1).optional(),
  /** The control planes' URLs, in order of preference (`--control`; issue #15). */
  control: z.array(z.string().min(1)).min(1).optional(),
  /** The model cache directory (`--model-cache`; default `<state_dir>/models`; issue #25). */
  model_cache: z.string().min(1).optional(),
  /** The agent's download rate limit (`--download-rate`), e.g. `"200MiB/s"`. */
  download_rate: z.string().optional(),
  /** The model cache's high disk watermark in percent (`--cache-high`). */
  cache_high: z.union([z.number(), z.string()]).optional(),
  /** The model cache's low disk watermark in percent (`--cache-low`). */
  cache_low: z.union([z.number(), z.string()]).optional(),
  /** A file holding the hub token, mode 0600 (else `HF_TOKEN` from the agent's environment). */
  hf_token_file: z.string().min(1).optional(),
}).strict();

/** The parsed agent config. */
export type AgentConfig = z.infer<typeof AgentConfigSchema>;

/** Raised when the config file cannot be used; the message names the file and field. */
export class AgentConfigError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "AgentConfigError";
  }
}

/**
 * Parses and validates the agent config text.
 *
 * @param text The file's contents.
 * @param where The file name, for messages.
 * @throws {AgentConfigError} Naming the file, the field path and what was expected.
 */
export function parseAgentConfig(text: string, where: string): AgentConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new AgentConfigError(
      `Cannot parse ${where}: not valid JSON (${errorMessage(e)})`,
    );
  }
  const result = AgentConfigSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    const path = issue.path.length === 0 ? "(top level)" : issue.path.join(".");
    throw new AgentConfigError(`Cannot use ${where}: at ${path}: ${issue.message}`);
  }
  try {
    validateFabricConfig(result.data.fabrics ?? {}, `${where} fabrics`);
    if (result.data.ports !== undefined) validatePortRange(result.data.ports, `${where} ports`);
    const d = result.data;
    if (d.download_rate !== undefined) parseDownloadRate(d.download_rate, `${where} download_rate`);
    if (d.cache_high !== undefined) parseWatermark(String(d.cache_high), `${where} cache_high`);
    if (d.cache_low !== undefined) parseWatermark(String(d.cache_low), `${where} cache_low`);
  } catch (e) {
    throw new AgentConfigError(errorMessage(e));
  }
  return result.data;
}

/** Merges fabrics: a `--fabric` flag replaces a config entry of the same name. */
export function mergeFabrics(config: FabricConfig, flags: [string, string[]][]): FabricConfig {
  const merged: FabricConfig = { ...config };
  for (const [name, hcas] of flags) merged[name] = hcas;
  validateFabricConfig(merged, "fabrics");
  return merged;
}

/**
 * Resolves the config's relative paths against the directory of the file
 * they were written in, as an operator expects of a config file.
 */
export function resolveConfigPaths(config: AgentConfig, configPath: string): AgentConfig {
  const base = dirname(resolve(configPath));
  return {
    ...config,
    nvidia_smi: config.nvidia_smi === undefined || !config.nvidia_smi.includes("/")
      ? config.nvidia_smi
      : resolve(base, config.nvidia_smi),
    sysfs_root: config.sysfs_root === undefined ? undefined : resolve(base, config.sysfs_root),
    state_dir: config.state_dir === undefined ? undefined : resolve(base, config.state_dir),
    model_cache: config.model_cache === undefined ? undefined : resolve(base, config.model_cache),
    hf_token_file: config.hf_token_file === undefined
      ? undefined
      : resolve(base, config.hf_token_file),
  };
}
