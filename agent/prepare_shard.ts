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

/** The supervisor's prepare over `registry`: never throws, so a bad launch is a failed shard with its reason. */
export function prepareShard(registry: EngineRegistry): PrepareShard {
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
      const spec = await driver.prepare(d.launch);
      return driver.api_key === undefined ? spec : { ...spec, api_key: driver.api_key };
    } catch (e) {
      return refuse(`engine ${d.engine} cannot prepare shard ${d.id}: ${errorMessage(e)}`);
    }
  };
}
