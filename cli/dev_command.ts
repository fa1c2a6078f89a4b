/**
 * `llmgw dev`: the all-in-one local cluster (design §3), the first-run
 * experience. On one machine with no GPU it starts a control plane with an
 * embedded store, agents on simulated hardware (tests/fixtures/sim: idle
 * machines derived from recorded nvidia-smi outputs and sysfs trees), the
 * fake engine in place of vLLM and SGLang (testing/), and sample
 * deployments; then it shows replicas go from starting to loading (with
 * progress) to ready. Ctrl-C or SIGTERM stops everything it started,
 * engines included.
 *
 * `llmgw dev machines [--node NAME]` prints what discovery sees on the
 * recorded and simulated machines instead.
 *
 * @module
 */
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent } from "../agent/agent.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import { formatInventory } from "../agent/inventory_table.ts";
import { SqliteStore } from "../control/sqlite_store.ts";
import { startControl } from "../control/server.ts";
import { newToken } from "../control/tokens.ts";
import { discoverInventory } from "../discovery/mod.ts";
import { parseDeploymentText } from "../deployment/load.ts";
import { replicaTable } from "./admin_commands.ts";
import { startFollowingGateway } from "../gateway/server.ts";
import { parseFlags, UsageError } from "./usage_error.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const MACHINES = join(ROOT, "tests/fixtures/machines");
const SIM = join(ROOT, "tests/fixtures/sim");
const SHIMS = join(ROOT, "testing/bin");
const SAMPLES = join(ROOT, "examples/dev");

/** The simulated cluster: node id → simulated machine. */
export const DEV_NODES: readonly [string, string][] = [
  ["h100-a", "dgx_h100_idle"],
  ["h100-b", "dgx_h100_idle"],
  ["a100-a", "hgx_a100_40g"],
  ["l40s-a", "l40s_4x"],
];

/** Runs `llmgw dev`. */
export async function devCommand(
  args: string[],
  write: (t: string) => void,
  stopSignal?: Promise<void>,
): Promise<number> {
  if (args[0] === "machines") return await machinesCommand(args.slice(1), write);
  const { values } = parseFlags("dev", args, {
    dir: { type: "string" },
    port: { type: "string" },
    "load-seconds": { type: "string" },
    "no-samples": { type: "boolean" },
    quiet: { type: "boolean" },
  });
  const dir = resolve(values.dir ?? await Deno.makeTempDir({ prefix: "llmgw-dev-" }));
  const port = values.port === undefined ? 7070 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`dev: --port must be a port number, got "${values.port}"`);
  }
  const loadSeconds = values["load-seconds"] ?? "4";
  Deno.mkdirSync(join(dir, "control"), { recursive: true });
  const adminToken = newToken("llmgw_admin");
  const joinToken = newToken("llmgw_join");
  const control = await startControl({
    hostname: "127.0.0.1",
    port,
    store: SqliteStore.open(join(dir, "control", "llmgw.db")),
    adminTokens: [adminToken],
    joinTokens: [joinToken],
    thresholds: {
      heartbeat_interval_ms: 2_000,
      unreachable_after_ms: 10_000,
      lost_after_ms: 30_000,
    },
    reconcileMs: 500,
  });
  // The gateway follows the control plane's ready endpoints (design §12).
  const gateway = startFollowingGateway({
    hostname: "127.0.0.1",
    port: port === 0 ? 0 : port + 10,
    controlUrl: control.url,
    token: adminToken,
    intervalMs: 500,
  });
  const agents: Agent[] = [];
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    write("\nllmgw dev: stopping agents, engines, the gateway and the control plane…\n");
    await Promise.all(agents.map((a) => a.stop({ stopEngines: true }).catch(() => {})));
    await gateway.close();
    await control.close();
  };
  try {
    for (const [i, [nodeId, machine]] of DEV_NODES.entries()) {
      const configPath = join(SIM, machine, "agent.json");
      const config = resolveConfigPaths(
        parseAgentConfig(Deno.readTextFileSync(configPath), configPath),
        configPath,
      );
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
        mgmtAddr: "127.0.0.1",
        mgmtInterface: "lo",
        // All simulated nodes share this host: each gets its own port range.
        ports: { from: 18000 + 1000 * i, to: 18999 + 1000 * i },
        listen: { hostname: "127.0.0.1", port: 0 },
        supervisor: {
          tickMs: 250,
          env: {
            PATH: `${SHIMS}:${Deno.env.get("PATH") ?? ""}`,
            FAKE_ENGINE_LOAD_SECONDS: loadSeconds,
            FAKE_ENGINE_PROGRESS: "lines",
          },
        },
        logSink: Deno.env.get("LLMGW_DEV_VERBOSE") ? undefined : () => {},
      });
      await agent.start();
      agents.push(agent);
    }
    // Samples are placed once every node has registered, so `spread` can spread.
    const deadline = Date.now() + 15_000;
    while (control.cp.inventory.listNodes().length < DEV_NODES.length && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const env =
      `LLMGW_URL=${control.url}\nLLMGW_TOKEN=${adminToken}\nLLMGW_GATEWAY_URL=${gateway.url}\n`;
    Deno.writeTextFileSync(join(dir, "dev.env"), env, { mode: 0o600 });
    write(
      `llmgw dev: a local cluster on simulated hardware (no GPU needed)\n` +
        `  control plane  ${control.url}   state in ${dir}\n` +
        `  gateway        ${gateway.url}/v1 (OpenAI-compatible; open to loopback until an API key exists)\n` +
        `  nodes          ${DEV_NODES.map(([n, m]) => `${n} (${m})`).join(", ")}\n` +
        `  engines        the fake engine (testing/) stands in for vLLM and SGLang\n` +
        `  admin token    written to ${join(dir, "dev.env")}; use it with:\n` +
        `    set -a; . ${join(dir, "dev.env")}; set +a\n` +
        `    deno task llmgw get replicas\n` +
        `    deno task llmgw explain llama-405b\n` +
        `  once a replica is ready, ask it through the gateway:\n` +
        `    curl -s ${gateway.url}/v1/chat/completions -H 'content-type: application/json' \\\n` +
        `      -d '{"model": "llama-8b", "messages": [{"role": "user", "content": "hi"}]}'\n\n`,
    );
    if (!values["no-samples"]) {
      for (const file of [...Deno.readDirSync(SAMPLES)].map((e) => e.name).sort()) {
        const path = join(SAMPLES, file);
        const { deployment } = parseDeploymentText(Deno.readTextFileSync(path), path);
        await control.cp.deployments.apply(deployment);
        write(`applied ${file}: ${deployment.name} (${deployment.replicas} replicas)\n`);
      }
    }
    // Show every change of a replica's state until stopped.
    const signal = stopSignal ?? new Promise<void>((resolve) => {
      Deno.addSignalListener("SIGINT", () => resolve());
      Deno.addSignalListener("SIGTERM", () => resolve());
    });
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

/** `llmgw dev machines`: what discovery sees on each recorded or simulated machine. */
async function machinesCommand(args: string[], write: (t: string) => void): Promise<number> {
  const { values } = parseFlags("dev machines", args, { node: { type: "string" } });
  const all: [string, string][] = [];
  for (const root of [MACHINES, SIM]) {
    for (const e of Deno.readDirSync(root)) {
      try {
        Deno.statSync(join(root, e.name, "agent.json"));
        all.push([e.name, join(root, e.name)]);
      } catch {
        // Not a machine directory.
      }
    }
  }
  all.sort((a, b) => a[0].localeCompare(b[0]));
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
