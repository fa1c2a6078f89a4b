/**
 * Agent restarts under steady traffic (issue #23 item 4; design §9.2, §12):
 * what a client of the gateway sees when the agent of a node serving a
 * model is killed with SIGKILL, or stopped with SIGTERM and started again
 * (a planned restart or upgrade), while its engines run on.
 *
 * One run: an in-process control plane (plain HTTP), one or two `llmgw
 * agent run` processes on simulated 8-GPU H100 nodes with fake engines, a
 * deployment of as many replicas (tensor_parallel 8: one per node), and an
 * in-process gateway following the control plane at its default poll period.
 * Requests (non-streaming chat completions) are sent at a steady rate, open
 * loop; after a warm-up the agent of the first node gets the fault, and is
 * started again on the same state directory and ports after `restartAfterMs`
 * (systemd's `RestartSec=5s` for a crash; at once for `systemctl restart`).
 * Sending stops a few seconds after the new agent's proxy listens.
 *
 * Counts: requests sent, failed ones by status, the longest time without a
 * successful answer completing, the slowest answer, and how long the node's
 * engine proxy was away (fault to listening again).
 *
 * Every process it starts (agents and their engines' process groups) is
 * killed by pid on the way out, even on failure.
 *
 * With `--stream-seconds S`, one streamed answer of S seconds is begun just
 * before each fault, and its end is reported: whether its `[DONE]` came.
 *
 * Run: `deno run -A bench/agent_restart.ts [--rate 20] [--restart-after 5]
 * [--stream-seconds S]`.
 *
 * @module
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";
import { spawnAgent, stopAgentsAndEngines } from "../tests/agent_processes.ts";
import { freePortsIn, portBlock } from "../tests/port_plan.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import { until } from "../tests/until.ts";
import { startTestHub } from "../tests/test_hub.ts";

/** What happens to the agent. */
export type Fault = "kill9" | "restart";

/** One run's settings. */
export interface RestartRun {
  /** SIGKILL, or SIGTERM (a planned restart). */
  fault: Fault;
  /** Replicas of the model, one per node: 1 or 2. */
  replicas: 1 | 2;
  /** Requests per second. */
  rate: number;
  /** From the agent's exit to its new start, in ms. */
  restartAfterMs: number;
  /** Traffic before the fault, in ms (default 3 000). */
  warmMs?: number;
  /** Traffic after the new agent's proxy listens, in ms (default 4 000). */
  tailMs?: number;
  /**
   * The ports its agents take, 600 at least (default 20000-20999): node i's
   * engines block i of 200, its local API and proxy free ports of block 2,
   * planned rather than picked by the kernel because the agent comes back
   * on them.
   */
  ports?: PortRange;
  /** A streamed answer of this many ms, begun just before the fault (default: none). */
  streamMs?: number;
}

/** What the clients saw. */
export interface RestartResult {
  /** Requests sent. */
  sent: number;
  /** Answered 200. */
  ok: number;
  /** Failed requests by HTTP status ("error" when none came). */
  failed: Record<string, number>;
  /** The longest time no successful answer completed, from the fault on, in ms. */
  longestGapMs: number;
  /** The slowest successful answer, in ms. */
  maxLatencyMs: number;
  /** From the fault until the node's engine proxy listened again, in ms. */
  awayMs: number;
  /** How the long stream ended: "complete" (its `[DONE]` came), else what happened; null without one. */
  stream: string | null;
}

const ADMIN = "agent-restart-admin-token";
const JOIN = "agent-restart-join-token";
/** Requests in flight at most: an open loop with a bound. */
const MAX_IN_FLIGHT = 512;
/** The longest run, whatever happens, in ms. */
const MAX_RUN_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Whether something listens on `port` on loopback. */
async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

/** Runs one scenario; see the module's documentation. */
export async function runAgentRestart(o: RestartRun): Promise<RestartResult> {
  const warmMs = o.warmMs ?? 3_000;
  const tailMs = o.tailMs ?? 4_000;
  const range = o.ports ?? { from: 20_000, to: 20_999 };
  const listeners = freePortsIn(portBlock(range, 2), 4);
  // A long stream at 2 ms a token would be mostly per-event overhead: 50 ms then.
  const tokenMs = o.streamMs === undefined ? 2 : 50;
  await using hub = await startTestHub(["org/steady"]);
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_restart_" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: [JOIN],
    thresholds: { heartbeat_interval_ms: 1_000 },
    reconcileMs: 200,
  });
  const nodes = o.replicas === 2 ? ["node-a", "node-b"] : ["node-a"];
  const ports = new Map(
    nodes.map((n, i) => [n, { api: listeners[2 * i], proxy: listeners[2 * i + 1] }]),
  );
  const started: Deno.ChildProcess[] = [];
  const current = new Map<string, Deno.ChildProcess>();
  const spawn = (node: string, i: number) => {
    const p = ports.get(node)!;
    const child = spawnAgent(
      control.url,
      JOIN,
      node,
      "dgx_h100_idle",
      join(dir, node),
      portBlock(range, i),
      // Up to a million tokens, so a long stream is one request.
      { FAKE_ENGINE_TOKEN_DELAY_MS: String(tokenMs), FAKE_ENGINE_TOKENS: "1000000", ...hub.env },
      ["--listen", `127.0.0.1:${p.api}`, "--proxy-listen", `127.0.0.1:${p.proxy}`],
    );
    started.push(child);
    current.set(node, child);
  };
  const admin = async (method: string, path: string, body?: unknown) =>
    await (await fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    })).json();
  const table = new EndpointTable();
  const follower = followControlPlane(control.url, ADMIN, table);
  const gateway = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  const wait = { timeoutMs: 60_000, intervalMs: 100 };
  try {
    nodes.forEach(spawn);
    await until(
      "the nodes registered",
      async () => (await admin("GET", "/v1/nodes")).nodes?.length === nodes.length,
      wait,
    );
    const applied = await admin("POST", "/v1/deployments", {
      name: "steady",
      model: "org/steady",
      replicas: o.replicas,
      profiles: [{ name: "h100-tp8", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 8 }],
    });
    if (applied.error !== undefined) throw new Error(`apply: ${JSON.stringify(applied.error)}`);
    let replicas = "";
    const model = await until("every replica routed by the gateway", async () => {
      replicas = JSON.stringify(
        (await admin("GET", "/v1/replicas")).replicas?.map((
          r: { id: string; state: string },
        ) => [r.id, r.state]),
      );
      const m = table.readyModels()[0];
      return m !== undefined && table.endpoints(m).length === o.replicas ? m : null;
    }, { ...wait, describe: () => `replicas: ${replicas}` });

    const body = JSON.stringify({
      model,
      max_tokens: 4,
      messages: [{ role: "user", content: "hello" }],
    });
    const done: { start: number; end: number; status: string }[] = [];
    const inFlight = new Set<Promise<void>>();
    const one = async () => {
      const start = performance.now();
      let status = "error";
      try {
        const r = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: AbortSignal.timeout(30_000),
        });
        await r.arrayBuffer();
        status = String(r.status);
      } catch {
        // No answer at all: counted as "error".
      }
      done.push({ start, end: performance.now(), status });
    };

    /** One streamed answer of about `ms`, read to its end. */
    const longStream = async (ms: number): Promise<string> => {
      try {
        const r = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...JSON.parse(body), stream: true, max_tokens: ms / tokenMs }),
          signal: AbortSignal.timeout(ms + 60_000),
        });
        const text = await r.text();
        return r.status !== 200
          ? `HTTP ${r.status}`
          : text.includes("data: [DONE]")
          ? "complete"
          : "broken off";
      } catch (e) {
        return `no answer (${e instanceof Error ? e.name : e})`;
      }
    };
    let stream: Promise<string> | null = null;

    const t0 = performance.now();
    let endAt = t0 + MAX_RUN_MS;
    let faultAt = 0;
    let backAt = 0;
    const faulted = (async () => {
      if (o.streamMs !== undefined) {
        await sleep(warmMs - 200);
        stream = longStream(o.streamMs);
        await sleep(200);
      } else {
        await sleep(warmMs);
      }
      const node = nodes[0];
      const agent = current.get(node)!;
      faultAt = performance.now();
      Deno.kill(agent.pid, o.fault === "kill9" ? "SIGKILL" : "SIGTERM");
      await agent.status;
      await sleep(o.restartAfterMs);
      spawn(node, 0);
      await until("the new agent's proxy", () => listening(ports.get(node)!.proxy), wait);
      backAt = performance.now();
      endAt = backAt + tailMs;
    })();
    let failedFault: unknown = null;
    faulted.catch((e) => {
      failedFault = e;
      endAt = 0;
    });
    const interval = 1_000 / o.rate;
    for (let i = 0; i < o.rate * (MAX_RUN_MS / 1_000); i++) {
      const due = t0 + i * interval;
      if (due > endAt) break;
      await sleep(due - performance.now());
      if (inFlight.size >= MAX_IN_FLIGHT) {
        done.push({ start: due, end: due, status: "not sent (client limit)" });
        continue;
      }
      const p = one().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    await faulted.catch(() => {});
    const streamEnd = stream === null ? null : await stream;
    if (failedFault !== null) throw failedFault;

    const failed: Record<string, number> = {};
    for (const d of done) if (d.status !== "200") failed[d.status] = (failed[d.status] ?? 0) + 1;
    const oks = done.filter((d) => d.status === "200").map((d) => d.end).sort((a, b) => a - b);
    let gap = 0;
    let prev = faultAt;
    for (const end of oks) {
      if (end < faultAt) continue;
      gap = Math.max(gap, end - prev);
      prev = end;
    }
    return {
      sent: done.length,
      ok: oks.length,
      failed,
      longestGapMs: Math.round(gap),
      maxLatencyMs: Math.round(
        Math.max(0, ...done.filter((d) => d.status === "200").map((d) => d.end - d.start)),
      ),
      awayMs: Math.round(backAt - faultAt),
      stream: streamEnd,
    };
  } finally {
    await stopAgentsAndEngines(started, nodes.map((node) => join(dir, node)), "SIGKILL");
    await follower.stop();
    await gateway.close();
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** One markdown table row of a run. */
export function resultRow(o: RestartRun, r: RestartResult): string {
  const failed = Object.entries(r.failed).map(([s, n]) => `${n} × ${s}`).join(", ") || "0";
  const fault = o.fault === "kill9"
    ? `\`kill -9\`, restarted after ${o.restartAfterMs / 1_000} s`
    : "planned restart (SIGTERM, started again at once)";
  const stream = r.stream === null ? "" : `; a ${o.streamMs! / 1_000} s stream: ${r.stream}`;
  return `| ${fault}${stream} | ${o.replicas} | ${o.rate} | ${r.sent} | ${failed} | ` +
    `${(r.longestGapMs / 1_000).toFixed(2)} s | ${(r.maxLatencyMs / 1_000).toFixed(2)} s | ` +
    `${(r.awayMs / 1_000).toFixed(2)} s |`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      rate: { type: "string", default: "20" },
      "restart-after": { type: "string", default: "5" },
      "stream-seconds": { type: "string" },
    },
  });
  const streamMs = values["stream-seconds"] === undefined
    ? undefined
    : Number(values["stream-seconds"]) * 1_000;
  const rate = Number(values.rate);
  const after = Number(values["restart-after"]) * 1_000;
  console.log(
    "| fault | replicas | req/s | sent | failed | longest gap without an answer | slowest answer | proxy away |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const fault of ["restart", "kill9"] as const) {
    for (const replicas of [1, 2] as const) {
      const run = {
        fault,
        replicas,
        rate,
        restartAfterMs: fault === "kill9" ? after : 0,
        streamMs,
      };
      console.log(resultRow(run, await runAgentRestart(run)));
    }
  }
}
