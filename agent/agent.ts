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
 * Decisions the control plane relies on:
 * - Identity: the node token is stored in `<stateDir>/node_token` (0600)
 *   with the control plane URL and node id it belongs to. A restarted agent
 *   heartbeats with it at once, without registering; it registers again
 *   only when the control plane refuses it (401/403) or when what only a
 *   registration carries changed (labels, addresses, fabrics, GPU models,
 *   agent or engine versions), heartbeating with the old token meanwhile.
 * - Fencing (design §10): a desired state older than the generation running
 *   is ignored (logged once, polled again with backoff). After a
 *   registration the control plane's generation is taken whatever it is:
 *   a control plane that forgot the node decides afresh.
 * - Level-triggered: every desired-state answer is reconciled, also one of
 *   the same generation (a no-op when nothing differs). A shard whose launch
 *   the engine plugin refuses becomes a `failed` shard carrying the reason.
 *   A desired state with a launch that does not match the protocol's schema
 *   (protocol/shard_launch.ts) is refused whole, logged with the shard and
 *   the field, and polled again with backoff; what runs keeps running.
 * - Heartbeats report the generation whose reconcile finished; GPUs go out
 *   with the first heartbeat after each discovery (`rediscoverMs`).
 *
 * @module
 */
import { EngineRegistry } from "../engines/registry.ts";
import type { ShardSpec } from "../engines/prepare.ts";
import { discoverInventory } from "../discovery/discover.ts";
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import type {
  DesiredState,
  HeartbeatRequest,
  RegisterRequest,
} from "../protocol/agent_protocol.ts";
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { type PrepareShard, Supervisor } from "../supervisor/supervisor.ts";
import type { DesiredShard, LaunchedShard } from "../supervisor/types.ts";
import { DEFAULT_PORT_RANGE, PortAllocator } from "../supervisor/port_allocator.ts";
import { FailoverFetch } from "../http/failover_fetch.ts";
import { ControlClient, ControlError } from "./control_client.ts";
import {
  loadOrCreateLocalToken,
  loadOrCreateProxyToken,
  localTokenPath,
  readSession,
  removeSession,
  type StoredSession,
  writeSession,
} from "./credentials.ts";
import { engineVersions } from "./engine_versions.ts";
import { engineProxy } from "./engine_proxy.ts";
import {
  type AgentListener,
  type ListenAddress,
  listenerUrl,
  serveListener,
  serveTlsListener,
} from "./listener.ts";
import { AgentTls, requireClientCertificate } from "./agent_tls.ts";
import {
  AgentError,
  type AgentOptions,
  DEFAULT_LISTEN,
  DEFAULT_PROXY_LISTEN,
  nodeIdProblem,
  type StopOptions,
} from "./agent_options.ts";

export {
  AgentError,
  type AgentOptions,
  DEFAULT_LISTEN,
  DEFAULT_PROXY_LISTEN,
  nodeIdProblem,
  type StopOptions,
};
import { type AgentStatus, localApi } from "./local_api.ts";
import { createLogger, type Logger, stderrSink } from "./log.ts";
import {
  type AgentMetricsSnapshot,
  type DiscoverySource,
  emptyTimeToReady,
  gatherAgentMetrics,
  observeTimeToReady,
  type TimeToReadyHistogram,
} from "./metrics.ts";
import { detectMgmt } from "./mgmt_addr.ts";
import {
  gpuReport,
  gpusAfterRediscovery,
  registerRequest,
  registrationFingerprint,
  shardReport,
} from "./reports.ts";
import { DEFAULT_RETRY, retryDelay, sleep } from "./retry.ts";

/** Answers that bring nothing new come no faster than this (a control plane that does not hold). */
const MIN_POLL_MS = 1_000;

const MIN_HEARTBEAT_MS = 100;
const MAX_HEARTBEAT_MS = 600_000;

/** The node agent. */
export class Agent {
  readonly #opts: AgentOptions;
  readonly #log: Logger;
  readonly #supLog: Logger;
  readonly #hostname: string;
  readonly #nodeId: string;
  readonly #client: ControlClient;
  readonly #retry: BackoffPolicy;
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

  #registeredId: string;
  #intervalMs: number;
  #registering: Promise<boolean> | null = null;
  #engineVersions: Record<string, string> = {};
  #versionsReady: Promise<void> = Promise.resolve();

  #generation = 0;
  /** After a (re-)registration the control plane's generation is taken whatever it is. */
  #fenceReset = false;
  #ignoredGeneration: number | null = null;

  #gpus: Gpu[] = [];
  #lastGoodGpus: Gpu[] = [];
  #fabrics: FabricAttachment[] = [];
  #pendingGpus: Gpu[] | null = null;

  #lastHeartbeatAt: number | null = null;
  /** SHA-256 (hex) of the metrics tokens, from the last heartbeat answer that carried them. */
  #metricsTokenHashes: readonly string[] = [];
  #timeToReady: TimeToReadyHistogram = emptyTimeToReady();
  readonly #discoveryErrors: Record<DiscoverySource, number> = { nvidia_smi: 0, sysfs: 0 };
  #heartbeatFailures = 0;
  /** Node tokens refused in a row: a control plane that refuses what it just issued is not hammered. */
  #refusals = 0;

  readonly #stopCtl = new AbortController();
  #wakeCtl: AbortController | null = null;
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
    this.#log = createLogger("agent", sink, secrets);
    this.#supLog = createLogger("supervisor", sink, secrets);
    this.#hostname = options.hostname ?? Deno.hostname();
    this.#nodeId = options.nodeId ?? this.#hostname;
    const problem = nodeIdProblem(this.#nodeId);
    if (problem !== null) throw new AgentError(problem);
    this.#registeredId = this.#nodeId;
    try {
      const control = new FailoverFetch(
        options.controlUrls ?? [options.controlUrl],
        // Over TLS every call trusts the pinned CA only (agent_tls.ts).
        (input, init) => (this.#tls?.client.fetch ?? fetch)(input, init),
        (line) => this.#log.warn(line),
      );
      this.#client = new ControlClient({
        url: options.controlUrl,
        joinToken: options.joinToken,
        timeoutMs: options.requestTimeoutMs,
        fetch: control.fetch,
      });
    } catch (e) {
      throw new AgentError(
        `control plane URL ${options.controlUrl}: ${e instanceof Error ? e.message : e}`,
      );
    }
    this.#retry = options.retry ?? DEFAULT_RETRY;
    this.#intervalMs = this.#clampInterval(options.heartbeatIntervalMs ?? 5_000);
  }

  /** The node id as registered. */
  get nodeId(): string {
    return this.#registeredId;
  }

  /** The desired-state generation the agent runs (0 before the first). */
  get generation(): number {
    return this.#generation;
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
      node_id: this.#registeredId,
      generation: this.#generation,
      registered: this.#client.nodeToken !== null,
      last_heartbeat_at: this.#lastHeartbeatAt,
      control_plane_failures: this.#heartbeatFailures,
      shards: this.#supervisor?.status() ?? [],
    };
  }

  /** What the local API's `/metrics` shows (agent/metrics.ts). */
  metricsSnapshot(): AgentMetricsSnapshot {
    return gatherAgentMetrics({
      gpus: this.#gpus,
      shards: this.#supervisor?.status() ?? [],
      shardMetrics: this.#supervisor?.metrics() ?? [],
      timeToReady: this.#timeToReady,
      discoveryErrors: this.#discoveryErrors,
      certificateNotAfterMs: this.#tls?.notAfterMs ?? null,
      certificateRenewalFailures: this.#tls?.renewalFailures ?? 0,
    });
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
      throw new AgentError(`cannot create state directory ${o.stateDir}: ${errorText(e)}`);
    }
    try {
      this.#tls = await AgentTls.prepare({
        stateDir: o.stateDir,
        controlUrl: o.controlUrl,
        controlUrls: o.controlUrls,
        joinToken: o.joinToken,
        caFile: o.caFile,
        log: (message, fields) => this.#log.info(message, fields),
      });
    } catch (e) {
      throw new AgentError(errorText(e));
    }
    if (this.#tls === null) {
      this.#log.warn(
        "plain HTTP: the control plane URL is http://, so the join token and node credential " +
          "cross the network in clear and the agent's listeners serve plain HTTP (lab use only)",
        { control_url: o.controlUrl },
      );
    }
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
      try {
        await this.#listenProxy(proxyListen);
      } catch (e) {
        await this.#server?.shutdown();
        this.#server = null;
        throw e;
      }
    }

    const supervisor = new Supervisor({
      ...o.supervisor,
      stateDir: o.stateDir,
      ports: new PortAllocator(o.ports ?? DEFAULT_PORT_RANGE),
      onEvent: (e) => this.#supLog.info(e.message, { shard: e.shard, kind: e.kind, at: e.at }),
      onReady: (_shard, afterMs) => {
        this.#timeToReady = observeTimeToReady(this.#timeToReady, afterMs / 1000);
      },
    }, this.#prepare(registry));
    try {
      await supervisor.start();
    } catch (e) {
      await this.#server?.shutdown();
      this.#server = null;
      throw new AgentError(`supervisor cannot start: ${errorText(e)}`);
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
    await this.#discover(true);
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
      await Promise.all(this.#tasks);
      await this.#server?.shutdown();
      this.#server = null;
      await this.#proxyServer?.shutdown();
      this.#proxyServer = null;
      this.#tls?.close();
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

  get #stopped(): boolean {
    return this.#stopCtl.signal.aborted;
  }

  #clampInterval(ms: number): number {
    if (!Number.isFinite(ms)) return 5_000;
    return Math.min(MAX_HEARTBEAT_MS, Math.max(MIN_HEARTBEAT_MS, ms));
  }

  /** The supervisor's prepare: never throws, so a bad launch is a failed shard with its reason. */
  #prepare(registry: EngineRegistry): PrepareShard {
    return async (d: LaunchedShard): Promise<ShardSpec> => {
      const refuse = (problem: string): ShardSpec => ({
        engine: d.engine,
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
        return refuse(`engine ${d.engine} cannot prepare shard ${d.id}: ${errorText(e)}`);
      }
    };
  }

  async #listen(listen: ListenAddress): Promise<void> {
    const app = localApi({
      status: () => this.status(),
      shard: (id) => this.#supervisor?.shard(id) ?? null,
      metrics: () => this.metricsSnapshot(),
      metricsTokenHashes: () => this.#metricsTokenHashes,
    }, this.#localToken!);
    // Over TLS the control plane presents a certificate from the CA; /v1 needs it besides the token.
    this.#server = await this.#serve("the agent's local API", "local API", listen, app.fetch, true);
    this.#agentUrl = this.#opts.agentUrl ?? this.#urlOf(listen, this.#server);
  }

  async #listenProxy(listen: ListenAddress): Promise<void> {
    const handler = engineProxy({
      token: this.#proxyToken!,
      target: (id) => this.#supervisor?.target(id) ?? null,
    });
    this.#proxyServer = await this.#serve(
      "the engine proxy",
      "engine proxy",
      listen,
      handler,
      false,
    );
    this.#proxyUrl = this.#opts.proxyUrl ?? this.#urlOf(listen, this.#proxyServer);
  }

  /** Serves a listener plain or, with TLS, with the agent's certificate, swapped on renewal. */
  async #serve(
    what: string,
    name: string,
    listen: ListenAddress,
    handler: (req: Request) => Response | Promise<Response>,
    clientCertificates: boolean,
  ): Promise<AgentListener> {
    const tls = this.#tls;
    const onListen = (addr: Deno.NetAddr) =>
      this.#log.info(`${name} listening`, {
        hostname: addr.hostname,
        port: addr.port,
        tls: tls !== null,
      });
    if (tls === null) return serveListener(what, listen, handler, onListen);
    const ca = clientCertificates ? tls.caPem : undefined;
    const server = await serveTlsListener(
      what,
      listen,
      { ...tls.serving, ca },
      (req, info) =>
        clientCertificates ? requireClientCertificate(req, info, handler) : handler(req),
      onListen,
    );
    tls.onCertificate((c) => server.setCertificate({ ...c, ca }));
    return server;
  }

  #urlOf(listen: ListenAddress, server: AgentListener): string {
    const scheme = this.#tls === null ? "http" : "https";
    return listenerUrl(listen.hostname, server.addr.port, this.#mgmt.addr, scheme);
  }

  /** Renews the serving certificate in the background; a failure is counted and retried next beat. */
  #renew(): void {
    this.#tls?.renewInBackground(
      (csr) => this.#client.renewCertificate(csr, this.#stopCtl.signal),
      `node:${this.#registeredId}`,
      (ok, fields) => {
        if (this.#stopped) return;
        if (ok) this.#log.info("renewed the serving certificate", fields);
        else this.#log.warn("cannot renew the serving certificate", fields);
      },
    );
  }

  /** Pids of our engines and their workers: their GPU memory is ours (design §5.1). */
  #ownPids(): Set<number> {
    const pids = new Set<number>();
    for (const s of this.#supervisor?.status() ?? []) {
      if (s.pid === null) continue;
      pids.add(s.pid);
      try {
        for (const p of groupMembers(s.pid)) pids.add(p);
      } catch {
        // /proc unreadable: the leader alone.
      }
    }
    return pids;
  }

  /** Discovers the hardware; GPU health goes out with the next heartbeat (design §5.1). */
  async #discover(first: boolean): Promise<void> {
    const d = this.#opts.discovery ?? {};
    try {
      const inv = await discoverInventory({
        nvidiaSmi: d.nvidiaSmi,
        sysfsRoot: d.sysfsRoot,
        fabrics: d.fabrics,
        timeoutMs: d.timeoutMs,
        ownPids: this.#ownPids(),
      });
      // Counted per run: the GPU list unreadable, or an adapter's attributes.
      if (inv.source === "nvidia-smi-failed") this.#discoveryErrors.nvidia_smi++;
      if (inv.hcas.some((h) => h.problems.length > 0)) this.#discoveryErrors.sysfs++;
      const gpus = gpusAfterRediscovery(this.#lastGoodGpus, inv);
      if (inv.source === "nvidia-smi") this.#lastGoodGpus = inv.gpus;
      const before = new Map(this.#gpus.map((g) => [g.index, g.health.problems.join("; ")]));
      for (const g of gpus) {
        const now = g.health.problems.join("; ");
        if (now !== "" && before.get(g.index) !== now) {
          this.#log.warn("GPU unhealthy", { gpu: g.index, problems: g.health.problems });
        }
      }
      this.#gpus = gpus;
      // The next heartbeat carries them; a registration carries them too and clears this.
      this.#pendingGpus = gpus;
      if (first) {
        this.#fabrics = inv.fabrics;
        this.#log.info("discovered", {
          source: inv.source,
          gpus: inv.gpus.map((g) => g.class),
          fabrics: inv.fabrics.map((f) => f.fabric),
        });
        if (inv.problems.length > 0 || inv.warnings.length > 0) {
          this.#log.warn("discovery problems", {
            problems: inv.problems.slice(0, 20),
            warnings: inv.warnings.slice(0, 20),
          });
        }
      }
    } catch (e) {
      this.#log.error("discovery failed", { error: errorText(e) });
    }
  }

  async #main(): Promise<void> {
    try {
      // Asking a Python engine its version takes seconds: heartbeats with a
      // stored token do not wait for it, only a registration does.
      this.#versionsReady = engineVersions(this.#registry!, {
        env: this.#opts.supervisor?.env,
        signal: this.#stopCtl.signal,
      }).then((v) => {
        this.#engineVersions = v;
        if (!this.#stopped) this.#log.info("engine versions", { engines: v });
      });
      const stored = readSession(
        this.#opts.stateDir,
        this.#opts.controlUrls ?? [this.#opts.controlUrl],
        this.#nodeId,
      );
      if (stored !== null) this.#useSession(stored, "reusing the stored node token");
      await Promise.all([
        this.#heartbeatLoop(),
        this.#desiredLoop(),
        this.#rediscoverLoop(),
        stored === null ? Promise.resolve() : this.#refreshIfChanged(stored),
      ]);
    } catch (e) {
      // Every loop catches its own failures; this is a bug, not an outage.
      this.#log.error("agent loop ended unexpectedly", { error: errorText(e) });
    }
  }

  #registerRequest(): RegisterRequest {
    const req = registerRequest(
      {
        nodeId: this.#nodeId,
        hostname: this.#hostname,
        mgmtAddr: this.#mgmt.addr,
        mgmtInterface: this.#mgmt.iface,
        agentUrl: this.#agentUrl,
        labels: this.#opts.labels ?? {},
        agentVersion: this.#opts.agentVersion ?? "unknown",
      },
      { gpus: this.#gpus, fabrics: this.#fabrics },
      this.#engineVersions,
    );
    // The control plane fetches shard logs from the local API with this token (`llmgw logs`).
    const withToken = this.#agentUrl !== null && this.#localToken !== null
      ? { ...req, agent_token: this.#localToken }
      : req;
    // Gateways reach this node's engines through the proxy, with this credential.
    return this.#proxyUrl !== null && this.#proxyToken !== null
      ? { ...withToken, proxy_url: this.#proxyUrl, proxy_token: this.#proxyToken }
      : withToken;
  }

  /**
   * A restarted agent keeps its node token, but what only a registration
   * carries (labels, addresses, fabrics, GPU models, agent and engine
   * versions) may have changed with the restart (an upgrade, a new label):
   * then it registers again, heartbeating with the old token meanwhile.
   */
  async #refreshIfChanged(stored: StoredSession): Promise<void> {
    await this.#versionsReady;
    if (this.#stopped || this.#client.nodeToken !== stored.node_token) return;
    if (registrationFingerprint(this.#registerRequest()) === stored.fingerprint) return;
    this.#log.info("node facts changed since the last registration; registering again");
    if (this.#registering === null) {
      this.#registering = this.#register().finally(() => (this.#registering = null));
    }
    await this.#registering;
  }

  #useSession(s: StoredSession, why: string): void {
    this.#client.setNodeToken(s.node_token);
    this.#registeredId = s.registered_id;
    this.#intervalMs = this.#clampInterval(
      this.#opts.heartbeatIntervalMs ?? s.heartbeat_interval_ms,
    );
    this.#log.info(why, { node_id: s.registered_id, heartbeat_interval_ms: this.#intervalMs });
  }

  /** True once a node token is held; false when the agent is stopping. */
  #ensureRegistered(): Promise<boolean> {
    if (this.#client.nodeToken !== null) return Promise.resolve(true);
    if (this.#registering === null) {
      this.#registering = this.#register().finally(() => (this.#registering = null));
    }
    return this.#registering;
  }

  async #register(): Promise<boolean> {
    await this.#versionsReady;
    let attempt = 0;
    while (!this.#stopped) {
      const req = this.#registerRequest();
      try {
        const csr = this.#tls === null ? undefined : await this.#tls.csr(`node:${this.#nodeId}`);
        const res = await this.#client.register(
          csr === undefined ? req : { ...req, csr },
          this.#stopCtl.signal,
        );
        if (this.#tls !== null && res.certificate !== undefined) {
          await this.#tls.accept(res.certificate);
          this.#log.info("serving with a certificate signed at registration", {
            expires: new Date(this.#tls.notAfterMs!).toISOString(),
          });
        }
        const registeredId = nodeIdProblem(res.node_id) === null ? res.node_id : this.#nodeId;
        if (registeredId !== this.#nodeId) {
          this.#log.warn("the control plane registered this node under another id", {
            node_id: this.#nodeId,
            registered_id: registeredId,
          });
        }
        const session: StoredSession = {
          control_url: this.#opts.controlUrl,
          node_id: this.#nodeId,
          registered_id: registeredId,
          node_token: res.node_token,
          heartbeat_interval_ms: res.heartbeat_interval_ms,
          fingerprint: registrationFingerprint(req),
        };
        try {
          writeSession(this.#opts.stateDir, session);
        } catch (e) {
          this.#log.error("cannot store the node token; a restart will register again", {
            error: errorText(e),
          });
        }
        this.#useSession(session, "registered");
        // The registration carried the GPUs; a new identity's generation is
        // taken as it is (design §10: the control plane that forgot us decides).
        this.#pendingGpus = null;
        this.#fenceReset = true;
        this.#ignoredGeneration = null;
        this.#wake();
        return true;
      } catch (e) {
        if (this.#stopped) return false;
        attempt++;
        const delay = retryDelay(attempt, this.#retry);
        this.#log.warn("registration failed", { ...errorFields(e), attempt, retry_in_ms: delay });
        await sleep(delay, this.#stopCtl.signal);
      }
    }
    return false;
  }

  /**
   * The control plane refused `token`: forget it (once) and register again.
   * Waits first when tokens keep being refused right after registering.
   */
  async #refused(token: string | null, e: ControlError): Promise<void> {
    if (token !== null && this.#client.nodeToken === token) {
      this.#refusals++;
      this.#log.warn("the control plane refused the node token; registering again", {
        status: e.status,
        code: e.code,
      });
      this.#client.setNodeToken(null);
      removeSession(this.#opts.stateDir);
    }
    if (this.#refusals > 1) {
      await sleep(retryDelay(this.#refusals - 1, this.#retry), this.#stopCtl.signal);
    }
  }

  #wake(): void {
    this.#wakeCtl?.abort();
  }

  async #heartbeatLoop(): Promise<void> {
    while (!this.#stopped) {
      if (!await this.#ensureRegistered()) return;
      const token = this.#client.nodeToken;
      const gpus = this.#pendingGpus;
      const req: HeartbeatRequest = {
        node_id: this.#registeredId,
        generation: this.#generation,
        shards: (this.#supervisor?.status() ?? []).map(shardReport),
        ...(gpus === null ? {} : { gpus: gpus.map(gpuReport) }),
      };
      let delay = this.#intervalMs;
      try {
        const res = await this.#client.heartbeat(req, this.#stopCtl.signal);
        if (this.#heartbeatFailures > 0) {
          this.#log.info("control plane reachable again", {
            after_failures: this.#heartbeatFailures,
          });
        }
        this.#heartbeatFailures = 0;
        this.#refusals = 0;
        this.#lastHeartbeatAt = Date.now();
        if (this.#pendingGpus === gpus) this.#pendingGpus = null;
        // Revoked tokens stop working within one heartbeat; without an answer the last list holds.
        if (res.metricsTokenHashes !== null) this.#metricsTokenHashes = res.metricsTokenHashes;
        if (this.#tls?.renewalDue()) this.#renew();
        const g = res.generation;
        if (g !== null && g !== this.#generation && g !== this.#ignoredGeneration) this.#wake();
      } catch (e) {
        if (this.#stopped) return;
        if (e instanceof ControlError && e.unauthorized) {
          await this.#refused(token, e);
          continue;
        }
        this.#heartbeatFailures++;
        delay = retryDelay(this.#heartbeatFailures, {
          initialMs: this.#intervalMs,
          maxMs: Math.max(this.#intervalMs, this.#retry.maxMs),
          factor: 2,
        });
        this.#log.warn("heartbeat failed", {
          ...errorFields(e),
          failures: this.#heartbeatFailures,
          retry_in_ms: delay,
        });
      }
      await sleep(delay, this.#stopCtl.signal);
    }
  }

  async #desiredLoop(): Promise<void> {
    let failures = 0;
    let stale = 0;
    const longPollMs = this.#opts.longPollMs ?? 30_000;
    while (!this.#stopped) {
      if (!await this.#ensureRegistered()) return;
      const token = this.#client.nodeToken;
      const wake = new AbortController();
      this.#wakeCtl = wake;
      const signal = AbortSignal.any([this.#stopCtl.signal, wake.signal]);
      const began = Date.now();
      let progressed = false;
      try {
        const state = await this.#client.desired(this.#generation, longPollMs, signal);
        failures = 0;
        if (state !== null && state.generation < this.#generation && !this.#fenceReset) {
          // Fencing (design §10): an older desired state never resurrects shards.
          if (this.#ignoredGeneration !== state.generation) {
            this.#log.warn("ignoring an older desired state", {
              generation: state.generation,
              running: this.#generation,
            });
          }
          this.#ignoredGeneration = state.generation;
          stale++;
          await sleep(retryDelay(stale, this.#retry), signal);
          continue;
        }
        stale = 0;
        if (state !== null) progressed = await this.#apply(state);
      } catch (e) {
        if (this.#stopped) return;
        if (wake.signal.aborted) continue;
        if (e instanceof ControlError && e.unauthorized) {
          await this.#refused(token, e);
          continue;
        }
        failures++;
        const delay = retryDelay(failures, this.#retry);
        this.#log.warn("desired state poll failed", {
          ...errorFields(e),
          failures,
          retry_in_ms: delay,
        });
        await sleep(delay, signal);
        continue;
      }
      const elapsed = Date.now() - began;
      if (!progressed && elapsed < MIN_POLL_MS) await sleep(MIN_POLL_MS - elapsed, signal);
    }
  }

  /** Reconciles to `state`; true when it was a new generation. */
  async #apply(state: DesiredState): Promise<boolean> {
    const seen = new Set<string>();
    const shards: DesiredShard[] = [];
    for (const s of state.shards) {
      if (seen.has(s.id)) {
        this.#log.warn("desired state lists a shard twice; the first wins", { shard: s.id });
        continue;
      }
      seen.add(s.id);
      // The client checked the launch's shape and bounds; whether it makes
      // sense is the engine plugin's to judge, and a refusal is a failed shard.
      shards.push({ id: s.id, engine: s.engine, launch: s.launch });
    }
    try {
      await this.#supervisor!.reconcile(shards);
    } catch (e) {
      this.#log.error("reconcile failed", { generation: state.generation, error: errorText(e) });
      return false;
    }
    const previous = this.#generation;
    this.#generation = state.generation;
    this.#fenceReset = false;
    this.#ignoredGeneration = null;
    if (previous !== state.generation) {
      this.#log.info("desired state applied", {
        generation: state.generation,
        previous,
        shards: shards.map((s) => s.id),
      });
      return true;
    }
    return false;
  }

  async #rediscoverLoop(): Promise<void> {
    const every = this.#opts.rediscoverMs ?? 60_000;
    while (!this.#stopped) {
      await sleep(every, this.#stopCtl.signal);
      if (this.#stopped) return;
      await this.#discover(false);
    }
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function errorFields(e: unknown): Record<string, unknown> {
  if (e instanceof ControlError) {
    return { error: e.message, kind: e.kind, status: e.status, code: e.code };
  }
  return { error: errorText(e) };
}
