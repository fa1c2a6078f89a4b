/**
 * The agent (design §3, §10): the thin shell around discovery, the
 * supervisor and the control-plane client. It adopts the engines a previous
 * agent left running, registers (retrying forever), heartbeats its shard
 * states and GPU health, long-polls the desired state and reconciles the
 * supervisor to it, and serves a small local API for status and logs.
 *
 * The control plane being down never stops an engine: the supervisor keeps
 * running what it runs, and every loop retries with capped, jittered
 * backoff. No network error or bad answer ends the agent; only {@link
 * Agent.stop} does.
 *
 * This class owns the lifecycle and wires the parts; the decisions the
 * control plane relies on live with each part:
 * - identity, the stored node token and re-registration: agent/registration.ts;
 * - heartbeats and certificate renewal: agent/heartbeat_loop.ts;
 * - fencing and level-triggered reconciling: agent/desired_state_loop.ts;
 * - discovery and GPU health: agent/discovery_loop.ts;
 * - the state directory, TLS, management address and local token: agent/agent_setup.ts;
 * - the local API and engine proxy listeners: agent/agent_listeners.ts;
 * - the model cache, its peers and the peer route: agent/agent_model_wiring.ts;
 * - the supervisor, its adoption and start-up timings: agent/agent_supervisor.ts.
 *
 * @module
 */
import { EngineRegistry } from "../engines/registry.ts";
import type { Supervisor } from "../supervisor/supervisor.ts";
import type { ControlClient } from "./control_client.ts";
import { controlClient } from "./control_connection.ts";
import { loadOrCreateProxyToken } from "./credentials.ts";
import type { ListenAddress } from "./listener.ts";
import type { AgentTls } from "./agent_tls.ts";
import { setUpAgent } from "./agent_setup.ts";
import {
  AgentError,
  type AgentOptions,
  DEFAULT_LISTEN,
  DEFAULT_PROXY_LISTEN,
  nodeIdProblem,
  type StopOptions,
} from "./agent_options.ts";
import { AgentListeners, serveEngineProxy, serveLocalApi } from "./agent_listeners.ts";
import { DesiredStateLoop } from "./desired_state_loop.ts";
import { DiscoveryLoop } from "./discovery_loop.ts";
import { errorMessage } from "../text/error_message.ts";
import { HeartbeatLoop } from "./heartbeat_loop.ts";
import type { AgentStatus } from "./local_api.ts";
import { createLogger, type Logger, stderrSink } from "../log/log.ts";
import { type AgentMetricsSnapshot, gatherAgentMetrics } from "./metrics.ts";
import { EngineStartTimings, startSupervisor } from "./agent_supervisor.ts";
import type { EngineCacheKeeper } from "./engine_cache/engine_cache_keeper.ts";
import { AgentModelWiring } from "./agent_model_wiring.ts";
import { Registration, type RegistrationFacts } from "./registration.ts";
import { DEFAULT_RETRY } from "./retry.ts";
import { systemClock } from "../time/clock.ts";

// Callers import the agent's options and errors from here too.
export { AgentError, DEFAULT_LISTEN, DEFAULT_PROXY_LISTEN, nodeIdProblem };
export type { AgentOptions, StopOptions };

/** The node agent. */
export class Agent {
  readonly #opts: AgentOptions;
  readonly #log: Logger;
  readonly #supLog: Logger;
  readonly #hostname: string;
  readonly #nodeId: string;
  readonly #client: ControlClient;
  readonly #registration: Registration;
  readonly #discovery: DiscoveryLoop;
  readonly #desired: DesiredStateLoop;
  readonly #heartbeat: HeartbeatLoop;
  #localToken: string | null = null;
  #registry: EngineRegistry | null = null;
  #supervisor: Supervisor | null = null;
  /** Its sweeps run in the background; closed at stop. */
  #engineCache: EngineCacheKeeper | null = null;
  readonly #listeners = new AgentListeners();
  #mgmt: { addr: string; iface: string | null } = { addr: "127.0.0.1", iface: null };
  /** TLS toward the control plane and on both listeners; null for an http:// control plane. */
  #tls: AgentTls | null = null;
  #proxyToken: string | null = null;
  readonly #timings = new EngineStartTimings();
  /** The model cache and the peers (agent/agent_model_wiring.ts); built once TLS is known. */
  #models: AgentModelWiring | null = null;

  readonly #stopCtl = new AbortController();
  #tasks: Promise<void>[] = [];
  #state: "new" | "starting" | "running" | "stopping" | "stopped" = "new";
  #stopping: Promise<void> | null = null;

  /**
   * Creates an agent; {@link start} runs it.
   *
   * @throws {AgentError} When the node id or control plane URL cannot be used.
   */
  constructor(options: AgentOptions) {
    this.#opts = options;
    const sink = options.logSink ?? stderrSink;
    const secrets = () =>
      [
        options.joinToken,
        this.#client?.nodeToken ?? "",
        this.#localToken ?? "",
        this.#proxyToken ?? "",
      ].filter((s) => s !== "");
    const log = createLogger("agent", sink, secrets);
    this.#log = log;
    this.#supLog = createLogger("supervisor", sink, secrets);
    this.#hostname = options.hostname ?? Deno.hostname();
    this.#nodeId = options.nodeId ?? this.#hostname;
    const problem = nodeIdProblem(this.#nodeId);
    if (problem !== null) throw new AgentError(problem);
    // Over TLS every call trusts the pinned CA only (agent_tls.ts).
    const client = controlClient(options, () => this.#tls?.client.fetch, log);
    this.#client = client;
    const retry = options.retry ?? DEFAULT_RETRY;
    const clock = options.clock ?? systemClock;
    const signal = this.#stopCtl.signal;
    const tls = () => this.#tls;
    const shards = () => this.#supervisor?.status() ?? [];
    this.#registration = new Registration({
      client,
      nodeId: this.#nodeId,
      stateDir: options.stateDir,
      controlUrl: options.controlUrl,
      controlUrls: options.controlUrls ?? [options.controlUrl],
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      tls,
      facts: () => this.#registrationFacts(),
      onRegistered: () => {
        this.#discovery.registered();
        this.#desired.registered();
      },
      retry,
      log,
      signal,
    });
    this.#discovery = new DiscoveryLoop({
      settings: options.discovery,
      rediscoverMs: options.rediscoverMs,
      shards,
      log,
      signal,
    });
    this.#desired = new DesiredStateLoop({
      client,
      session: this.#registration,
      reconcile: (s) => this.#supervisor!.reconcile(s),
      onApplied: (s) => this.#models?.applied(s),
      longPollMs: options.longPollMs,
      retry,
      log,
      signal,
      clock,
    });
    this.#heartbeat = new HeartbeatLoop({
      client,
      session: this.#registration,
      discovery: this.#discovery,
      desired: this.#desired,
      shards,
      modelCache: () => this.#models?.models?.reporter ?? null,
      tls,
      retry,
      log,
      signal,
      clock,
    });
  }

  /** The node id as registered. */
  get nodeId(): string {
    return this.#registration.registeredId;
  }

  /** The desired-state generation the agent runs (0 before the first). */
  get generation(): number {
    return this.#desired.generation;
  }

  /** Where the local API listens, once started (null when it does not). */
  get localAddr(): Deno.NetAddr | null {
    return this.#listeners.localApi?.server.addr ?? null;
  }

  /** Where the engine proxy listens, once started; null without one. */
  get proxyAddr(): Deno.NetAddr | null {
    return this.#listeners.proxy?.server.addr ?? null;
  }

  /** The agent's status, as the local API shows it. */
  status(): AgentStatus {
    return {
      node_id: this.#registration.registeredId,
      generation: this.#desired.generation,
      registered: this.#client.nodeToken !== null,
      last_heartbeat_at: this.#heartbeat.lastHeartbeatAt,
      control_plane_failures: this.#heartbeat.failures,
      shards: this.#supervisor?.status() ?? [],
    };
  }

  /** What the local API's `/metrics` shows (agent/metrics.ts). */
  metricsSnapshot(): AgentMetricsSnapshot {
    const peer = this.#models?.peer?.stats();
    const snapshot = gatherAgentMetrics({
      gpus: this.#discovery.gpus,
      shards: this.#supervisor?.status() ?? [],
      shardMetrics: this.#supervisor?.metrics() ?? [],
      timeToReady: this.#timings.timeToReady,
      coldStart: this.#timings.coldStart,
      discoveryErrors: this.#discovery.errors,
      certificateNotAfterMs: this.#tls?.notAfterMs ?? null,
      certificateRenewalFailures: this.#tls?.renewalFailures ?? 0,
    });
    return peer === undefined ? snapshot : { ...snapshot, peer };
  }

  /** Undoes a start that failed part way: the listeners and the TLS clients. */
  async #abortStart(): Promise<void> {
    await this.#listeners.shutdown();
    this.#tls?.close();
    this.#tls = null;
    this.#models?.close();
    this.#models = null;
  }

  /**
   * Starts the agent: the local API, then the supervisor (adopting the
   * engines a previous agent left, design §9.2) before anything talks to the
   * control plane, so engines keep running while it is unreachable; then
   * discovery. Returns once those are up; registration, heartbeats and the
   * desired-state loop run in the background until {@link stop}.
   *
   * @throws {AgentError} When the state directory, the management address
   * or the local API's address cannot be used.
   */
  async start(): Promise<void> {
    if (this.#state !== "new") throw new AgentError("an agent starts once");
    this.#state = "starting";
    const o = this.#opts;
    const host = await setUpAgent(o, this.#log);
    this.#tls = host.tls;
    this.#mgmt = host.mgmt;
    this.#localToken = host.localToken;
    let supervisor: Supervisor;
    try {
      const registry = await EngineRegistry.load(o.pluginDirs ?? []);
      for (const p of registry.problems) this.#log.warn("engine plugin problem", { problem: p });
      this.#registry = registry;

      this.#models = new AgentModelWiring({
        models: o.models,
        tls: this.#tls,
        log: this.#supLog,
        version: o.agentVersion ?? "unknown",
        received: () => this.#desired.received,
        applied: () => this.#desired.applied,
      });
      await this.#serve(o);

      const started = await startSupervisor({
        options: o,
        registry,
        models: this.#models.models,
        log: this.#log,
        supervisorLog: this.#supLog,
        timings: this.#timings,
        engineVersions: () => this.#registration.engineVersions,
      });
      supervisor = started.supervisor;
      this.#engineCache = started.engineCache;
    } catch (e) {
      // Whatever had started is stopped: listeners closed, TLS material released.
      await this.#abortStart();
      throw e;
    }
    this.#supervisor = supervisor;

    // Discovery after adoption: our engines' GPU memory is then known to be
    // ours, not another process's (design §5.1).
    await this.#discovery.discover(true);
    this.#state = "running";
    this.#tasks = [this.#main()];
  }

  /**
   * Stops the loops and the local API. With `stopEngines`, every engine is
   * stopped too; without, they keep running for the next agent to adopt.
   */
  stop(options: StopOptions): Promise<void> {
    if (this.#stopping !== null) return this.#stopping;
    this.#stopping = (async () => {
      this.#state = "stopping";
      this.#stopCtl.abort();
      await Promise.all([...this.#tasks, this.#listeners.shutdown()]);
      this.#tls?.close();
      this.#models?.close();
      // Closed first, so a sweep evicts nothing from here on; its wait (bounded: one stuck on
      // a hung file system is left running, engine_cache_keeper.ts) runs beside the engines'
      // stop, never before their SIGTERM.
      const sup = this.#supervisor;
      await Promise.all([
        this.#engineCache?.close(),
        sup === null ? null : options.stopEngines ? sup.shutdown() : sup.detach(),
      ]);
      this.#state = "stopped";
      this.#log.info("agent stopped", {
        engines: options.stopEngines ? "stopped" : "left running",
      });
    })();
    return this.#stopping;
  }

  async #main(): Promise<void> {
    try {
      // Asking a Python engine its version takes seconds: heartbeats with a
      // stored token do not wait for it, only a registration does.
      this.#registration.loadEngineVersions(this.#registry!, this.#opts.supervisor?.env);
      const stored = this.#registration.resume();
      await Promise.all([
        this.#heartbeat.run(),
        this.#desired.run(),
        this.#discovery.run(),
        stored === null ? Promise.resolve() : this.#registration.refreshIfChanged(stored),
      ]);
    } catch (e) {
      // Every loop catches its own failures; this is a bug, not an outage.
      this.#log.error("agent loop ended unexpectedly", { error: errorMessage(e) });
    }
  }

  /** What a registration carries, as it stands now. */
  #registrationFacts(): RegistrationFacts {
    return {
      identity: {
        nodeId: this.#nodeId,
        hostname: this.#hostname,
        mgmtAddr: this.#mgmt.addr,
        mgmtInterface: this.#mgmt.iface,
        agentUrl: this.#listeners.localApi?.url ?? null,
        labels: this.#opts.labels ?? {},
        agentVersion: this.#opts.agentVersion ?? "unknown",
      },
      hardware: { gpus: this.#discovery.gpus, fabrics: this.#discovery.fabrics },
      localToken: this.#localToken,
      proxyUrl: this.#listeners.proxy?.url ?? null,
      proxyToken: this.#proxyToken,
    };
  }

  /** Serves the local API and the engine proxy, each where it is asked to (null: not at all). */
  async #serve(o: AgentOptions): Promise<void> {
    const at = (listen: ListenAddress, url: string | undefined) => ({
      listen,
      url,
      mgmtAddr: this.#mgmt.addr,
      tls: this.#tls,
      log: this.#log,
    });
    const listen = o.listen === undefined ? DEFAULT_LISTEN : o.listen;
    if (listen !== null) {
      const view = {
        status: () => this.status(),
        shard: (id: string) => this.#supervisor?.shard(id) ?? null,
        metrics: () => this.metricsSnapshot(),
        metricsTokenHashes: () => this.#heartbeat.metricsTokenHashes,
      };
      // Other agents of the cluster fetch model bytes this one holds (agent/peer_server.ts).
      const peer = this.#models?.peer;
      this.#listeners.localApi = await serveLocalApi(
        view,
        this.#localToken!,
        at(listen, o.agentUrl),
        peer,
      );
    }
    const proxyListen = o.proxyListen === undefined ? DEFAULT_PROXY_LISTEN : o.proxyListen;
    if (proxyListen !== null) {
      this.#proxyToken = o.proxyToken ?? loadOrCreateProxyToken(o.stateDir);
      const target = (id: string) => this.#supervisor?.target(id) ?? null;
      this.#listeners.proxy = await serveEngineProxy(
        { token: this.#proxyToken, target },
        at(proxyListen, o.proxyUrl),
      );
    }
  }
}
