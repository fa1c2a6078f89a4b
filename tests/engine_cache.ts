/**
 * An engine cache keeper for tests that only need shards to get their
 * compile cache directories (agent/engine_cache/engine_cache_keeper.ts):
 * nothing in use but what `inUse` says, no model cache, the default
 * watermarks, the system clock, its log dropped. A test closes it before
 * removing `root`: a start queues a sweep it does not wait for.
 *
 * @module
 */
import { EngineCacheKeeper } from "../agent/engine_cache/engine_cache_keeper.ts";
import { DEFAULT_WATERMARKS } from "../agent/model_cache/eviction_plan.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";
import { createLogger } from "../log/log.ts";
import { systemClock } from "../time/clock.ts";

/** A keeper over `root`. */
export function testEngineCache(
  root: string,
  inUse: () => readonly DesiredShard[] = () => [],
): EngineCacheKeeper {
  return new EngineCacheKeeper({
    root,
    inUse,
    installed: () => null,
    marks: DEFAULT_WATERMARKS,
    clock: systemClock,
    log: createLogger("test", () => {}),
  });
}
