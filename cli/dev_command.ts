/**
 * `llmgw dev`: the all-in-one local cluster (design §3), the first-run
 * experience. On one machine with no GPU it starts a control plane with an
 * embedded store, agents on simulated hardware (dev/machines: idle
 * machines derived from recorded nvidia-smi outputs and sysfs trees), the
 * fake engine in place of vLLM and SGLang (dev/fake_engine), and sample
 * deployments; then it shows replicas go from starting to loading (with
 * progress) to ready. Ctrl-C or SIGTERM stops everything it started,
 * engines included.
 *
 * `llmgw dev machines [--node NAME]` prints what discovery sees on the
 * recorded and simulated machines instead.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent } from "../agent/agent.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import { formatInventory } from "../agent/inventory_table.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { startControl } from "../control/server.ts";
import { newToken } from "../http/tokens.ts";
import { acquireDevLock, type DevLock, DevLockedError, DevLockError } from "./dev_lock.ts";
import {
  chooseDevPort,
  DevPortError,
  devStatePaths,
  loadOrCreateDevAdminToken,
  prepareDevState,
  readDevPort,
  writeDevEnv,
  writeDevPort,
} from "./dev_state.ts";
import { devBanner, devCliCommand } from "./dev_banner.ts";
import { engineLeftReport, scanEnginesLeft } from "./dev_engines_left.ts";
import { discoverInventory } from "../discovery/mod.ts";
import { parseDeploymentText } from "../deployment/load.ts";
import { replicaTable } from "./admin_views.ts";
import type { FollowingGateway } from "../gateway/server.ts";
import { type ClusterTls, loadClusterTls } from "../control/cluster_tls.ts";
import { startEmbeddedGateway } from "./embedded_gateway.ts";
import { uiApp } from "../ui/mod.ts";
import { assertBindable, BindError } from "../http/bind_error.ts";
import { parseFlags, UsageError } from "./usage_error.ts";
import {
  DEV_DEFAULT_PORT,
  DEV_NODES,
  DEV_PORT_MAX,
  DEV_PORT_MIN,
  DEV_PORT_SPAN,
  type DevPorts,
  devPorts,
  layoutRows,
  parseDevPort,
} from "./dev_ports.ts";
import { errorMessage } from "../text/error_message.ts";
import { compareNatural } from "../text/natural_order.ts";
import { type DevHub, DevHubError, startDevHub } from "./dev_hub.ts";
import { controlHub } from "../models/hub_facts.ts";
import { hubConfig, HubConfigError } from "../models/hub_config.ts";
import { cacheSettings } from "../agent/model_cache/cache_flags.ts";
import { STOP_SIGNALS, stopSignal } from "./stop_signals.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
// What only `llmgw dev` needs lives under dev/ (design §3): read by path at run time, never imported.
const SIM = join(ROOT, "dev/machines");
const SHIMS = join(ROOT, "dev/fake_engine/bin");
const SAMPLES = join(ROOT, "dev/samples");

/** Usage of `llmgw dev`. */
export const DEV_USAGE = `Usage: llmgw dev [options]
       llmgw dev machines [--node NAME]

Runs the all-in-one local cluster on simulated hardware (no GPU needed): a
control plane, four agents, the fake engine in place of vLLM and SGLang, the
gateway and sample deployments. Ctrl-C, SIGTERM or SIGHUP stops everything it
started. One dev runs per directory (DIR/dev.lock); a restart keeps the
deployments and the admin token, and adopts engines a killed dev left running.

Options:
  --dir DIR          where its state lives (default: a new temporary directory);
                     DIR/dev.env holds the URLs, the admin token and LLMGW_CA
                     (the cluster CA certificate; TLS as in production)
  --port P           every port it uses, all on 127.0.0.1 in P…P+${DEV_PORT_SPAN - 1}
                     (default: the port DIR was made with, else ${DEV_DEFAULT_PORT};
                     from ${DEV_PORT_MIN} to ${DEV_PORT_MAX}; a DIR keeps its port):
${layoutRows().map(([at, what]) => `                       ${at.padEnd(14)} ${what}\n`).join("")}\
                     Two clusters side by side need --port values at least
                     ${DEV_PORT_SPAN} apart, and different --dir.
  --load-seconds S   how long the fake engine takes to load (default 4)
  --no-samples       apply no sample deployment
                     (samples are applied on a directory's first start only:
                     later starts keep the operator's changes)
  --quiet            do not print replica states as they change
`;

/** Usage of `llmgw dev machines`. */
export const DEV_MACHINES_USAGE = `Usage: llmgw dev machines [--node NAME]

Prints what discovery sees on each simulated machine llmgw dev runs
(dev/machines: GPUs, adapters, fabrics, problems).
  --node NAME   one machine only
`;

const encoder = new TextEncoder();

/** Every dev listener is on loopback: the simulated cluster is for this machine only. */
const HOST = "127.0.0.1";

/** A simulated agent that could not start; the message names it. */
class DevAgentError extends Error {
  constructor(node: string, cause: unknown) {
    super(`agent ${node} cannot start: ${errorMessage(cause)}`, {
      cause,
    });
    this.name = "DevAgentError";
  }
}

/**
 * Runs `llmgw dev`; returns the exit code. A listener that cannot bind ends
 * it with 1 and one line on `err` naming the address, the port and, from
 * /proc, its holder; whatever had started is stopped.
 *
 * @throws {UsageError} For a bad flag, before anything starts.
 */
export async function devCommand(
  args: string[],
  write: (t: string) => void,
  stopSignal?: Promise<void>,
  err: (t: string) => void = (t) => Deno.stderr.writeSync(encoder.encode(t)),
): Promise<number> {
  if (args[0] === "machines") return await machinesCommand(args.slice(1), write);
  const { values, positionals } = parseFlags("dev", args, {
    dir: { type: "string" },
    port: { type: "string" },
    "load-seconds": { type: "string" },
    "no-samples": { type: "boolean" },
    quiet: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    write(DEV_USAGE);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(`dev: unexpected argument "${positionals[0]}"`);
  }
  const asked = values.port === undefined ? null : parseDevPort(values.port);
  const loadSeconds = values["load-seconds"] ?? "4";
  if (!(Number(loadSeconds) >= 0) || loadSeconds.trim() === "") {
    throw new UsageError(
      `dev: --load-seconds must be a number of seconds, 0 or more, got "${loadSeconds}"`,
    );
  }
  const dir = resolve(values.dir ?? await Deno.makeTempDir({ prefix: "llmgw-dev-" }));
  const made = values.dir === undefined || !existsSync(dir);
  // One dev per directory (the lock outlives no process, kill -9 included),
  // taken before anything is checked or written: a second dev must not
  // rewrite dev.env nor touch the first one's engines.
  let lock: DevLock;
  try {
    try {
      Deno.mkdirSync(dir, { recursive: true });
    } catch (e) {
      throw new DevLockError(dir, e);
    }
    lock = acquireDevLock(dir, asked ?? readDevPort(devStatePaths(dir)) ?? DEV_DEFAULT_PORT);
  } catch (e) {
    if (!(e instanceof DevLockedError || e instanceof DevLockError)) throw e;
    err(`llmgw: dev: ${e.message}\n`);
    return 1;
  }
  try {
    // Without --port a directory comes back on its own port; another one is refused.
    const recorded = readDevPort(devStatePaths(dir), DEV_PORT_MIN, DEV_PORT_MAX);
    const ports = devPorts(chooseDevPort(asked, recorded, DEV_DEFAULT_PORT));
    // Every listener is checked before anything starts or is written, so a
    // clash (another cluster on the same --port) stops dev cleanly; the
    // binds themselves still report a port taken in between.
    assertBindable("the control API", HOST, ports.control);
    assertBindable("the gateway", HOST, ports.gateway);
    for (const a of ports.agents) {
      assertBindable(`agent ${a.node}'s local API`, HOST, a.api);
      assertBindable(`agent ${a.node}'s engine proxy`, HOST, a.proxy);
    }
    if (!Deno.env.get("HF_ENDPOINT")?.trim()) {
      assertBindable("the fake hub", HOST, ports.hub);
      assertBindable("the fake hub's CDN", HOST, ports.hubCdn);
    }
    return await runCluster(dir, ports, values, loadSeconds, write, stopSignal);
  } catch (e) {
    if (
      !(e instanceof BindError || e instanceof DevAgentError || e instanceof DevPortError ||
        e instanceof DevHubError || e instanceof HubConfigError)
    ) {
      throw e;
    }
    err(`llmgw: dev: ${e.message}\n`);
    // A directory this run made holds only its lock: a failed start leaves no state behind.
    if (made) await Deno.remove(dir, { recursive: true }).catch(() => {});
    return 1;
  } finally {
    lock.release();
  }
}

async function runCluster(
  dir: string,
  ports: DevPorts,
  values: { "no-samples"?: boolean; quiet?: boolean },
  loadSeconds: string,
  write: (t: string) => void,
  stopSignal: Promise<void> | undefined,
): Promise<number> {
  // Listen for Ctrl-C before anything starts: one during start-up then
  // stops what had started instead of killing dev and leaving engines.
  const signal = stopSignal ?? stopSignalFromOs();
  const paths = devStatePaths(dir);
  prepareDevState(paths);
  // Kept across restarts: shells that sourced dev.env and dashboard sessions stay signed in.
  const admin = loadOrCreateDevAdminToken(paths);
  const adminToken = admin.token;
  // TLS as in production (design §11.2): the CA lives in the dev directory and survives restarts.
  const { tls, certPath } = await loadClusterTls(paths.control, [HOST]);
  // A state directory always gives the CA a file.
  const caPath = certPath!;
  // The hub first: the control plane resolves the samples' revisions and reads their facts there.
  const hub = await startDevHub((name) => Deno.env.get(name), {
    host: HOST,
    port: ports.hub,
    cdnPort: ports.hubCdn,
    root: ROOT,
  });
  try {
    return await runWithHub(dir, ports, values, loadSeconds, write, signal, hub, {
      adminToken,
      tokenKept: admin.kept,
      tls,
      caPath,
    });
  } finally {
    // Every exit path stops it; a dev killed outright takes it along by its stdin.
    await hub.stop();
  }
}

/** The cluster's own secrets and TLS, made before the hub starts. */
interface DevSecrets {
  adminToken: string;
  tokenKept: boolean;
  tls: ClusterTls;
  caPath: string;
}

async function runWithHub(
  dir: string,
  ports: DevPorts,
  values: { "no-samples"?: boolean; quiet?: boolean },
  loadSeconds: string,
  write: (t: string) => void,
  signal: Promise<void>,
  hub: DevHub,
  { adminToken, tokenKept, tls, caPath }: DevSecrets,
): Promise<number> {
  const paths = devStatePaths(dir);
  const gatewayToken = newToken("llmgw_gateway");
  const fromHub = await controlHub(hub.env);
  const hubConfigOfAgents = await hubConfig({ env: hub.env });
  const control = await startControl({
    hostname: HOST,
    port: ports.control,
    store: SqliteStore.open(paths.store),
    adminTokens: [adminToken],
    joinTokens: [],
    gatewayTokens: [gatewayToken],
    tls,
    thresholds: {
      heartbeat_interval_ms: 2_000,
      unreachable_after_ms: 10_000,
      lost_after_ms: 30_000,
    },
    reconcileMs: 500,
    pages: uiApp,
    modelFacts: fromHub.facts,
    commits: fromHub.commits,
  });
  // Its agents register against this URL: a later start must use the same port.
  writeDevPort(paths, ports.control);
  let gateway: FollowingGateway | null = null;
  const agents: Agent[] = [];
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      write("\nllmgw dev: stopping agents, engines, the gateway and the control plane…\n");
    } catch {
      // The terminal may be gone (SIGHUP): stopping matters more than saying so.
    }
    await Promise.all(agents.map((a) => a.stop({ stopEngines: true }).catch(() => {})));
    await gateway?.close();
    await control.close();
  };
  try {
    // The gateway follows the control plane's ready endpoints (design §12).
    gateway = await startEmbeddedGateway({
      hostname: HOST,
      port: ports.gateway,
      controlUrl: control.url,
      token: gatewayToken,
      intervalMs: 500,
      tls,
    });
    // Agents join as on a real host: a join token that pins the CA by its key hash.
    const joinToken = `${
      (await control.cp.tokens.create({
        kind: "join",
        description: "llmgw dev's simulated nodes",
      })).token
    }.${tls.caHash}`;
    const engineRange = {
      from: ports.agents[0].engines.from,
      to: ports.agents[ports.agents.length - 1].engines.to,
    };
    write(engineLeftReport(
      scanEnginesLeft(dir, DEV_NODES.map(([n]) => n), engineRange),
      engineRange,
    ));
    for (const [i, [nodeId, machine]] of DEV_NODES.entries()) {
      const configPath = join(SIM, machine, "agent.json");
      const config = resolveConfigPaths(
        parseAgentConfig(Deno.readTextFileSync(configPath), configPath),
        configPath,
      );
      const gpuMib = await smallestGpuMib(config);
      const agent = new Agent({
        controlUrl: control.url,
        joinToken,
        nodeId,
        hostname: nodeId,
        stateDir: join(dir, "agents", nodeId),
        discovery: {
          nvidiaSmi: config.nvidia_smi,
          sysfsRoot: config.sysfs_root,
          fabrics: config.fabrics,
        },
        labels: { "llmgw.io/simulated": machine },
        mgmtAddr: HOST,
        mgmtInterface: "lo",
        // All simulated nodes share this host: each gets its own port range.
        ports: ports.agents[i].engines,
        listen: { hostname: HOST, port: ports.agents[i].api },
        proxyListen: { hostname: HOST, port: ports.agents[i].proxy },
        supervisor: {
          tickMs: 250,
          env: {
            PATH: `${SHIMS}:${Deno.env.get("PATH") ?? ""}`,
            // The Deno running dev runs the fake engines: `deno` need not be on PATH (npx).
            FAKE_ENGINE_DENO: Deno.execPath(),
            FAKE_ENGINE_LOAD_SECONDS: loadSeconds,
            FAKE_ENGINE_PROGRESS: "lines",
            // Engines run out of memory as on this machine's GPUs (dev/fake_engine/README.md).
            ...(gpuMib === null ? {} : { FAKE_ENGINE_GPU_MEMORY_MIB: String(gpuMib) }),
          },
        },
        // Models come from dev's hub into each agent's cache; engines start from it, offline.
        models: {
          cache: cacheSettings({}, join(dir, "agents", nodeId), dir),
          hub: hubConfigOfAgents,
        },
        logSink: Deno.env.get("LLMGW_DEV_VERBOSE") ? undefined : () => {},
      });
      try {
        await agent.start();
      } catch (e) {
        if (e instanceof BindError) throw e;
        throw new DevAgentError(nodeId, e);
      }
      agents.push(agent);
    }
    // Samples are placed once every node has registered, so `spread` can spread.
    const deadline = Date.now() + 15_000;
    while (control.cp.inventory.listNodes().length < DEV_NODES.length && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    writeDevEnv(paths, {
      url: control.url,
      token: adminToken,
      gatewayUrl: gateway.url,
      caPath,
    });
    write(devBanner({
      controlUrl: control.url,
      gatewayUrl: gateway.url,
      dir,
      envPath: paths.env,
      caPath,
      nodes: DEV_NODES.map(([n, m]) => `${n} (${m})`),
      apiKeys: control.cp.apiKeys.list().length,
      tokenKept,
      cli: devCliCommand(),
      hub: hub.describe,
    }));
    if (!values["no-samples"]) await applySamplesOnce(dir, control.cp, write);
    // Show every change of a replica's state until stopped.
    let last = "";
    let done = false;
    signal.then(() => done = true);
    while (!done) {
      const replicas = control.cp.replicas();
      const table = replicaTable(replicas);
      if (table !== last && !values.quiet) write(`\n${new Date().toISOString()}\n${table}\n`);
      last = table;
      await Promise.race([signal, new Promise((r) => setTimeout(r, 1_000))]);
    }
  } finally {
    await stop();
  }
  return 0;
}

/**
 * The memory of a simulated machine's GPUs as its discovery inventory
 * reports it, in MiB, for its fake engines: the smallest when they differ,
 * so an engine is never given more than its GPU has; null when unknown.
 */
async function smallestGpuMib(config: ReturnType<typeof parseAgentConfig>): Promise<number | null> {
  const inventory = await discoverInventory({
    nvidiaSmi: config.nvidia_smi,
    sysfsRoot: config.sysfs_root,
    fabrics: config.fabrics,
  });
  const sizes = inventory.gpus.map((g) => g.memory_total_mb).filter((m) => m !== null);
  return sizes.length === 0 ? null : Math.min(...sizes);
}

/** The file that records a directory's first start: samples are applied once, then never again. */
export const SAMPLES_MARKER = "samples-applied";

/**
 * Applies the sample deployments on a directory's first start only: later
 * starts keep what the operator made of them (a scale to 1 stays 1, a
 * deleted sample stays deleted). A directory whose store already holds
 * deployments counts as started before.
 */
async function applySamplesOnce(
  dir: string,
  cp: ControlPlane,
  write: (t: string) => void,
): Promise<void> {
  const marker = join(dir, SAMPLES_MARKER);
  let applied: string | null = null;
  try {
    applied = Deno.readTextFileSync(marker).trim();
  } catch {
    // First start of this directory.
  }
  if (applied !== null || cp.deployments.list().length > 0) {
    write(
      `keeping this directory's deployments: the samples were applied on its first start` +
        `${applied ? ` (${applied})` : ""} and are not applied again\n`,
    );
    return;
  }
  for (const file of [...Deno.readDirSync(SAMPLES)].map((e) => e.name).sort()) {
    const path = join(SAMPLES, file);
    const { deployment } = parseDeploymentText(Deno.readTextFileSync(path), path);
    await cp.deployments.apply(deployment);
    write(`applied ${file}: ${deployment.name} (${deployment.replicas} replicas)\n`);
  }
  Deno.writeTextFileSync(marker, `${new Date().toISOString()}\n`);
}

/**
 * Resolves on the first SIGINT, SIGTERM or SIGHUP: a closed terminal stops
 * the cluster as Ctrl-C does, instead of killing dev and leaving its engines.
 */
async function stopSignalFromOs(): Promise<void> {
  await stopSignal([...STOP_SIGNALS, "SIGHUP"]);
}

/** `llmgw dev machines`: what discovery sees on each simulated machine dev runs. */
async function machinesCommand(args: string[], write: (t: string) => void): Promise<number> {
  const { values } = parseFlags("dev machines", args, {
    node: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    write(DEV_MACHINES_USAGE);
    return 0;
  }
  const all: [string, string][] = [];
  for (const e of Deno.readDirSync(SIM)) {
    try {
      Deno.statSync(join(SIM, e.name, "agent.json"));
      all.push([e.name, join(SIM, e.name)]);
    } catch {
      // Not a machine directory.
    }
  }
  all.sort((a, b) => compareNatural(a[0], b[0]));
  const chosen = values.node === undefined ? all : all.filter(([n]) => n === values.node);
  if (chosen.length === 0) {
    throw new UsageError(
      `dev: no simulated machine "${values.node}" (known: ${all.map(([n]) => n).join(", ")})`,
    );
  }
  for (const [name, dir] of chosen) {
    const configPath = join(dir, "agent.json");
    const config = resolveConfigPaths(
      parseAgentConfig(await Deno.readTextFile(configPath), configPath),
      configPath,
    );
    const inventory = await discoverInventory({
      nvidiaSmi: config.nvidia_smi,
      sysfsRoot: config.sysfs_root,
      fabrics: config.fabrics,
    });
    write(`=== ${name} ===\n${formatInventory(inventory)}\n\n`);
  }
  return 0;
}
