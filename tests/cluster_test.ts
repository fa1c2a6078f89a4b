/**
 * The cluster comes alive (issue #6): a control plane with its SQLite store,
 * agents on simulated hardware running the fake engine, driven through the
 * admin API. Real engine processes on loopback; every one is stopped by the
 * test, by process group, even when it fails.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { Agent } from "../agent/agent.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { type RunningControl, startControl } from "../control/server.ts";
import type { ReplicaView } from "../control/views.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";
import { freePortsIn, portBlock, portsOf } from "./port_plan.ts";
import { simAgentOptions, stopSimCluster } from "./sim_agent.ts";
import { until } from "./until.ts";

const ADMIN = "test-admin-token";
const JOIN = "test-join-token";
/**
 * This file's ports (tests/port_plan.ts): agents take blocks 0-6, the
 * control plane a free port of block 7, planned rather than picked by the
 * kernel because it comes back on that port after a restart.
 */
const PORTS = portsOf(import.meta.url);

async function withCluster(
  fn: (ctx: {
    control: () => RunningControl;
    restartControl: () => Promise<void>;
    agents: Map<string, Agent>;
    startAgent: (
      id: string,
      machine: string,
      /** Its block of this file's ports. */
      block: number,
      env?: Record<string, string>,
      loadTimeoutMs?: number,
    ) => Promise<Agent>;
    gateway: () => string;
    /** The in-process gateway's endpoint table, as its follower last set it. */
    table: EndpointTable;
    admin: (method: string, path: string, body?: unknown) => Promise<Response>;
    pids: Set<number>;
    logs: string[];
    dir: string;
  }) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_cluster_test_" });
  const pids = new Set<number>();
  const logs: string[] = [];
  const [controlPort] = freePortsIn(portBlock(PORTS, 7), 1);
  const open = () =>
    startControl({
      hostname: "127.0.0.1",
      port: controlPort,
      store: SqliteStore.open(join(dir, "llmgw.db")),
      adminTokens: [ADMIN],
      joinTokens: [JOIN],
      thresholds: { heartbeat_interval_ms: 300, unreachable_after_ms: 3_000, lost_after_ms: 6_000 },
      reconcileMs: 200,
    });
  let control = await open();
  const agents = new Map<string, Agent>();
  const startAgent = async (
    id: string,
    machine: string,
    block: number,
    extraEnv: Record<string, string> = {},
    loadTimeoutMs?: number,
  ) => {
    const agent = new Agent(simAgentOptions({
      controlUrl: control.url,
      joinToken: JOIN,
      id,
      machine,
      dir,
      ports: portBlock(PORTS, block),
      env: extraEnv,
      loadTimeoutMs,
      logSink: (line) => logs.push(line),
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
  const table = new EndpointTable();
  let follower = followControlPlane(control.url, ADMIN, table, { intervalMs: 100 });
  const gateway = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    await fn({
      gateway: () => gateway.url,
      table,
      control: () => control,
      restartControl: async () => {
        await follower.stop();
        await control.close();
        // Same port, so agents find it again.
        control = await startControl({
          hostname: "127.0.0.1",
          port: controlPort,
          store: SqliteStore.open(join(dir, "llmgw.db")),
          adminTokens: [ADMIN],
          joinTokens: [JOIN],
          thresholds: {
            heartbeat_interval_ms: 300,
            unreachable_after_ms: 3_000,
            lost_after_ms: 6_000,
          },
          reconcileMs: 200,
        });
        follower = followControlPlane(control.url, ADMIN, table, { intervalMs: 100 });
      },
      agents,
      startAgent,
      admin,
      pids,
      logs,
      dir,
    });
  } finally {
    await stopSimCluster({ agents, follower, gateway, control, pids, dir });
  }
}

async function replicas(
  admin: (m: string, p: string) => Promise<Response>,
): Promise<ReplicaView[]> {
  return (await (await admin("GET", "/v1/replicas")).json()).replicas;
}

/** How the waits here poll: agents heartbeat every 300 ms, engines load in about 1 s. */
const POLL = { timeoutMs: 20_000, intervalMs: 100 };

const DEPLOYMENT = {
  name: "demo",
  model: "org/demo",
  replicas: 2,
  placement: "spread",
  profiles: [
    {
      name: "h100-big",
      engine: "vllm",
      gpu_class: "h100-80g",
      tensor_parallel: 16,
      nodes: 2,
      gpus_per_node: 8,
    },
    { name: "l40s-tp2", engine: "sglang", gpu_class: "l40s-45g", tensor_parallel: 2 },
  ],
};

Deno.test("apply → replicas ready on the right GPUs; explain; cordon survives; restart keeps engines; delete frees", async () => {
  await withCluster(
    async ({ admin, startAgent, agents, pids, restartControl, dir, logs: agentLogs, gateway }) => {
      await startAgent("h100-a", "dgx_h100_idle", 0);
      await startAgent("l40s-a", "l40s_4x", 1);
      await startAgent("a100-a", "hgx_a100_40g", 2);
      await until("three nodes", async () => {
        const nodes = (await (await admin("GET", "/v1/nodes")).json()).nodes;
        return nodes.length === 3 ? nodes : null;
      }, POLL);
      assertEquals((await admin("POST", "/v1/deployments", DEPLOYMENT)).status, 201);
      let lastSeen = "";
      const ready = await until("both replicas ready", async () => {
        const rs = await replicas(admin);
        lastSeen = JSON.stringify(rs.map((r) => [r.id, r.state, r.shards.map((s) => s.state)]));
        return rs.length === 2 && rs.every((r) => r.state === "ready") ? rs : null;
      }, {
        ...POLL,
        describe: () => `replicas: ${lastSeen}\nagent logs:\n${agentLogs.slice(-40).join("\n")}`,
      });
      // The 2-node H100 profile cannot fit (one H100 node): both replicas fell
      // back to the L40S node, on disjoint GPU pairs, and say why.
      for (const r of ready) {
        assertEquals(r.profile, "l40s-tp2");
        assertEquals(r.shards.map((s) => s.node), ["l40s-a"]);
        assertStringIncludes(r.explanation!.summary, 'profile "h100-big": 0/3 nodes fit');
      }
      assertEquals(ready.flatMap((r) => r.shards[0].gpu_indices).sort(), [0, 1, 2, 3]);
      for (const r of ready) {
        // Engines take only callers with their key: the gateway goes through the agent's proxy.
        const direct = await fetch(`http://127.0.0.1:${r.shards[0].port}/v1/models`);
        assertEquals(direct.status, 401);
        await direct.body?.cancel();
      }
      // The gateway follows the control plane's ready endpoints: it may learn of them a poll later.
      const chat = await until("the gateway routes demo", async () => {
        const res = await fetch(`${gateway()}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "hi" }] }),
        });
        if (res.status !== 503) return res;
        await res.body?.cancel();
        return null;
      }, POLL);
      assertEquals(chat.status, 200, await chat.clone().text());
      assertEquals((await chat.json()).model, "demo");
      // A shard's log, fetched by the control plane from its agent (`llmgw logs`).
      const logs = await (await admin("GET", `/v1/replicas/${ready[0].id}/logs?shard=0&lines=50`))
        .json();
      assertEquals(logs.node, "l40s-a");
      assertOk(logs.lines.length > 0, "log lines from the fake engine");
      assertEquals((await admin("GET", "/v1/replicas/nope-r0/logs")).status, 404);
      const before = agents.get("l40s-a")!.status().shards.map((s) => s.pid!).sort();
      before.forEach((p) => pids.add(p));

      // A cordon survives the agent re-registering and the control plane restarting.
      assertEquals((await admin("POST", "/v1/nodes/a100-a/cordon")).status, 200);
      await restartControl();
      await until("nodes back", async () => {
        const nodes = (await (await admin("GET", "/v1/nodes")).json()).nodes as {
          id: string;
          state: string;
        }[];
        return nodes.length === 3 ? nodes : null;
      }, POLL);
      const a100 = await (await admin("GET", "/v1/nodes/a100-a")).json();
      assertEquals(a100.state, "cordoned");
      // No engine restarted: the same processes serve after the restart.
      await until("replicas ready again", async () => {
        const rs = await replicas(admin);
        return rs.length === 2 && rs.every((r) => r.state === "ready") ? rs : null;
      }, POLL);
      assertEquals(agents.get("l40s-a")!.status().shards.map((s) => s.pid!).sort(), before);

      // Deleting the deployment stops its engines and frees their GPUs.
      assertEquals((await admin("DELETE", "/v1/deployments/demo")).status, 200);
      await until(
        "engines stopped",
        () => Promise.resolve(before.every((p) => groupMembers(p).length === 0) ? true : null),
        POLL,
      );
      const l40s = await (await admin("GET", "/v1/nodes/l40s-a")).json();
      assertEquals(l40s.allocations, []);
      const events = (await (await admin("GET", "/v1/events?limit=200")).json()).events as {
        kind: string;
      }[];
      assertOk(events.some((e) => e.kind === "replica_placed"));
      assertOk(events.some((e) => e.kind === "deployment_deleted"));
      // No token ever reaches the events, the node list or the agents' logs.
      const nodeTokens = ["h100-a", "l40s-a", "a100-a"].map((id) =>
        (JSON.parse(Deno.readTextFileSync(join(dir, "agents", id, "node_token"))) as {
          node_token: string;
        })
          .node_token
      );
      assertOk(nodeTokens.every((t) => t.startsWith("llmgw_node_")));
      const seen = JSON.stringify(events) +
        JSON.stringify(await (await admin("GET", "/v1/nodes")).json()) +
        agentLogs.join("\n");
      assertOk(agentLogs.length > 0, "the agents logged");
      for (const secret of [ADMIN, JOIN, ...nodeTokens]) {
        assertOk(!seen.includes(secret), "a token leaked");
      }
    },
  );
});

Deno.test("a node that disappears goes unreachable then lost; its replica is rebuilt elsewhere and fenced on return", async () => {
  await withCluster(async ({ admin, startAgent, agents, pids }) => {
    await startAgent("h100-a", "dgx_h100_idle", 3);
    await until(
      "node a",
      async () => ((await (await admin("GET", "/v1/nodes")).json()).nodes.length === 1
        ? true
        : null),
      POLL,
    );
    const d = {
      name: "solo",
      model: "org/solo",
      replicas: 1,
      profiles: [{ name: "h100-tp2", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 2 }],
    };
    assertEquals((await admin("POST", "/v1/deployments", d)).status, 201);
    await until("ready on a", async () => {
      const [r] = await replicas(admin);
      return r?.state === "ready" && r.shards[0].node === "h100-a" ? r : null;
    }, POLL);
    await startAgent("h100-b", "dgx_h100_idle", 4);
    const stale = agents.get("h100-a")!.status().shards[0].pid!;
    pids.add(stale);
    // The agent goes away; its engine keeps running (a partition, as the control plane sees it).
    await agents.get("h100-a")!.stop({ stopEngines: false });
    agents.delete("h100-a");
    await until("node a unreachable", async () => {
      const n = await (await admin("GET", "/v1/nodes/h100-a")).json();
      return n.state === "unreachable" ? n : null;
    }, POLL);
    const moved = await until("replica rebuilt on b", async () => {
      const [r] = await replicas(admin);
      return r?.state === "ready" && r.shards[0].node === "h100-b" ? r : null;
    }, POLL);
    const lost = await (await admin("GET", "/v1/nodes/h100-a")).json();
    assertEquals(lost.state, "lost");
    assertEquals(moved.shards[0].node, "h100-b");
    // The node returns: it adopts its old engine, then its new desired state
    // (a newer generation) no longer holds that shard, so it is stopped.
    await startAgent("h100-a", "dgx_h100_idle", 3);
    await until(
      "stale shard stopped",
      () => Promise.resolve(groupMembers(stale).length === 0 ? true : null),
      POLL,
    );
    const back = await (await admin("GET", "/v1/nodes/h100-a")).json();
    assertEquals(back.state, "ready");
    const [still] = await replicas(admin);
    assertEquals([still.state, still.shards[0].node], ["ready", "h100-b"]);
  });
});

Deno.test("through the gateway: a loading replica gets no traffic; once ready it gets its share", async () => {
  await withCluster(async ({ admin, startAgent, gateway, table }) => {
    await startAgent("fast", "dgx_h100_idle", 5, { FAKE_ENGINE_ACCESS_LOG: "1" });
    await startAgent("slow", "dgx_h100_idle", 6, {
      FAKE_ENGINE_ACCESS_LOG: "1",
      FAKE_ENGINE_LOAD_SECONDS: "4",
    });
    await until(
      "two nodes",
      async () => ((await (await admin("GET", "/v1/nodes")).json()).nodes.length === 2
        ? true
        : null),
      POLL,
    );
    const d = {
      name: "pair",
      model: "org/pair",
      replicas: 2,
      placement: "spread",
      profiles: [{ name: "tp8", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 8 }],
    };
    assertEquals((await admin("POST", "/v1/deployments", d)).status, 201);
    const onFast = await until("the fast replica ready, the slow one loading", async () => {
      const rs = await replicas(admin);
      const fast = rs.find((r) => r.shards[0]?.node === "fast");
      const slow = rs.find((r) => r.shards[0]?.node === "slow");
      return fast?.state === "ready" && slow !== undefined && slow.state !== "ready"
        ? { fast, slow }
        : null;
    }, POLL);
    const ask = async () => {
      const res = await fetch(`${gateway()}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "pair", messages: [{ role: "user", content: "hi" }] }),
      });
      assertEquals(res.status, 200);
      await res.body?.cancel();
    };
    // Wait until the gateway has the fast replica, then send while the slow one loads.
    await until("gateway routes", async () => {
      const r = await fetch(`${gateway()}/v1/models`);
      return (await r.json()).data.length === 1 ? true : null;
    }, POLL);
    for (let i = 0; i < 8; i++) await ask();
    const served = async (replica: string) =>
      ((await (await admin("GET", `/v1/replicas/${replica}/logs?lines=1000`)).json())
        .lines as string[])
        .filter((l) => l.includes("POST /v1/chat/completions")).length;
    // The supervisor reads engine logs on its tick: wait for all eight lines.
    await until(
      "eight requests in the fast replica's log",
      async () => (await served(onFast.fast.id)) >= 8 ? true : null,
      POLL,
    );
    assertEquals(await served(onFast.fast.id), 8);
    assertEquals(await served(onFast.slow.id), 0, "a loading replica gets no request");
    await until("both ready", async () => {
      const rs = await replicas(admin);
      return rs.every((r) => r.state === "ready") ? true : null;
    }, POLL);
    // The gateway's follower has taken the once-loading replica in.
    await until(
      "the gateway's table to hold the once-loading replica",
      () => table.endpoints("pair").some((e) => e.replica_id === onFast.slow.id),
      POLL,
    );
    await Promise.all(Array.from({ length: 16 }, ask));
    await until(
      "the once-loading replica serves",
      async () => (await served(onFast.slow.id)) > 0 ? true : null,
      { ...POLL, timeoutMs: 5_000 },
    );
  });
});

Deno.test("one shard of a two-node replica crashes: the whole replica is rebuilt, both shards replaced", async () => {
  await withCluster(async ({ admin, startAgent, agents, pids, control }) => {
    await startAgent("h100-a", "dgx_h100_idle", 0);
    await startAgent("h100-b", "dgx_h100_idle", 1);
    await until("two nodes", async () => {
      const nodes = (await (await admin("GET", "/v1/nodes")).json()).nodes;
      return nodes.length === 2 ? nodes : null;
    }, POLL);
    const twoNode = {
      name: "big",
      model: "org/big",
      replicas: 1,
      profiles: [{
        name: "h100-2x8",
        engine: "vllm",
        gpu_class: "h100-80g",
        tensor_parallel: 16,
        nodes: 2,
        gpus_per_node: 8,
      }],
    };
    assertEquals((await admin("POST", "/v1/deployments", twoNode)).status, 201);
    const first = await until("the two-node replica ready", async () => {
      const [r] = await replicas(admin);
      return r?.state === "ready" ? r : null;
    }, POLL);
    assertEquals(first.shards.map((s) => s.node).sort(), ["h100-a", "h100-b"]);
    const enginesOf = () =>
      [...agents.values()].flatMap((a) => a.status().shards.map((s) => s.pid!)).filter((p) => p);
    const before = enginesOf();
    assertEquals(before.length, 2);
    before.forEach((p) => pids.add(p));
    // Rank 1's engine dies (design §5.4: a shard of a multi-node replica is never restarted alone).
    const rank1 = first.shards.find((s) => s.rank === 1)!;
    const victim = agents.get(rank1.node)!.status().shards.find((s) => s.id === rank1.shard_id)!
      .pid!;
    Deno.kill(-victim, "SIGKILL");
    const rebuilt = await until("rebuilt and ready", async () => {
      const [r] = await replicas(admin);
      return r?.state === "ready" &&
          r.shards.every((s) => !first.shards.some((f) => f.shard_id === s.shard_id))
        ? r
        : null;
    }, { ...POLL, timeoutMs: 40_000 });
    assertEquals(rebuilt.id, first.id, "the same replica, a new attempt");
    assertEquals(rebuilt.shards.length, 2);
    // The survivor of the old attempt (rank 0) was stopped too: no two copies.
    await until(
      "old engines gone",
      () => Promise.resolve(before.every((p) => groupMembers(p).length === 0) ? true : null),
      POLL,
    );
    enginesOf().forEach((p) => pids.add(p));
    assertEquals(enginesOf().length, 2, "exactly the new attempt's two engines run");
    const events = (await (await fetch(`${control().url}/v1/events?limit=200`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    })).json()).events as { kind: string; subject: string; message: string }[];
    assertOk(
      events.some((e) =>
        e.subject === `replica/${first.id}` && /fail|rebuil/i.test(e.kind + e.message)
      ),
      "an event says why the replica was rebuilt",
    );
  });
});

Deno.test("an engine that never becomes ready fails, and the events carry its log tail", async () => {
  await withCluster(async ({ admin, startAgent, agents, pids }) => {
    await startAgent("l40s-a", "l40s_4x", 1, { FAKE_ENGINE_NEVER_READY: "1" }, 1_500);
    await until("node", async () => {
      const nodes = (await (await admin("GET", "/v1/nodes")).json()).nodes;
      return nodes.length === 1 ? nodes : null;
    }, POLL);
    const stuck = {
      name: "stuck",
      model: "org/stuck",
      replicas: 1,
      profiles: [{ name: "l40s", engine: "vllm", gpu_class: "l40s-45g", tensor_parallel: 1 }],
    };
    assertEquals((await admin("POST", "/v1/deployments", stuck)).status, 201);
    const event = await until("a shard_failed event", async () => {
      for (const s of agents.get("l40s-a")!.status().shards) if (s.pid) pids.add(s.pid);
      const events = (await (await admin("GET", "/v1/events?limit=200")).json()).events as {
        kind: string;
        subject: string;
        message: string;
      }[];
      return events.find((e) => e.kind === "shard_failed") ?? null;
    }, POLL);
    assertEquals(event.subject, "replica/stuck-r0");
    assertStringIncludes(event.message, "did not become ready within 1500 ms");
    assertStringIncludes(event.message, "Loading safetensors checkpoint shards");
  });
});
