/**
 * The agent against a stub control plane (tests/stub_control.ts: the three
 * endpoints of protocol/agent_protocol.ts, every body validated with the
 * protocol's schemas, and a desired state the test publishes).
 * Discovery reads the recorded L40S machine (design §5.5); engines are the
 * fake engine through the dev/fake_engine/bin shims, launched by the real vLLM
 * plugin. Every server, agent and engine process group a test starts is
 * stopped in a `finally`.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { shardLaunch } from "../tests/shard_launch.ts";
import { groupMembers, isRunning } from "../supervisor/proc.ts";
import { Agent } from "./agent.ts";
import { nodeTokenPath } from "./credentials.ts";
import { renderAgentMetrics } from "./metrics.ts";
import { lintExposition } from "../tests/prometheus_lint.ts";
import {
  agentOptions,
  freePort,
  LOCAL_TOKEN,
  reported,
  StubControl,
} from "../tests/stub_control.ts";

/**
 * Plants under `stateDir` an engine cache record that is a FIFO no one writes:
 * the sweep at agent start blocks reading it, as a read on a dead NFS mount
 * does. `unblock` opens and closes the FIFO, which ends the read (EOF),
 * bounded should no one read it, and answers its exit code.
 */
async function stuckSweepRecord(stateDir: string): Promise<{ unblock(): Promise<number> }> {
  const dir = join(stateDir, "engine_cache", "vllm", "stuck");
  await Deno.mkdir(dir, { recursive: true });
  const fifo = join(dir, "llmgw_key.json");
  assertEquals((await new Deno.Command("mkfifo", { args: [fifo] }).output()).code, 0);
  const writer = new Deno.Command("timeout", { args: ["10", "sh", "-c", `: > '${fifo}'`] });
  return { unblock: async () => (await writer.output()).code };
}

function killGroups(groups: Set<number>): void {
  for (const g of groups) {
    try {
      Deno.kill(-g, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

async function api(addr: Deno.NetAddr, path: string, token?: string) {
  const res = await fetch(`http://127.0.0.1:${addr.port}${path}`, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: await res.json() };
}

Deno.test("agent: registers its hardware, runs and removes desired shards, fences older generations, serves its local API", async () => {
  const stub = new StubControl();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_test_" });
  const logs: string[] = [];
  const groups = new Set<number>();
  const port = freePort();
  stub.start();
  const agent = new Agent(agentOptions(stub.url, stub.joinToken, stateDir, logs));
  try {
    await agent.start();

    // Registration carries what discovery found on the recorded L40S.
    const reg = await until("registration", () => stub.registrations[0], {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    assertEquals(reg.body.node_id, "node-a");
    assertEquals(reg.body.hostname, "node-a.test");
    assertEquals(reg.body.gpus.map((g) => [g.index, g.class, g.name]), [
      [0, "l40s-45g", "NVIDIA L40S"],
    ]);
    assertEquals(reg.body.fabrics.map((f) => [f.fabric, f.hcas, f.rate_gbps]), [
      ["roce-a", ["mlx5_0"], 100],
    ]);
    assertEquals(reg.body.labels, { zone: "test-1" });
    assertEquals(reg.body.mgmt_addr, "127.0.0.1");
    assertEquals(reg.body.mgmt_interface, "lo");
    assertEquals(reg.body.agent_url, `http://127.0.0.1:${agent.localAddr!.port}`);
    assertEquals(reg.body.agent_version, "0.1.0-test");
    assertEquals(reg.body.engine_versions.vllm, "0.11.1", "the fake vllm's --version");

    // Heartbeats start with nothing running; rediscovery sends GPU health.
    await until(
      "an empty heartbeat",
      () => stub.heartbeats.find((h) => h.body.generation === 0 && h.body.shards.length === 0),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    const withGpus = await until(
      "a heartbeat with rediscovered GPUs",
      () => stub.heartbeats.find((h) => h.body.gpus !== undefined),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    assertEquals(withGpus.body.gpus!.map((g) => g.class), ["l40s-45g"]);
    assertEquals(withGpus.token, reg.token);

    // A published shard arrives through the held long poll, not by polling.
    await until("a long poll", () => stub.desiredRequests >= 1, {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const pollsBefore = stub.desiredRequests;
    stub.publish(1, [{ id: "s1", engine: "vllm", launch: shardLaunch("s1", port) }]);
    const ready = await until(
      "s1 ready in a heartbeat",
      () => reported(stub, "s1", (s, hb) => s.state === "ready" && hb.generation === 1),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    groups.add(ready.pid!);
    {
      const m = agent.metricsSnapshot();
      assertEquals(m.gpus.map((g) => [g.index, g.allocated_to]), [[0, "s1"]]);
      assertEquals(m.time_to_ready.count, 1);
      assertEquals(m.shards.map((s) => [s.id, s.state, s.restarts_total]), [["s1", "ready", 0]]);
      assertOk((m.shards[0].last_time_to_ready_seconds ?? 0) > 0);
      assertEquals(m.discovery_errors, { nvidia_smi: 0, sysfs: 0 });
      assertEquals(lintExposition(renderAgentMetrics(m)), []);
    }
    assertOk(
      stub.desiredRequests - pollsBefore <= 3,
      `${stub.desiredRequests - pollsBefore} polls`,
    );
    assertOk(ready.serves_http);
    assertEquals(ready.port, port);
    // The engine answers only with its key; the agent's proxy is the door.
    const direct = await fetch(`http://127.0.0.1:${port}/v1/models`);
    assertEquals(direct.status, 401, "a direct request without the engine's key");
    await direct.body?.cancel();
    const proxyToken = Deno.readTextFileSync(join(stateDir, "proxy_token")).trim();
    const proxied = await fetch(`http://127.0.0.1:${agent.proxyAddr!.port}/v1/models`, {
      headers: { authorization: `Bearer ${proxyToken}`, "x-llmgw-shard": "s1" },
    });
    assertEquals(proxied.status, 200);
    const models = await proxied.json();
    assertEquals(models.data[0].id, "demo");

    // The local API: token-protected status and logs, JSON errors.
    const addr = agent.localAddr!;
    assertEquals((await api(addr, "/healthz")).status, 200);
    const noToken = await api(addr, "/v1/status");
    assertEquals([noToken.status, noToken.body.error.code], [401, "unauthorized"]);
    assertEquals((await api(addr, "/v1/status", "wrong-token")).status, 403);
    assertEquals((await api(addr, "/v1/shards/s1/logs")).status, 401);
    const status = await api(addr, "/v1/status", LOCAL_TOKEN);
    assertEquals(status.status, 200);
    assertEquals(status.body.node_id, "node-a");
    assertEquals(status.body.generation, 1);
    assertEquals(status.body.shards.map((s: { id: string; state: string }) => [s.id, s.state]), [
      ["s1", "ready"],
    ]);
    const tail = await api(addr, "/v1/shards/s1/logs?lines=3", LOCAL_TOKEN);
    assertEquals(tail.status, 200);
    assertEquals(tail.body.id, "s1");
    assertOk(tail.body.lines.length > 0 && tail.body.lines.length <= 3, "at most 3 lines");
    const all = await api(addr, "/v1/shards/s1/logs", LOCAL_TOKEN);
    assertStringIncludes(all.body.lines.join("\n"), "Loading safetensors checkpoint shards");
    const unknown = await api(addr, "/v1/shards/nope/logs", LOCAL_TOKEN);
    assertEquals([unknown.status, unknown.body.error.code], [404, "not_found"]);
    const bad = await api(addr, "/v1/shards/s1/logs?lines=lots", LOCAL_TOKEN);
    assertEquals(bad.status, 400);
    assertStringIncludes(bad.body.error.message, "lines");
    assertEquals((await api(addr, "/v1/shards/s1/logs?lines=0", LOCAL_TOKEN)).status, 400);
    assertEquals((await api(addr, "/v1/nothing", LOCAL_TOKEN)).status, 404);

    // An older generation (a control plane's stale state) is ignored, without
    // spinning: the engine keeps running and the agent keeps generation 1.
    const pollsBeforeStale = stub.desiredRequests;
    stub.publish(0, []);
    await until(
      "the stale state ignored",
      () => logs.some((l) => l.includes("ignoring an older desired state")),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    // Not a condition wait: a stale state must cause no busy loop over a stretch of time.
    await new Promise((r) => setTimeout(r, 600));
    assertOk(isRunning(ready.pid!), "the engine survives a stale desired state");
    assertEquals(agent.generation, 1);
    assertOk(
      reported(stub, "s1", (s, hb) => s.state === "ready" && hb.generation === 1) !== undefined,
    );
    assertOk(stub.desiredRequests - pollsBeforeStale < 15, "no busy loop on a stale state");

    // A desired state with a launch the protocol refuses is refused whole,
    // naming the shard and the field; the engine keeps running.
    stub.publish(2, [{
      id: "s1",
      engine: "vllm",
      launch: { ...shardLaunch("s1", port), port: 0 },
    }]);
    const refusal = await until(
      "the bad desired state refused",
      () =>
        logs.map((l) => JSON.parse(l)).find((l) =>
          l.msg === "desired state poll failed" && l.kind === "bad_response"
        ),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    assertStringIncludes(refusal.error, 'shards[0].launch.port (shard "s1"): Too small');
    assertOk(isRunning(ready.pid!), "the engine survives a refused desired state");
    assertEquals(agent.generation, 1);

    // Removing the shard stops its whole process group.
    stub.publish(3, []);
    await until(
      "generation 3 in a heartbeat",
      () => stub.lastHeartbeat()?.body.generation === 3 && stub.lastHeartbeat()!.body.shards,
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    await until("s1 gone", () => stub.lastHeartbeat()!.body.shards.length === 0, {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    assertEquals(groupMembers(ready.pid!), []);

    assertEquals(stub.invalid, [], "every body matched the protocol");
    assertEquals(stub.registrations.length, 1);
    // Structured logs, and no token in them.
    for (const line of logs) {
      const parsed = JSON.parse(line);
      assertOk(typeof parsed.msg === "string" && typeof parsed.level === "string");
      for (const secret of [stub.joinToken, reg.token, LOCAL_TOKEN]) {
        assertOk(!line.includes(secret), `a token leaked into the log: ${line}`);
      }
    }
  } finally {
    for (const s of agent.status().shards) if (s.pid !== null) groups.add(s.pid);
    await agent.stop({ stopEngines: true }).catch(() => {});
    await stub.close();
    killGroups(groups);
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("agent: engines outlive the control plane and the agent; re-registers and adopts", async () => {
  const stub = new StubControl();
  let stub2: StubControl | null = null;
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_test_" });
  const logs: string[] = [];
  const groups = new Set<number>();
  const port = freePort();
  stub.start();
  const options = agentOptions(stub.url, stub.joinToken, stateDir, logs);
  const first = new Agent(options);
  let second: Agent | null = null;
  let third: Agent | null = null;
  try {
    await first.start();
    const shard = { id: "s1", engine: "vllm", launch: shardLaunch("s1", port) };
    await until("registration", () => stub.registrations[0], { timeoutMs: 30_000, intervalMs: 20 });
    stub.publish(1, [shard]);
    const ready = await until("s1 ready", () => reported(stub, "s1", (s) => s.state === "ready"), {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const pid = ready.pid!;
    groups.add(pid);

    // The control plane goes away: the engine keeps running, the agent retries.
    await stub.close();
    const failuresBefore = logs.filter((l) => l.includes("heartbeat failed")).length;
    await until(
      "heartbeat retries",
      () => logs.filter((l) => l.includes("heartbeat failed")).length >= failuresBefore + 3,
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    assertOk(isRunning(pid), "the engine runs on without a control plane");
    assertEquals(first.status().shards.map((s) => [s.id, s.state, s.pid]), [["s1", "ready", pid]]);

    // It comes back, having forgotten this node (an in-memory store): the old
    // token is refused, the agent registers again, the engine is untouched.
    stub2 = new StubControl(stub.joinToken);
    stub2.state = { generation: 1, shards: [shard] };
    stub2.start(stub.port);
    const reg2 = await until("re-registration", () => stub2!.registrations[0], {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    assertOk(stub2.refused >= 1, "the old token was refused first");
    await until(
      "heartbeats with the new token and the same engine",
      () =>
        stub2!.heartbeats.find((h) =>
          h.token === reg2.token && h.body.shards.some((s) => s.pid === pid && s.state === "ready")
        ),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    const stored = JSON.parse(await Deno.readTextFile(nodeTokenPath(stateDir)));
    assertEquals(stored.node_token, reg2.token);
    assertEquals((await Deno.stat(nodeTokenPath(stateDir))).mode! & 0o777, 0o600);

    // The agent restarts (an upgrade): engines keep running, the new agent
    // adopts them (same pid) and presents the stored node token.
    await first.stop({ stopEngines: false });
    assertOk(groupMembers(pid).length > 0, "the engine survives the agent");
    const seen = stub2.heartbeats.length;
    // Its supervisor's own ticks come only after a minute: only the probe at
    // start can report the adopted engine ready (issue #23 item 4).
    second = new Agent({ ...options, supervisor: { ...options.supervisor, tickMs: 60_000 } });
    await second.start();
    const adopted = await until(
      "the adopted engine in a heartbeat",
      () => reported(stub2!, "s1", (s) => s.adopted && s.state === "ready", seen),
      { timeoutMs: 10_000, intervalMs: 20 },
    );
    assertEquals(adopted.pid, pid);
    assertEquals(
      stub2.heartbeats[seen].body.shards.map((s) => [s.id, s.state]),
      [["s1", "ready"]],
      "the new agent's very first heartbeat announces the adopted engine ready",
    );
    assertEquals(stub2.lastHeartbeat()!.token, reg2.token);
    assertEquals(stub2.registrations.length, 1, "no new registration");
    await until("generation 1 after the restart", () => second!.generation === 1, {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    assertEquals(second.status().shards.map((s) => [s.id, s.pid, s.adopted]), [["s1", pid, true]]);

    // Restarted with a new label: it registers again (what only a
    // registration carries changed), and still adopts the same engine.
    await second.stop({ stopEngines: false });
    // The second agent may have registered again before it stopped (a
    // heartbeat that timed out on a busy machine): the first registration
    // after the restart is the one to check.
    const before = stub2.registrations.length;
    third = new Agent({ ...options, labels: { zone: "test-2" } });
    await third.start();
    const reg3 = await until(
      "a registration with the new label",
      () => stub2!.registrations[before],
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    assertEquals(reg3.body.labels, { zone: "test-2" });
    await until(
      "heartbeats with the newest token",
      () =>
        reported(stub2!, "s1", (s) => s.pid === pid && s.state === "ready") &&
        stub2!.lastHeartbeat()!.token === reg3.token,
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    assertEquals([...stub.invalid, ...stub2.invalid], []);
  } finally {
    for (const a of [first, second, third]) {
      for (const s of a?.status().shards ?? []) if (s.pid !== null) groups.add(s.pid);
    }
    await first.stop({ stopEngines: false }).catch(() => {});
    await second?.stop({ stopEngines: false }).catch(() => {});
    await third?.stop({ stopEngines: true }).catch(() => {});
    await stub.close();
    await stub2?.close();
    killGroups(groups);
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test({
  name: "agent: stop returns while an engine cache sweep hangs on its file system, and says so",
  // The sweep left running ends once the test unblocks its read; no one awaits its last calls.
  sanitizeOps: false,
  async fn() {
    const stub = new StubControl();
    const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_test_" });
    const logs: string[] = [];
    const stuck = await stuckSweepRecord(stateDir);
    stub.start();
    const agent = new Agent(agentOptions(stub.url, stub.joinToken, stateDir, logs));
    try {
      await agent.start();
      await agent.stop({ stopEngines: true });
      assertStringIncludes(logs.join("\n"), "engine cache sweep still running at stop");
    } finally {
      await agent.stop({ stopEngines: true }).catch(() => {});
      const unblocked = await stuck.unblock();
      await stub.close();
      await Deno.remove(stateDir, { recursive: true });
      assertEquals(unblocked, 0, "the sweep was reading the FIFO");
    }
  },
});

Deno.test({
  name:
    "agent: stop sends the engines their SIGTERM without waiting for a stuck engine cache sweep",
  // The sweep left running ends once the test unblocks its read; no one awaits its last calls.
  sanitizeOps: false,
  async fn() {
    const stub = new StubControl();
    const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_test_" });
    const logs: string[] = [];
    const groups = new Set<number>();
    const port = freePort();
    const stuck = await stuckSweepRecord(stateDir);
    stub.start();
    const agent = new Agent(agentOptions(stub.url, stub.joinToken, stateDir, logs));
    try {
      await agent.start();
      await until("registration", () => stub.registrations[0], {
        timeoutMs: 30_000,
        intervalMs: 20,
      });
      stub.publish(1, [{ id: "s1", engine: "vllm", launch: shardLaunch("s1", port) }]);
      const ready = await until(
        "s1 ready",
        () => reported(stub, "s1", (s) => s.state === "ready"),
        {
          timeoutMs: 30_000,
          intervalMs: 20,
        },
      );
      groups.add(ready.pid!);
      await agent.stop({ stopEngines: true });
      const msgs = logs.map((l) => JSON.parse(l).msg as string);
      const stopping = msgs.indexOf("ready → stopping: supervisor shutdown");
      const waited = msgs.indexOf("engine cache sweep still running at stop; not waiting for it");
      assertOk(stopping >= 0 && waited >= 0, msgs.join("\n"));
      // The engine is signalled at once; the sweep's bounded wait runs beside it, not before it.
      assertOk(stopping < waited, msgs.join("\n"));
      assertEquals(groupMembers(ready.pid!), [], "the engine is gone");
    } finally {
      await agent.stop({ stopEngines: true }).catch(() => {});
      killGroups(groups);
      const unblocked = await stuck.unblock();
      await stub.close();
      await Deno.remove(stateDir, { recursive: true });
      assertEquals(unblocked, 0, "the sweep was reading the FIFO");
    }
  },
});
