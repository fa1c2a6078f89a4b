/**
 * Rolling updates end to end (issue #17, design §6.3): a control plane with
 * its SQLite store, agents on simulated hardware running the fake engine,
 * and the real gateway in process. A rollout under steady traffic loses no
 * request and never has fewer than desired − 1 replicas ready; a revision
 * the engine refuses reverts by itself; undo; a scale restarts nothing; a
 * drain with free capacity starts the replacement first. Every engine is
 * stopped by the test, by process group, even when it fails.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { Agent } from "../agent/agent.ts";
import { rolloutCommand } from "../cli/rollout_command.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { type RunningControl, startControl } from "../control/server.ts";
import type { ReplicaView } from "../control/views.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";
import { portBlock, portsOf } from "./port_plan.ts";
import { simAgentOptions, stopSimCluster } from "./sim_agent.ts";
import { until } from "./until.ts";

const ADMIN = "test-admin-token";
const JOIN = "test-join-token";

/** Agents heartbeat every 300 ms and engines load in about 0.5 s: generous bounds. */
const POLL = { timeoutMs: 30_000, intervalMs: 100 };
/** This file's ports (tests/port_plan.ts): one block per agent. */
const PORTS = portsOf(import.meta.url);

interface Cluster {
  control: RunningControl;
  agents: Map<string, Agent>;
  /** Starts agent `id` on block `block` of this file's ports. */
  startAgent: (id: string, block: number) => Promise<Agent>;
  gateway: string;
  admin: (method: string, path: string, body?: unknown) => Promise<Response>;
  call: (method: string, path: string, body?: unknown) => Promise<unknown>;
  pids: Set<number>;
}

async function withCluster(fn: (c: Cluster) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_rollout_test_" });
  const pids = new Set<number>();
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: SqliteStore.open(join(dir, "llmgw.db")),
    adminTokens: [ADMIN],
    joinTokens: [JOIN],
    thresholds: { heartbeat_interval_ms: 300, unreachable_after_ms: 3_000, lost_after_ms: 6_000 },
    reconcileMs: 100,
  });
  // The gateway here polls every 100 ms: ten polls of grace before a replaced replica stops.
  control.cp.state.retireGraceMs = 1_000;
  const agents = new Map<string, Agent>();
  const startAgent = async (id: string, block: number) => {
    const agent = new Agent(simAgentOptions({
      controlUrl: control.url,
      joinToken: JOIN,
      id,
      machine: "dgx_h100_idle",
      dir,
      ports: portBlock(PORTS, block),
      logSink: () => {},
    }));
    await agent.start();
    agents.set(id, agent);
    return agent;
  };
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await admin(method, path, body);
    const answer = await res.json();
    if (!res.ok) throw new Error(`${res.status}: ${answer.error?.message}`);
    return answer;
  };
  const table = new EndpointTable();
  const follower = followControlPlane(control.url, ADMIN, table, { intervalMs: 100 });
  const gateway = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    await fn({ control, agents, startAgent, gateway: gateway.url, admin, call, pids });
  } finally {
    await stopSimCluster({ agents, follower, gateway, control, pids, dir });
  }
}

async function replicas(c: Cluster): Promise<ReplicaView[]> {
  return ((await c.call("GET", "/v1/replicas")) as { replicas: ReplicaView[] }).replicas;
}

async function events(c: Cluster, kinds: string[]): Promise<{ kind: string; message: string }[]> {
  const all = (await c.call("GET", "/v1/events?limit=1000")) as {
    events: { kind: string; subject: string; message: string }[];
  };
  return all.events.filter((e) => kinds.includes(e.kind));
}

/** A deployment of `replicas` TP2 replicas on H100s, its engine given `args`. */
function deployment(name: string, replicas: number, args: string[] = [], deadline?: number) {
  return {
    name,
    model: `org/${name}`,
    replicas,
    profiles: [{
      name: "h100-tp2",
      engine: "vllm",
      gpu_class: "h100-80g",
      tensor_parallel: 2,
      engine_args: args,
    }],
    ...(deadline === undefined ? {} : { rollout: { progress_deadline_seconds: deadline } }),
  };
}

async function allReady(c: Cluster, n: number, revision?: number): Promise<ReplicaView[]> {
  return await until(
    `${n} replicas ready${revision ? ` on revision ${revision}` : ""}`,
    async () => {
      const rs = await replicas(c);
      return rs.length === n &&
          rs.every((r) =>
            r.state === "ready" && (revision === undefined || r.revision === revision)
          )
        ? rs
        : null;
    },
    { ...POLL, describe: () => "see the replicas" },
  );
}

async function rolloutDone(c: Cluster, name: string): Promise<void> {
  await until(`${name}'s rollout complete`, async () => {
    const s = (await c.call("GET", `/v1/deployments/${name}/rollout`)) as { state: string };
    return s.state === "complete";
  }, POLL);
}

/**
 * Steady traffic through the gateway until `stop` is aborted: one request
 * after another, bounded in count; each answer's status is kept.
 */
async function traffic(gateway: string, model: string, stop: AbortSignal): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 5_000 && !stop.aborted; i++) {
    const res = await fetch(`${gateway}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: `hi ${i}` }] }),
    });
    await res.body?.cancel();
    statuses.push(res.status);
  }
  return statuses;
}

Deno.test("a rollout under steady gateway traffic fails no request and keeps desired − 1 ready; a scale restarts nothing; undo rolls back", async () => {
  await withCluster(async (c) => {
    await c.startAgent("h100-a", 0);
    await until("node registered", async () => {
      const { nodes } = (await c.call("GET", "/v1/nodes")) as { nodes: unknown[] };
      return nodes.length === 1;
    }, POLL);
    // 3 replicas × 2 GPUs of 8: free capacity for one surge replica at a time.
    assertEquals((await c.admin("POST", "/v1/deployments", deployment("roll", 3))).status, 201);
    const before = await allReady(c, 3, 1);
    await until("the gateway serves the model", async () => {
      const res = await fetch(`${c.gateway}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "roll", messages: [{ role: "user", content: "hi" }] }),
      });
      await res.body?.cancel();
      return res.status === 200;
    }, POLL);

    const stop = new AbortController();
    // Four clients, each one request after another.
    const sent = Promise.all([0, 1, 2, 3].map(() => traffic(c.gateway, "roll", stop.signal)));
    let lowest = Infinity;
    let samples = 0;
    try {
      assertEquals(
        (await c.admin(
          "POST",
          "/v1/deployments",
          deployment("roll", 3, ["--max-model-len", "4096"]),
        ))
          .status,
        200,
      );
      // Readiness sampled until the rollout completes (bounded by POLL).
      await until("rollout to revision 2 complete", async () => {
        const rs = await replicas(c);
        const readyIndices = new Set(
          rs.filter((r) => r.state === "ready").map((r) => r.id.replace(/-v\d+(-\d+)?$/, "")),
        );
        lowest = Math.min(lowest, readyIndices.size);
        samples++;
        const s = (await c.call("GET", "/v1/deployments/roll/rollout")) as { state: string };
        return s.state === "complete" && rs.every((r) => r.revision === 2 && r.state === "ready");
      }, { timeoutMs: 60_000, intervalMs: 50 });
    } finally {
      stop.abort();
    }
    const statuses = (await sent).flat();
    assertOk(statuses.length > 20, `only ${statuses.length} requests during the rollout`);
    assertEquals(statuses.filter((s) => s !== 200), [], "a request failed during the rollout");
    assertOk(samples > 5, `${samples} samples`);
    assertOk(lowest >= 2, `ready replicas fell to ${lowest} of 3`);
    const after = await allReady(c, 3, 2);
    assertEquals(after.map((r) => r.id).sort(), ["roll-r0-v2", "roll-r1-v2", "roll-r2-v2"]);
    assertOk(
      after.every((r) => !before.some((b) => b.shards[0].shard_id === r.shards[0].shard_id)),
    );
    const steps = await events(c, ["rollout_started", "rollout_step", "rollout_complete"]);
    assertEquals(steps.map((e) => e.kind), [
      "rollout_started",
      "rollout_step",
      "rollout_step",
      "rollout_step",
      "rollout_complete",
    ]);
    assertStringIncludes(steps[1].message, "started first");

    // (d) The replica count alone: no revision, no engine restarted.
    const agent = c.agents.get("h100-a")!;
    const pidsOf = () =>
      agent.status().shards.filter((s) => s.state === "ready").map((s) => `${s.id}:${s.pid}`)
        .sort();
    const running = pidsOf();
    running.forEach((p) => c.pids.add(Number(p.split(":")[1])));
    assertEquals(
      (await c.admin("POST", "/v1/deployments/roll/scale", { replicas: 4 })).status,
      200,
    );
    await allReady(c, 4, 2);
    assertEquals(
      (await c.admin("POST", "/v1/deployments/roll/scale", { replicas: 3 })).status,
      200,
    );
    await allReady(c, 3, 2);
    // The control plane counts 3 ready before the agent has stopped the fourth:
    // wait for the agent's own list to shrink, then it must be the same engines.
    await until(
      "the agent down to 3 ready shards",
      () => Promise.resolve(pidsOf().length === running.length ? true : null),
      POLL,
    );
    assertEquals(pidsOf(), running);
    const revisions = (await c.call("GET", "/v1/deployments/roll/revisions")) as {
      revision: number;
    };
    assertEquals(revisions.revision, 2);

    // (c) Undo, through the CLI's command: revision 1's spec comes back as revision 3.
    let printed = "";
    assertEquals(await rolloutCommand(c.call, ["undo", "roll"], (t) => printed += t), 0);
    assertEquals(printed, "deployment roll: revision 1's spec is rolling out as revision 3\n");
    await rolloutDone(c, "roll");
    const undone = await allReady(c, 3, 3);
    assertEquals(undone.map((r) => r.id).sort(), ["roll-r0-v3", "roll-r1-v3", "roll-r2-v3"]);
    printed = "";
    await rolloutCommand(c.call, ["history", "roll"], (t) => printed += t);
    assertStringIncludes(printed, "undo to 1");
    const undoAgain = await c.admin("POST", "/v1/deployments/roll/rollout/undo", {
      to_revision: 9,
    });
    assertEquals(undoAgain.status, 404);
    assertStringIncludes((await undoAgain.json()).error.message, "no revision 9");
  });
});

Deno.test("a revision whose engine refuses its arguments stops and reverts by itself, with events", async () => {
  await withCluster(async (c) => {
    await c.startAgent("h100-a", 1);
    await until("node registered", async () => {
      const { nodes } = (await c.call("GET", "/v1/nodes")) as { nodes: unknown[] };
      return nodes.length === 1;
    }, POLL);
    assertEquals((await c.admin("POST", "/v1/deployments", deployment("typo", 2))).status, 201);
    const before = await allReady(c, 2, 1);
    const shards = before.map((r) => r.shards[0].shard_id).sort();
    // vLLM refuses an unknown flag (`unrecognized arguments`); so does the fake engine.
    const bad = deployment("typo", 2, ["--max-model-lenn", "4096"], 60);
    assertEquals((await c.admin("POST", "/v1/deployments", bad)).status, 200);
    await until("reverted", async () => {
      const s = (await c.call("GET", "/v1/deployments/typo/rollout")) as { revision: number };
      return s.revision === 3;
    }, POLL);
    await rolloutDone(c, "typo");
    // The old replicas served throughout: the same shards, now revision 3.
    const after = await allReady(c, 2, 3);
    assertEquals(after.map((r) => r.shards[0].shard_id).sort(), shards);
    const seen = await events(c, [
      "rollout_started",
      "rollout_step",
      "rollout_failed",
      "rollout_reverted",
      "rollout_complete",
    ]);
    assertEquals(seen.map((e) => e.kind), [
      "rollout_started",
      "rollout_step",
      "rollout_failed",
      "rollout_reverted",
      "rollout_complete",
    ]);
    assertStringIncludes(seen[2].message, "unrecognized arguments: --max-model-lenn");
    const { revisions } = (await c.call("GET", "/v1/deployments/typo/revisions")) as {
      revisions: { revision: number; outcome: string; cause: string }[];
    };
    assertEquals(revisions.map((r) => [r.revision, r.cause, r.outcome]), [
      [1, "apply", "complete"],
      [2, "apply", "failed"],
      [3, "revert", "complete"],
    ]);
  });
});

Deno.test("drain with free capacity: the replacement is ready before the original stops", async () => {
  await withCluster(async (c) => {
    await c.startAgent("h100-a", 2);
    await until("node registered", async () => {
      const { nodes } = (await c.call("GET", "/v1/nodes")) as { nodes: unknown[] };
      return nodes.length === 1;
    }, POLL);
    assertEquals((await c.admin("POST", "/v1/deployments", deployment("move", 1))).status, 201);
    const [original] = await allReady(c, 1);
    const pid = c.agents.get("h100-a")!.status().shards[0].pid!;
    c.pids.add(pid);
    await c.startAgent("h100-b", 3);
    await until("second node", async () => {
      const { nodes } = (await c.call("GET", "/v1/nodes")) as { nodes: unknown[] };
      return nodes.length === 2;
    }, POLL);
    assertEquals((await c.admin("POST", "/v1/nodes/h100-a/drain")).status, 200);
    // Its replacement starts elsewhere first, while the original still serves.
    const replacement = await until("the replacement placed", async () => {
      const rs = await replicas(c);
      return rs.find((r) => r.id !== original.id && r.shards.length > 0);
    }, POLL);
    assertEquals(replacement.shards[0].node, "h100-b");
    assertOk(
      c.agents.get("h100-a")!.status().shards.some((s) => s.pid === pid),
      "the original stopped before its replacement started",
    );
    await until(
      "the original stopped",
      () => !c.agents.get("h100-a")!.status().shards.some((s) => s.pid === pid),
      POLL,
    );
    const [moved] = await allReady(c, 1);
    assertEquals([moved.id, moved.shards[0].node], ["move-r0-v1", "h100-b"]);
    // In the books: the replacement was ready before the original was removed.
    const all = (await c.call("GET", "/v1/events?limit=1000")) as {
      events: { id: number; kind: string; subject: string }[];
    };
    const at = (kind: string, subject: string) =>
      all.events.find((e) => e.kind === kind && e.subject === subject)?.id ?? -1;
    const ready = at("replica_ready", "replica/move-r0-v1");
    const removed = at("replica_removed", `replica/${original.id}`);
    assertOk(ready > 0 && removed > ready, `ready ${ready}, removed ${removed}`);
    await until("node drained", async () => (await events(c, ["node_drained"])).length === 1, POLL);
  });
});
