/**
 * Fixtures for the port-ownership acceptance tests (issue #13): a control
 * plane, a gateway following it and agents on simulated hardware running the
 * fake engine, each agent on a port range the test gives it; and "foreign"
 * HTTP servers standing in for a process llmgw did not start (a hand-started
 * `vllm serve`, a second dev cluster) on a port an engine wants.
 *
 * Everything runs on loopback; every engine is killed by process group and
 * every server closed in `finally`, also when the test fails.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent } from "../agent/agent.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { type RunningControl, startControl } from "../control/server.ts";
import type { ReplicaView } from "../control/views.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import type { ShardReport } from "../supervisor/types.ts";
import { enginePids } from "./agent_processes.ts";
import { until } from "./until.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The admin token of the test control plane. */
export const ADMIN = "port-test-admin-token";
const JOIN = "port-test-join-token";

/** How waits poll: agents heartbeat every 300 ms, fake engines load in about half a second. */
export const POLL = { timeoutMs: 30_000, intervalMs: 50 };

/** A request a foreign server received. */
export interface ForeignRequest {
  /** HTTP method. */
  method: string;
  /** Path and query. */
  path: string;
  /** The caller's user agent, when sent. */
  userAgent: string | null;
  /** The Authorization header it carried: an engine key sent here is a leaked key. */
  authorization: string | null;
}

/** An HTTP server llmgw did not start, holding a port. */
export interface ForeignServer {
  /** The port it holds. */
  port: number;
  /** The address it listens on. */
  hostname: string;
  /** Every request it answered, in order (each with `{"foreign": true}`). */
  requests: ForeignRequest[];
  /** Stops it; safe to call twice. */
  close(): Promise<void>;
}

/** The body every foreign server answers with: recognisable in any client's hands. */
export const FOREIGN_BODY = { foreign: true };

/**
 * Starts a foreign server on `hostname:port`.
 *
 * @throws {Deno.errors.AddrInUse} When something listens on the port already.
 */
export function serveForeign(port: number, hostname = "0.0.0.0"): ForeignServer {
  const requests: ForeignRequest[] = [];
  const server = Deno.serve({ hostname, port, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    requests.push({
      method: req.method,
      path: url.pathname + url.search,
      userAgent: req.headers.get("user-agent"),
      authorization: req.headers.get("authorization"),
    });
    return Response.json(FOREIGN_BODY);
  });
  let closed: Promise<void> | null = null;
  return {
    port,
    hostname,
    requests,
    close: () => closed ??= server.shutdown(),
  };
}

/**
 * Binds a foreign server on `port` as soon as the port is free: retried every
 * few milliseconds while the previous holder's socket is still there (a
 * killed engine's socket goes when the kernel reaps it).
 */
export function serveForeignWhenFree(
  port: number,
  hostname = "0.0.0.0",
  timeoutMs = 10_000,
): Promise<ForeignServer> {
  return until(`port ${port} free for a foreign server`, () => {
    try {
      return serveForeign(port, hostname);
    } catch (e) {
      if (e instanceof Deno.errors.AddrInUse) return null;
      throw e;
    }
  }, { timeoutMs, intervalMs: 2 });
}

/**
 * A foreign server on the first port of the first block of `size` ports
 * from `candidates` whose first port can be bound; the range starting there
 * is what the agent gets. Candidates are spread so that a port some other
 * process on the host holds moves the test rather than failing it.
 */
export function foreignAtRangeStart(
  candidates: readonly number[],
  size = 100,
): { foreign: ForeignServer; range: PortRange } {
  for (const from of candidates) {
    try {
      return { foreign: serveForeign(from), range: { from, to: from + size - 1 } };
    } catch (e) {
      if (!(e instanceof Deno.errors.AddrInUse)) throw e;
    }
  }
  throw new Error(`Cannot start a foreign server: ports ${candidates.join(", ")} are all in use`);
}

/** Options of {@link PortCluster.startAgent}. */
export interface TestAgentOptions {
  /** Node id; also names the state directory, so the same id restarts the same agent. */
  id: string;
  /** The agent's port range. */
  ports: PortRange;
  /** Simulated machine under dev/machines (default `l40s_4x`). */
  machine?: string;
  /** Extra engine environment. */
  env?: Record<string, string>;
  /** The supervisor's tick (default 100 ms). */
  tickMs?: number;
  /** The supervisor's restart delays (default: its own). */
  backoff?: BackoffPolicy;
}

/** An agent started by the cluster, with its log lines. */
export interface TestAgent {
  /** The agent. */
  agent: Agent;
  /** Its state directory. */
  stateDir: string;
  /** Every JSON log line it wrote, in order. */
  logs: string[];
}

/** A supervisor event as the agent logged it. */
export interface LoggedSupervisorEvent {
  /** The event kind (`state`, `adopted`, `spawned`, `port_held`, …). */
  kind: string;
  /** The shard. */
  shard: string | null;
  /** In words: for `state`, `FROM → TO: why`. */
  msg: string;
}

/** The supervisor events in an agent's log lines, in order. */
export function supervisorEvents(logs: readonly string[]): LoggedSupervisorEvent[] {
  const out: LoggedSupervisorEvent[] = [];
  for (const line of logs) {
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    if (v.component !== "supervisor" || typeof v.kind !== "string") continue;
    out.push({
      kind: v.kind,
      shard: typeof v.shard === "string" ? v.shard : null,
      msg: String(v.msg),
    });
  }
  return out;
}

/** A control-plane event. */
export interface ControlEvent {
  /** Event kind (`shard_notice`, `shard_failed`, …). */
  kind: string;
  /** What it is about (`replica/ID`, `node/ID`). */
  subject: string;
  /** In words. */
  message: string;
}

/** What a test gets from {@link withPortCluster}. */
export interface PortCluster {
  /** The control plane. */
  control: RunningControl;
  /** The gateway's base URL. */
  gateway: string;
  /** The gateway's endpoint table, as its follower last set it. */
  table: EndpointTable;
  /** Calls the admin API. */
  admin(method: string, path: string, body?: unknown): Promise<Response>;
  /** The replicas, as `GET /v1/replicas` lists them. */
  replicas(): Promise<ReplicaView[]>;
  /** The control plane's events, oldest first. */
  events(): Promise<ControlEvent[]>;
  /** Starts an agent (a second call with the same id restarts it on the same state). */
  startAgent(options: TestAgentOptions): Promise<TestAgent>;
  /** Process groups killed at the end (engines, stand-ins). */
  groups: Set<number>;
  /** Servers closed at the end. */
  servers: ForeignServer[];
}

/**
 * Runs `fn` against a control plane, a gateway and the agents it starts;
 * afterwards stops the agents with their engines, kills every engine group
 * any agent's pid files or statuses named, and closes the servers.
 */
export async function withPortCluster(fn: (c: PortCluster) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_port_test_" });
  const groups = new Set<number>();
  const servers: ForeignServer[] = [];
  const agents: TestAgent[] = [];
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: [JOIN],
    thresholds: { heartbeat_interval_ms: 300, unreachable_after_ms: 3_000, lost_after_ms: 6_000 },
    reconcileMs: 200,
  });
  const table = new EndpointTable();
  const follower = followControlPlane(control.url, ADMIN, table, { intervalMs: 100 });
  const gateway = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const startAgent = async (o: TestAgentOptions): Promise<TestAgent> => {
    const configPath = join(ROOT, "dev/machines", o.machine ?? "l40s_4x", "agent.json");
    const config = resolveConfigPaths(
      parseAgentConfig(Deno.readTextFileSync(configPath), configPath),
      configPath,
    );
    const stateDir = join(dir, "agents", o.id);
    const logs: string[] = [];
    const agent = new Agent({
      controlUrl: control.url,
      joinToken: JOIN,
      nodeId: o.id,
      hostname: o.id,
      stateDir,
      discovery: {
        nvidiaSmi: config.nvidia_smi,
        sysfsRoot: config.sysfs_root,
        fabrics: config.fabrics,
      },
      mgmtAddr: "127.0.0.1",
      mgmtInterface: "lo",
      ports: o.ports,
      listen: { hostname: "127.0.0.1", port: 0 },
      proxyListen: { hostname: "127.0.0.1", port: 0 },
      retry: { initialMs: 100, maxMs: 500, factor: 2 },
      supervisor: {
        tickMs: o.tickMs ?? 100,
        stopGraceMs: 2_000,
        ...(o.backoff === undefined ? {} : { backoff: o.backoff }),
        env: {
          PATH: `${join(ROOT, "dev/fake_engine/bin")}:${Deno.env.get("PATH")}`,
          FAKE_ENGINE_LOAD_SECONDS: "0.5",
          FAKE_ENGINE_ACCESS_LOG: "0",
          ...o.env,
        },
      },
      logSink: (line) => logs.push(line),
    });
    const started: TestAgent = { agent, stateDir, logs };
    agents.push(started);
    await agent.start();
    return started;
  };
  try {
    await fn({
      control,
      gateway: gateway.url,
      table,
      admin,
      replicas: async () => (await (await admin("GET", "/v1/replicas")).json()).replicas,
      events: async () => (await (await admin("GET", "/v1/events?limit=500")).json()).events,
      startAgent,
      groups,
      servers,
    });
  } finally {
    for (const a of agents) {
      for (const s of a.agent.status().shards) if (s.pid !== null) groups.add(s.pid);
      for (const pid of enginePids(a.stateDir)) groups.add(pid);
    }
    // An agent already stopped without its engines answers its first stop again.
    for (const a of agents) await a.agent.stop({ stopEngines: true }).catch(() => {});
    await follower.stop();
    await gateway.close();
    await control.close().catch(() => {});
    for (const pgid of groups) {
      try {
        Deno.kill(-pgid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    for (const s of servers) await s.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A one-replica, one-GPU deployment of the fake vLLM on the L40S machine. */
export function oneShardDeployment(name: string): Record<string, unknown> {
  return {
    name,
    model: `org/${name}`,
    replicas: 1,
    profiles: [{ name: "l40s-tp1", engine: "vllm", gpu_class: "l40s-45g", tensor_parallel: 1 }],
  };
}

/** The agent's one shard of `deployment`, when it has one. */
export function shardOf(agent: Agent, deployment: string): ShardReport | null {
  return agent.status().shards.find((s) => s.id.startsWith(`${deployment}-`)) ?? null;
}

/** Waits until the control plane lists `count` nodes. */
export async function untilNodes(c: PortCluster, count: number): Promise<void> {
  await until(`${count} node(s) registered`, async () => {
    const nodes = (await (await c.admin("GET", "/v1/nodes")).json()).nodes as unknown[];
    return nodes.length === count ? true : null;
  }, POLL);
}

/** Waits until `agent`'s shard of `deployment` is ready and returns it. */
export function untilShardReady(agent: Agent, deployment: string): Promise<ShardReport> {
  return until(`a ready shard of ${deployment}`, () => {
    const s = shardOf(agent, deployment);
    return s?.state === "ready" ? s : null;
  }, { ...POLL, describe: () => JSON.stringify(agent.status().shards) });
}

/** Sends one chat completion through the gateway; the status and the parsed body. */
export async function chat(
  gateway: string,
  model: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
  return { status: res.status, body: await res.json() };
}
