/**
 * The agent's supervisor, built and started (design §9.2): engines launched
 * through the node's plugins (agent/prepare_shard.ts) on the agent's port
 * range, their models fetched through the model cache first, their compile
 * and JIT caches kept per host (engines/compile_cache.ts) and evicted with
 * their model revisions or under disk pressure (agent/engine_cache/); its events go to
 * the supervisor's log, and each engine's time to ready and cold-start
 * phases to the agent's `/metrics` (agent/metrics.ts,
 * agent/cold_start_metrics.ts).
 *
 * @module
 */
import type { EngineRegistry } from "../engines/registry.ts";
import type { Logger } from "../log/log.ts";
import { logEvent, Supervisor } from "../supervisor/supervisor.ts";
import { DEFAULT_PORT_RANGE, PortAllocator } from "../supervisor/port_allocator.ts";
import { errorMessage } from "../text/error_message.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import type { AgentModels } from "./agent_models.ts";
import { type ColdStartHistograms, observeColdStart } from "./cold_start_metrics.ts";
import { emptyTimeToReady, observeTimeToReady, type TimeToReadyHistogram } from "./metrics.ts";
import { prepareShard } from "./prepare_shard.ts";
import { EngineCacheKeeper } from "./engine_cache/engine_cache_keeper.ts";
import { revisionKey } from "./model_cache/cache_revisions.ts";
import { DEFAULT_WATERMARKS } from "./model_cache/eviction_plan.ts";
import { systemClock } from "../time/clock.ts";

/** How long this agent's engines took to start, as `/metrics` shows it. */
export class EngineStartTimings {
  /** Spawn to first ready probe, every engine together. */
  timeToReady: TimeToReadyHistogram = emptyTimeToReady();
  /** Each phase of each engine's starts (engines/cold_start_phases.ts). */
  coldStart: ColdStartHistograms = [];
}

/** What {@link startSupervisor} is given. */
export interface AgentSupervisorOptions {
  /** The agent's options: `supervisor`, `clock`, `ports`, `stateDir`. */
  options: AgentOptions;
  /** The node's engine plugins. */
  registry: EngineRegistry;
  /** The model cache; null: engines fetch nothing first. */
  models: AgentModels | null;
  /** The agent's log: which engines were adopted. */
  log: Logger;
  /** The supervisor's log: its events. */
  supervisorLog: Logger;
  /** Where start-up timings are recorded. */
  timings: EngineStartTimings;
  /** Engine name → version installed on this host; null until known (default: never known). */
  engineVersions?: () => Readonly<Record<string, string>> | null;
}

/**
 * The host's engine caches under `<state>/engine_cache`: a shard the
 * supervisor runs, starts or stops keeps its directory; with a model cache,
 * a directory follows its revision out of it, under the cache's watermarks.
 */
function engineCache(a: AgentSupervisorOptions, supervisor: () => Supervisor | null) {
  const o = a.options;
  const models = a.models;
  return new EngineCacheKeeper({
    root: `${o.stateDir}/engine_cache`,
    inUse: () => supervisor()?.shards() ?? [],
    held: models === null
      ? undefined
      : async () =>
        new Set((await models.cache.revisions()).map((r) => revisionKey(r.repo, r.commit))),
    installed: a.engineVersions ?? (() => null),
    marks: o.models?.cache.watermarks ?? DEFAULT_WATERMARKS,
    clock: o.clock ?? systemClock,
    log: a.supervisorLog,
    // Without a model cache there is no report to carry them: the log line alone.
    onEvicted: models === null ? undefined : (e) => models.reporter.engineCacheEvicted(e),
  });
}

/** What {@link startSupervisor} started. */
export interface StartedSupervisor {
  supervisor: Supervisor;
  /** The engine caches' keeper: its sweeps run in the background until it is closed. */
  engineCache: EngineCacheKeeper;
}

/**
 * Builds the supervisor and starts it: it adopts the engines a previous agent
 * left running, and probes them at once, so the first heartbeat reports the
 * ready ones ready and their replicas never leave the endpoints.
 *
 * @throws {AgentError} When the supervisor cannot start.
 */
export async function startSupervisor(a: AgentSupervisorOptions): Promise<StartedSupervisor> {
  const o = a.options;
  let built: Supervisor | null = null;
  const keeper = engineCache(a, () => built);
  const supervisor = new Supervisor(
    {
      ...o.supervisor,
      clock: o.supervisor?.clock ?? o.clock,
      models: a.models?.fetcher,
      stateDir: o.stateDir,
      ports: new PortAllocator(o.ports ?? DEFAULT_PORT_RANGE),
      onEvent: logEvent(a.supervisorLog),
      onReady: (_shard, afterMs) => {
        a.timings.timeToReady = observeTimeToReady(a.timings.timeToReady, afterMs / 1000);
      },
      onColdStart: (_shard, engine, receipt) => {
        a.timings.coldStart = observeColdStart(a.timings.coldStart, engine, receipt);
      },
    },
    prepareShard(a.registry, {
      engineCache: keeper,
      // Engines read the model cache with the hub off (prepare_shard.ts).
      modelCache: a.models?.root,
    }),
  );
  built = supervisor;
  try {
    await supervisor.start();
  } catch (e) {
    throw new AgentError(`supervisor cannot start: ${errorMessage(e)}`);
  }
  await supervisor.tick();
  // Adopted shards keep theirs; what an earlier agent left behind is swept,
  // in the background: the first heartbeat does not wait for it.
  a.models?.reporter.afterEviction(() => keeper.sweep());
  keeper.sweep().catch((e) =>
    a.supervisorLog.warn("cannot sweep the engine cache", { error: errorMessage(e) })
  );
  const adopted = supervisor.status();
  if (adopted.length > 0) {
    a.log.info("adopted engines left running", {
      shards: adopted.map((s) => ({ id: s.id, pid: s.pid })),
    });
  }
  return { supervisor, engineCache: keeper };
}
