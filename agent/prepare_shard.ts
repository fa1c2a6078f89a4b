/**
 * The supervisor's prepare step for the agent (design §8): the engine plugin
 * named by a shard turns its launch into a command. It never throws, so a
 * launch the plugin refuses, or an engine this node lacks, is a `failed`
 * shard carrying the reason.
 *
 * @module
 */
import type { EngineRegistry } from "../engines/registry.ts";
import type { ShardSpec } from "../engines/types.ts";
import type { PrepareShard } from "../supervisor/supervisor.ts";
import type { LaunchedShard } from "../supervisor/types.ts";
import { errorMessage } from "../text/error_message.ts";
import { compileCacheEnv } from "../engines/compile_cache.ts";
import type { EngineCommand } from "../engines/types.ts";
import type { EngineCacheKeeper } from "./engine_cache/engine_cache_keeper.ts";
import { join } from "node:path";

/**
 * The supervisor's prepare over `registry`: never throws, so a bad launch is
 * a failed shard with its reason. With `engineCache`, every shard's
 * command also gets its persistent compile and JIT cache directory
 * (engines/compile_cache.ts; its use recorded, agent/engine_cache/), below
 * the profile's and plugin's own variables: an operator who moves a cache
 * in the profile wins. With
 * `modelCache` (the agent's `--model-cache`), every shard runs with the hub
 * switched off ({@link offlineEnv}), above everything else: engines never
 * fetch a model themselves (issue #25 item 4).
 */
export function prepareShard(
  registry: EngineRegistry,
  opts: { engineCache?: Pick<EngineCacheKeeper, "use">; modelCache?: string } = {},
): PrepareShard {
  return async (d: LaunchedShard): Promise<ShardSpec> => {
    const refuse = (problem: string): ShardSpec => ({
      problems: [problem],
      command: null,
      probes: null,
      metrics: null,
    });
    const driver = registry.get(d.engine);
    if (driver === undefined) {
      return refuse(
        `unknown engine "${d.engine}" on this node (known: ${
          [...registry.names()].sort().join(", ")
        })`,
      );
    }
    try {
      const prepared = await driver.prepare(d.launch);
      let spec = opts.engineCache === undefined || prepared.command === null ? prepared : {
        ...prepared,
        command: await withCompileCache(opts.engineCache, d, prepared.command),
      };
      if (opts.modelCache !== undefined && spec.command !== null) {
        const command = spec.command;
        spec = {
          ...spec,
          command: { ...command, env: { ...command.env, ...offlineEnv(opts.modelCache) } },
        };
      }
      return driver.api_key === undefined ? spec : { ...spec, api_key: driver.api_key };
    } catch (e) {
      return refuse(`engine ${d.engine} cannot prepare shard ${d.id}: ${errorMessage(e)}`);
    }
  };
}

/** The command with the shard's compile cache directory made and its variables beneath the command's own. */
async function withCompileCache(
  keeper: Pick<EngineCacheKeeper, "use">,
  d: LaunchedShard,
  command: EngineCommand,
): Promise<EngineCommand> {
  const dir = await keeper.use(d.engine, d.launch);
  return { ...command, env: { ...compileCacheEnv(dir), ...command.env } };
}

/**
 * The hub switched off for an engine (issue #25 item 4): `HF_HUB_OFFLINE`
 * (huggingface_hub's own switch, which vLLM and SGLang read through it; and
 * `TRANSFORMERS_OFFLINE` for transformers' own look-ups), and the hub cache
 * (`HF_HUB_CACHE`) and home (`HF_HOME`, where its token and other files
 * would go) inside the agent's model cache, so an engine reads the cache the
 * agent filled and writes nowhere else. The token is never passed
 * (supervisor/engine_env.ts leaves it out of every engine's environment).
 */
export function offlineEnv(modelCache: string): Record<string, string> {
  return {
    HF_HUB_OFFLINE: "1",
    TRANSFORMERS_OFFLINE: "1",
    HF_HUB_CACHE: modelCache,
    HF_HOME: join(modelCache, ".llmgw", "hf_home"),
  };
}
