/**
 * An in-process agent on one of the simulated machines (dev/machines),
 * running the fake engine, for cluster tests: the options every such test
 * gives, in one place.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { AgentOptions } from "../agent/agent.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** What differs between simulated agents. */
export interface SimAgentSpec {
  /** The control plane's URL. */
  controlUrl: string;
  /** A join token it accepts. */
  joinToken: string;
  /** Node id (and host name). */
  id: string;
  /** The simulated machine, a directory of dev/machines. */
  machine: string;
  /** Where agents keep their state: this agent's is DIR/agents/ID. */
  dir: string;
  /** Its engines' port range, from the test file's plan (tests/port_plan.ts). */
  ports: PortRange;
  /** Extra environment for its engines (FAKE_ENGINE_* knobs). */
  env?: Record<string, string>;
  /** The supervisor's load timeout, when the test needs a short one. */
  loadTimeoutMs?: number;
  /** Where its log lines go. */
  logSink: (line: string) => void;
}

/** The agent options of a simulated node on loopback, fast retries and ticks. */
export function simAgentOptions(s: SimAgentSpec): AgentOptions {
  const configPath = join(ROOT, "dev/machines", s.machine, "agent.json");
  const config = resolveConfigPaths(
    parseAgentConfig(Deno.readTextFileSync(configPath), configPath),
    configPath,
  );
  return {
    controlUrl: s.controlUrl,
    joinToken: s.joinToken,
    nodeId: s.id,
    hostname: s.id,
    stateDir: join(s.dir, "agents", s.id),
    discovery: {
      nvidiaSmi: config.nvidia_smi,
      sysfsRoot: config.sysfs_root,
      fabrics: config.fabrics,
    },
    mgmtAddr: "127.0.0.1",
    mgmtInterface: "lo",
    ports: s.ports,
    listen: { hostname: "127.0.0.1", port: 0 },
    proxyListen: { hostname: "127.0.0.1", port: 0 },
    retry: { initialMs: 100, maxMs: 500, factor: 2 },
    supervisor: {
      tickMs: 100,
      ...(s.loadTimeoutMs === undefined ? {} : { loadTimeoutMs: s.loadTimeoutMs }),
      env: {
        PATH: `${join(ROOT, "dev/fake_engine/bin")}:${Deno.env.get("PATH")}`,
        FAKE_ENGINE_LOAD_SECONDS: "0.5",
        FAKE_ENGINE_ACCESS_LOG: "0",
        ...s.env,
      },
    },
    logSink: s.logSink,
  };
}

/** What a cluster test started, to stop. */
export interface SimCluster {
  /** The agents, by node id. */
  agents: ReadonlyMap<
    string,
    {
      status(): { shards: { pid: number | null }[] };
      stop(o: { stopEngines: boolean }): Promise<void>;
    }
  >;
  /** The gateway's control-plane follower. */
  follower: { stop(): Promise<void> };
  /** The gateway. */
  gateway: { close(): Promise<void> };
  /** The control plane. */
  control: { close(): Promise<void> };
  /** Engine process groups seen, killed at the end whatever happened. */
  pids: Set<number>;
  /** The test's directory, removed. */
  dir: string;
}

/**
 * Stops everything a cluster test started, on failure too: agents with
 * their engines, the gateway and its follower, the control plane, then any
 * engine process group still there, by pid; and removes the directory.
 */
export async function stopSimCluster(c: SimCluster): Promise<void> {
  for (const a of c.agents.values()) {
    for (const s of a.status().shards) if (s.pid !== null) c.pids.add(s.pid);
    await a.stop({ stopEngines: true }).catch(() => {});
  }
  await c.follower.stop();
  await c.gateway.close();
  await c.control.close().catch(() => {});
  for (const pid of c.pids) {
    try {
      Deno.kill(-pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
  await Deno.remove(c.dir, { recursive: true });
}
