/**
 * The state one fake engine process serves from (dev/fake_engine/fake_engine.ts):
 * its configuration, knobs, log, scheduler and prefix cache, shared by the
 * routes, the loading simulation and the lifecycle.
 *
 * @module
 */

import type { EngineConfig } from "./fake_engine_command.ts";
import type { Knobs } from "./fake_engine_knobs.ts";
import type { ModelFit } from "./fake_engine_model_fit.ts";
import type { Logger } from "./fake_engine_log.ts";
import type { Scheduler } from "./fake_engine_scheduler.ts";
import type { PrefixCache, PrefixCacheKnobs } from "./fake_prefix_cache.ts";

/** A running fake engine's state. */
export interface Runtime {
  /** What the command line asked for. */
  cfg: EngineConfig;
  /** The `FAKE_ENGINE_*` knobs. */
  knobs: Knobs;
  /** The engine-styled log. */
  log: Logger;
  /** Running and waiting requests, and the counters behind /metrics. */
  sched: Scheduler;
  /** The prefix cache; null when FAKE_ENGINE_PREFIX_CACHE_BLOCKS is unset or 0. */
  cache: PrefixCache | null;
  /** The prefix-cache and TTFT knobs. */
  prefix: PrefixCacheKnobs;
  /** SGLang rank 0: loaded and warm. vLLM: listening implies ready. */
  ready: boolean;
  /** The version the engine reports. */
  version: string;
  /** When the process started (epoch ms); `created` of /v1/models. */
  started_ms: number;
  /** Called after each completed completion. */
  onCompleted: () => void;
  /** Its model's facts on its GPU, and how the real engine would stop; null when unknown. */
  fit: ModelFit | null;
}
