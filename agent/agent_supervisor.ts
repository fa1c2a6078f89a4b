/**
 * The agent's supervisor, built and started (design §9.2): engines launched
 * through the node's plugins (agent/prepare_shard.ts) on the agent's port
 * range, their models fetched through the model cache first, their compile
 * and JIT caches kept per host (engines/compile_cache.ts); its events go to
 * the supervisor's log, and each engine's time to ready and cold-start
 * phases to the agent's `/metrics` (agent/metrics.ts,
 * agent/cold_start_metrics.ts).
 *
 * @module
 */
import type { EngineRegistry } from "../engines/registry.ts";
import type { Logger } from "../log/log.ts";
import { Supervisor } from "../supervisor/supervisor.ts";
import { DEFAULT_PORT_RANGE, PortAllocator } from "../supervisor/port_allocator.ts";
import { errorMessage } from "../text/error_message.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import type { AgentModels } from "./agent_models.ts";
import { type ColdStartHistograms, observeColdStart } from "./cold_start_metrics.ts";
import { emptyTimeToReady, observeTimeToReady, type TimeToReadyHistogram } from "./metrics.ts";
import { prepareShard } from "./prepare_shard.ts";

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
}

/**
 * Builds the supervisor and starts it: it adopts the engines a previous agent
 * left running, and probes them at once, so the first heartbeat reports the
 * ready ones ready and their replicas never leave the endpoints.
 *
 * @throws {AgentError} When the supervisor cannot start.
 */
export async function startSupervisor(a: AgentSupervisorOptions): Promise<Supervisor> {
  const o = a.options;
  const supervisor = new Supervisor(
    {
      ...o.supervisor,
      clock: o.supervisor?.clock ?? o.clock,
      models: a.models?.fetcher,
      stateDir: o.stateDir,
      ports: new PortAllocator(o.ports ?? DEFAULT_PORT_RANGE),
      onEvent: (e) => a.supervisorLog.info(e.message, { shard: e.shard, kind: e.kind, at: e.at }),
      onReady: (_shard, afterMs) => {
        a.timings.timeToReady = observeTimeToReady(a.timings.timeToReady, afterMs / 1000);
      },
      onColdStart: (_shard, engine, receipt) => {
        a.timings.coldStart = observeColdStart(a.timings.coldStart, engine, receipt);
      },
    },
    prepareShard(a.registry, {
      engineCacheRoot: `${o.stateDir}/engine_cache`,
      // Engines read the model cache with the hub off (prepare_shard.ts).
      modelCache: a.models?.root,
    }),
  );
  try {
    await supervisor.start();
  } catch (e) {
    throw new AgentError(`supervisor cannot start: ${errorMessage(e)}`);
  }
  await supervisor.tick();
  const adopted = supervisor.status();
  if (adopted.length > 0) {
    a.log.info("adopted engines left running", {
      shards: adopted.map((s) => ({ id: s.id, pid: s.pid })),
    });
  }
  return supervisor;
}
