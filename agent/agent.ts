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
 * - discovery and GPU health: agent/discovery_loop.ts.
 *
 * @module
 */
import { EngineRegistry } from "../engines/registry.ts";
import { Supervisor } from "../supervisor/supervisor.ts";
import { DEFAULT_PORT_RANGE, PortAllocator } from "../supervisor/port_allocator.ts";
import type { ControlClient } from "./control_client.ts";
import { controlClient } from "./control_connection.ts";
import { loadOrCreateLocalToken, loadOrCreateProxyToken, localTokenPath } from "./credentials.ts";
import type { AgentListener, ListenAddress } from "./listener.ts";
import { AgentTls } from "./agent_tls.ts";
import {
  AgentError,
  type AgentOptions,
  DEFAULT_LISTEN,
  DEFAULT_PROXY_LISTEN,
  nodeIdProblem,
  type StopOptions,
} from "./agent_options.ts";
import { type ListenerPlacement, serveEngineProxy, serveLocalApi } from "./agent_listeners.ts";
import { DesiredStateLoop } from "./desired_state_loop.ts";
import { DiscoveryLoop } from "./discovery_loop.ts";
import { errorMessage } from "../text/error_message.ts";
import { HeartbeatLoop } from "./heartbeat_loop.ts";
import type { AgentStatus } from "./local_api.ts";
import { createLogger, type Logger, stderrSink } from "../log/log.ts";
import {
  type AgentMetricsSnapshot,
  emptyTimeToReady,
  gatherAgentMetrics,
  observeTimeToReady,
  type TimeToReadyHistogram,
} from "./metrics.ts";
import { type ColdStartHistograms, observeColdStart } from "./cold_start_metrics.ts";
import { detectMgmt } from "./mgmt_addr.ts";
import { prepareShard } from "./prepare_shard.ts";
import { type AgentModels, agentModels } from "./agent_models.ts";
import { AssignedSources, nodeCertificateFetch } from "./assigned_sources.ts";
import { PeerServer } from "./peer_server.ts";
import { CacheLayout } from "./model_cache/cache_layout.ts";
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
  #server: AgentListener | null = null;
  #mgmt: { addr: string; iface: string | null } = { addr: "127.0.0.1", iface: null };
  #agentUrl: string | null = null;
  #proxyServer: AgentListener | null = null;
  /** TLS toward the control plane and on both listeners; null for an http:// control plane. */
  #tls: AgentTls | null = null;
  #proxyUrl: string | null = null;
  #proxyToken: string | null = null;
  #timeToReady: TimeToReadyHistogram = emptyTimeToReady();
  #coldStart: ColdStartHistograms = [];
  #models: AgentModels | null = null;
  #peerFetch: ReturnType<typeof nodeCertificateFetch> | null = null;
  #peer: PeerServer | undefined;

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
      onApplied: (s) => this.#models?.puller.sync(s.models ?? []),
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
      modelCache: () => this.#models?.reporter ?? null,
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
    return this.#server?.addr ?? null;
  }

  /** Where the engine proxy listens, once started; null without one. */
  get proxyAddr(): Deno.NetAddr | null {
    return this.#proxyServer?.addr ?? null;
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
    const peer = this.#peer?.stats();
    const snapshot = gatherAgentMetrics({
      gpus: this.#discovery.gpus,
      shards: this.#supervisor?.status() ?? [],
      shardMetrics: this.#supervisor?.metrics() ?? [],
      timeToReady: this.#timeToReady,
      coldStart: this.#coldStart,
      discoveryErrors: this.#discovery.errors,
      certificateNotAfterMs: this.#tls?.notAfterMs ?? null,
      certificateRenewalFailures: this.#tls?.renewalFailures ?? 0,
    });
    return peer === undefined ? snapshot : { ...snapshot, peer };
  }

  /** Undoes a start that failed part way: the listeners and the TLS client. */
  async #abortStart(): Promise<void> {
    await this.#server?.shutdown();
    this.#server = null;
    await this.#proxyServer?.shutdown();
    this.#proxyServer = null;
    this.#tls?.close();
    this.#tls = null;
    this.#peerFetch?.close();
    this.#peerFetch = null;
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
    try {
      Deno.mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw new AgentError(`cannot create state directory ${o.stateDir}: ${errorMessage(e)}`);
    }
    try {
      this.#tls = await AgentTls.prepare({
        stateDir: o.stateDir,
        controlUrl: o.controlUrl,
        controlUrls: o.controlUrls,
        joinToken: o.joinToken,
        caFile: o.caFile,
        log: (message, fields) => this.#log.info(message, fields),
        clock: o.clock,
      });
    } catch (e) {
      throw new AgentError(errorMessage(e));
    }
    if (this.#tls === null) {
      this.#log.warn(
        "plain HTTP: the control plane URL is http://, so the join token and node credential " +
          "cross the network in clear and the agent's listeners serve plain HTTP (lab use only)",
        { control_url: o.controlUrl },
      );
    }
    let supervisor: Supervisor;
    try {
      const mgmt = detectMgmt({ addr: o.mgmtAddr, iface: o.mgmtInterface });
      if ("error" in mgmt) throw new AgentError(mgmt.error);
      this.#mgmt = mgmt;
      if (o.localToken !== undefined) {
        this.#localToken = o.localToken;
      } else {
        this.#localToken = loadOrCreateLocalToken(o.stateDir);
        this.#log.info("local API token generated or reused", { path: localTokenPath(o.stateDir) });
      }

      const registry = await EngineRegistry.load(o.pluginDirs ?? []);
      for (const p of registry.problems) this.#log.warn("engine plugin problem", { problem: p });
      this.#registry = registry;

      const listen = o.listen === undefined ? DEFAULT_LISTEN : o.listen;
      if (listen !== null) await this.#listen(listen);
      const proxyListen = o.proxyListen === undefined ? DEFAULT_PROXY_LISTEN : o.proxyListen;
      if (proxyListen !== null) {
        this.#proxyToken = o.proxyToken ?? loadOrCreateProxyToken(o.stateDir);
        await this.#listenProxy(proxyListen);
      }

      // Peers the control plane assigns are asked with the node certificate (TLS only).
      const tls = this.#tls;
      this.#peerFetch = tls === null ? null : nodeCertificateFetch(tls);
      const assigned = this.#peerFetch && new AssignedSources(this.#peerFetch.fetch);
      const models = o.models &&
        agentModels(
          assigned === null ? o.models : {
            ...o.models,
            sources: (model, commit, hub) => {
              // The state being reconciled: its shards' fetches start during the reconcile.
              assigned.update(this.#desired.received?.model_sources);
              return assigned.sourcesFor(model, commit, hub);
            },
          },
          this.#supLog,
          o.agentVersion ?? "unknown",
          () => this.#desired.applied,
        );
      this.#models = models ?? null;
      const modelCache = models?.root; // engines read it with the hub off (prepare_shard.ts)
      supervisor = new Supervisor({
        ...o.supervisor,
        clock: o.supervisor?.clock ?? o.clock,
        models: models?.fetcher,
        stateDir: o.stateDir,
        ports: new PortAllocator(o.ports ?? DEFAULT_PORT_RANGE),
        onEvent: (e) => this.#supLog.info(e.message, { shard: e.shard, kind: e.kind, at: e.at }),
        onReady: (_shard, afterMs) => {
          this.#timeToReady = observeTimeToReady(this.#timeToReady, afterMs / 1000);
        },
        onColdStart: (_shard, engine, receipt) => {
          this.#coldStart = observeColdStart(this.#coldStart, engine, receipt);
        },
        // Engines' compile and JIT caches persist per host (engines/compile_cache.ts).
      }, prepareShard(registry, { engineCacheRoot: `${o.stateDir}/engine_cache`, modelCache }));
      try {
        await supervisor.start();
      } catch (e) {
        throw new AgentError(`supervisor cannot start: ${errorMessage(e)}`);
      }
      // Adopted engines are probed now, so the first heartbeat reports the
      // ready ones ready and their replicas never leave the endpoints.
      await supervisor.tick();
    } catch (e) {
      // Whatever had started is stopped: listeners closed, TLS material released.
      await this.#abortStart();
      throw e;
    }
    this.#supervisor = supervisor;
    const adopted = supervisor.status();
    if (adopted.length > 0) {
      this.#log.info("adopted engines left running", {
        shards: adopted.map((s) => ({ id: s.id, pid: s.pid })),
      });
    }

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
      // Together: a local API client still reading must not keep the proxy open.
      await Promise.all([...this.#tasks, this.#server?.shutdown(), this.#proxyServer?.shutdown()]);
      this.#server = this.#proxyServer = null;
      this.#tls?.close();
      this.#peerFetch?.close();
      this.#models?.puller.stop();
      if (this.#supervisor !== null) {
        if (options.stopEngines) await this.#supervisor.shutdown();
        else await this.#supervisor.detach();
      }
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
        agentUrl: this.#agentUrl,
        labels: this.#opts.labels ?? {},
        agentVersion: this.#opts.agentVersion ?? "unknown",
      },
      hardware: { gpus: this.#discovery.gpus, fabrics: this.#discovery.fabrics },
      localToken: this.#localToken,
      proxyUrl: this.#proxyUrl,
      proxyToken: this.#proxyToken,
    };
  }

  async #listen(listen: ListenAddress): Promise<void> {
    const served = await serveLocalApi(
      {
        status: () => this.status(),
        shard: (id) => this.#supervisor?.shard(id) ?? null,
        metrics: () => this.metricsSnapshot(),
        metricsTokenHashes: () => this.#heartbeat.metricsTokenHashes,
      },
      this.#localToken!,
      this.#placement(listen, this.#opts.agentUrl),
      // Other agents of the cluster fetch model bytes this one holds (agent/peer_server.ts).
      this.#peer = this.#opts.models === undefined
        ? undefined
        : new PeerServer({ layout: new CacheLayout(this.#opts.models.cache.root) }),
    );
    this.#server = served.server;
    this.#agentUrl = served.url;
  }

  async #listenProxy(listen: ListenAddress): Promise<void> {
    const served = await serveEngineProxy({
      token: this.#proxyToken!,
      target: (id) => this.#supervisor?.target(id) ?? null,
    }, this.#placement(listen, this.#opts.proxyUrl));
    this.#proxyServer = served.server;
    this.#proxyUrl = served.url;
  }

  #placement(listen: ListenAddress, url: string | undefined): ListenerPlacement {
    return { listen, url, mgmtAddr: this.#mgmt.addr, tls: this.#tls, log: this.#log };
  }
}
