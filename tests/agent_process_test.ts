/**
 * Agents as separate processes (`llmgw agent run`), killed with SIGKILL and
 * restarted: the node goes unreachable then lost, its replica is rebuilt on
 * the other node, and when the agent comes back it adopts its engine and
 * then stops it (fencing). Every process is killed by the test, by process
 * group, even when it fails.
 */
import { join } from "node:path";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import type { ReplicaView } from "../control/views.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { shardDirName } from "../supervisor/supervisor.ts";
import { spawnAgent, stopAgentsAndEngines } from "./agent_processes.ts";
import { startTestHub } from "./test_hub.ts";
import { portBlock, portsOf } from "./port_plan.ts";
import { main } from "../cli/main.ts";

const ADMIN = "process-test-admin";
const JOIN = "process-test-join-token";

/**
 * How the waits here poll: agent processes start, heartbeat and go lost in
 * seconds; the bound is for a machine busy with the other test files.
 */
const POLL = { timeoutMs: 60_000, intervalMs: 100 };
/** This file's ports (tests/port_plan.ts): one block per agent. */
const PORTS = portsOf(import.meta.url);

Deno.test("an agent process killed with SIGKILL: lost, rebuilt elsewhere, adopted and fenced on return", async () => {
  await using hub = await startTestHub(["org/solo"]);
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_process_test_" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: [JOIN],
    thresholds: { heartbeat_interval_ms: 300, unreachable_after_ms: 3_000, lost_after_ms: 6_000 },
    reconcileMs: 200,
  });
  const groups = new Set<number>();
  const procs: Deno.ChildProcess[] = [];
  const admin = async (method: string, path: string, body?: unknown) =>
    await (await fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    })).json();
  const replica = async (): Promise<ReplicaView | undefined> =>
    (await admin("GET", "/v1/replicas")).replicas[0];
  try {
    const a = spawnAgent(
      control.url,
      JOIN,
      "h100-a",
      "dgx_h100_idle",
      join(dir, "a"),
      portBlock(PORTS, 0),
      hub.env,
    );
    procs.push(a);
    groups.add(a.pid);
    await until(
      "node a",
      async () => (await admin("GET", "/v1/nodes")).nodes.length === 1 ? true : null,
      POLL,
    );
    await admin("POST", "/v1/deployments", {
      name: "solo",
      model: "org/solo",
      replicas: 1,
      profiles: [{ name: "h100-tp2", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 2 }],
    });
    await until("ready on a", async () => {
      const r = await replica();
      return r?.state === "ready" && r.shards[0].node === "h100-a" ? r : null;
    }, POLL);
    const b = spawnAgent(
      control.url,
      JOIN,
      "h100-b",
      "dgx_h100_idle",
      join(dir, "b"),
      portBlock(PORTS, 1),
      hub.env,
    );
    procs.push(b);
    groups.add(b.pid);
    await until(
      "node b",
      async () => (await admin("GET", "/v1/nodes")).nodes.length === 2 ? true : null,
      POLL,
    );
    const pidFile = JSON.parse(
      Deno.readTextFileSync(
        join(
          dir,
          "a",
          "shards",
          shardDirName((await replica())!.shards[0].shard_id),
          "pid.json",
        ),
      ),
    );
    const engine: number = pidFile.pid;
    groups.add(engine);

    Deno.kill(-a.pid, "SIGKILL"); // the agent dies; its engine (own session) keeps running
    await a.status;
    await until(
      "a unreachable",
      async () => (await admin("GET", "/v1/nodes/h100-a")).state === "unreachable" ? true : null,
      POLL,
    );
    const moved = await until("rebuilt on b", async () => {
      const r = await replica();
      return r?.state === "ready" && r.shards[0].node === "h100-b" ? r : null;
    }, POLL);
    assertEquals((await admin("GET", "/v1/nodes/h100-a")).state, "lost");
    assertEquals(moved.shards[0].node, "h100-b");
    assertEquals(
      groupMembers(engine).length > 0,
      true,
      "the old engine still runs while a is away",
    );

    const again = spawnAgent(
      control.url,
      JOIN,
      "h100-a",
      "dgx_h100_idle",
      join(dir, "a"),
      portBlock(PORTS, 0),
      hub.env,
    );
    procs.push(again);
    groups.add(again.pid);
    await until(
      "stale engine stopped",
      () => Promise.resolve(groupMembers(engine).length === 0 ? true : null),
      POLL,
    );
    // The stale engine goes when the agent reads its desired state; the node is
    // ready again once the control plane has taken a heartbeat: no order between the two.
    await until(
      "a ready again",
      async () => (await admin("GET", "/v1/nodes/h100-a")).state === "ready" ? true : null,
      POLL,
    );
    const still = await replica();
    assertEquals([still?.state, still?.shards[0].node], ["ready", "h100-b"]);
  } finally {
    // Agents first (their engines are in their own groups; stop those too).
    await stopAgentsAndEngines(procs, ["a", "b"].map((sub) => join(dir, sub)), "SIGTERM", groups);
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("control plane + three agent processes: apply, ready, placement by the rules, explain", async () => {
  await using hub = await startTestHub(["org/mixed"]);
  const dir = await Deno.makeTempDir({ prefix: "llmgw_agent_process_test_" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: [JOIN],
    thresholds: { heartbeat_interval_ms: 300, unreachable_after_ms: 3_000, lost_after_ms: 6_000 },
    reconcileMs: 200,
  });
  const agents: [string, string][] = [
    ["h100-a", "dgx_h100_idle"],
    ["a100-a", "hgx_a100_40g"],
    ["l40s-a", "l40s_4x"],
  ];
  const procs = agents.map(([id, machine], i) =>
    spawnAgent(control.url, JOIN, id, machine, join(dir, id), portBlock(PORTS, 2 + i), hub.env)
  );
  const admin = async (method: string, path: string, body?: unknown) =>
    await (await fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    })).json();
  try {
    await until(
      "three nodes",
      async () => (await admin("GET", "/v1/nodes")).nodes.length === 3 ? true : null,
      POLL,
    );
    await admin("POST", "/v1/deployments", {
      name: "mixed",
      model: "org/mixed",
      replicas: 2,
      profiles: [
        // Two H100 nodes on one fabric would be needed: there is one.
        {
          name: "h100-2x8",
          engine: "vllm",
          gpu_class: "h100-80g",
          tensor_parallel: 16,
          nodes: 2,
          gpus_per_node: 8,
        },
        { name: "a100-tp4", engine: "sglang", gpu_class: "a100-40g", tensor_parallel: 4 },
      ],
    });
    const ready = await until("replicas ready", async () => {
      const rs = (await admin("GET", "/v1/replicas")).replicas as ReplicaView[];
      return rs.length === 2 && rs.every((r) => r.state === "ready") ? rs : null;
    }, POLL);
    // Bin packing on the A100 node: two TP4 groups, one per NVLink-connected half.
    assertEquals(ready.map((r) => [r.profile, r.shards[0].node, r.shards[0].gpu_indices]), [
      ["a100-tp4", "a100-a", [0, 1, 2, 3]],
      ["a100-tp4", "a100-a", [4, 5, 6, 7]],
    ]);
    // `llmgw explain` says why the preferred profile did not fit.
    let out = "";
    const code = await main(["explain", "mixed", "--url", control.url, "--token", ADMIN], {
      out: (t) => out += t,
      err: () => {},
    });
    assertEquals(code, 0);
    assertStringIncludes(out, 'profile "h100-2x8": 0/3 nodes fit');
    assertStringIncludes(out, "on fabrics with too few eligible nodes");
  } finally {
    await stopAgentsAndEngines(procs, agents.map(([id]) => join(dir, id)));
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});
