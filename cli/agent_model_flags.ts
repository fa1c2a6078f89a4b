/**
 * `llmgw agent run`'s model cache flags (issue #25): `--model-cache DIR`,
 * `--download-rate RATE`, `--cache-high PCT`, `--cache-low PCT`, over the
 * config file's `model_cache`, `download_rate`, `cache_high`, `cache_low`;
 * and the hub the agent fetches from: `HF_ENDPOINT` and `HF_TOKEN` from its
 * environment, or the 0600 file the config's `hf_token_file` names. The
 * token is never a flag: flags show in `ps`.
 *
 * @module
 */
import { CacheFlagError, cacheSettings } from "../agent/model_cache/cache_flags.ts";
import { DownloadRateError } from "../agent/model_cache/download_rate.ts";
import { WatermarkError } from "../agent/model_cache/eviction_plan.ts";
import type { AgentModelOptions } from "../agent/agent_models.ts";
import { hubConfig, HubConfigError } from "../models/hub_config.ts";
import type { ModelConfig } from "./discovery_flags.ts";
import { UsageError } from "./usage_error.ts";

/** The flags, as node:util parseArgs declares them. */
export const MODEL_CACHE_FLAGS = {
  "model-cache": { type: "string" },
  "download-rate": { type: "string" },
  "cache-high": { type: "string" },
  "cache-low": { type: "string" },
} as const;

/** The flags' lines of the usage text. */
export const MODEL_CACHE_USAGE =
  `  --model-cache DIR      model cache, in the hub cache's layout (default:
                         <state-dir>/models; "model_cache" in the config file);
                         engines load from it with HF_HUB_OFFLINE=1
  --download-rate RATE   download limit of this agent, e.g. 200MiB/s, 1Gbit/s
                         (default: none; "download_rate")
  --cache-high PCT       evict unused model revisions above this disk use
                         (default 90%; "cache_high")
  --cache-low PCT        ... down to this one (default 80%; "cache_low")
`;

/** The flag values as parseArgs gives them. */
export interface ModelCacheFlagValues {
  "model-cache"?: string;
  "download-rate"?: string;
  "cache-high"?: string;
  "cache-low"?: string;
}

/**
 * The agent's model cache and hub: flags over the config file, the hub from
 * `env`. `stateDir` is the agent's (the cache's default parent).
 *
 * @throws {UsageError} Naming the flag, key, variable or file that is wrong.
 */
export async function agentModelOptions(
  values: ModelCacheFlagValues,
  config: ModelConfig,
  stateDir: string,
  env: (name: string) => string | undefined,
): Promise<AgentModelOptions> {
  const text = (v: string | number | undefined) => v === undefined ? undefined : String(v);
  try {
    const cache = cacheSettings(
      {
        modelCache: values["model-cache"] ?? config.model_cache,
        downloadRate: values["download-rate"] ?? config.download_rate,
        cacheHigh: values["cache-high"] ?? text(config.cache_high),
        cacheLow: values["cache-low"] ?? text(config.cache_low),
      },
      stateDir,
      Deno.cwd(),
    );
    const hub = await hubConfig({ env, tokenFile: config.hf_token_file });
    return { cache, hub };
  } catch (e) {
    const known = e instanceof CacheFlagError || e instanceof DownloadRateError ||
      e instanceof WatermarkError || e instanceof HubConfigError;
    if (known) throw new UsageError(`agent run: ${e.message}`);
    throw e;
  }
}
