/**
 * Agents as separate processes (`llmgw agent run`), killed with SIGKILL and
 * restarted: the node goes unreachable then lost, its replica is rebuilt on
 * the other node, and when the agent comes back it adopts its engine and
 * then stops it (fencing). Every process is killed by the test, by process
 * group, even when it fails.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals } from "./assert.ts";
import { MemoryStore } from "../control/memory_store.ts";
import { startControl } from "../control/serve_command.ts";
import type { ReplicaView } from "../control/control_plane.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { shardDirName } from "../supervisor/supervisor.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const ADMIN = "process-test-admin";
const JOIN = "process-test-join-token";

function spawnAgent(
  controlUrl: string,
  id: string,
  stateDir: string,
  portBase: number,
): Deno.ChildProcess {
  const sim = join(ROOT, "tests/fixtures/sim/dgx_h100_idle");
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      join(ROOT, "main.ts"),
      "agent",
      "run",
      "--control",
      controlUrl,
      "--node-id",
      id,
      "--state-dir",
      stateDir,
      "--config",
      join(sim, "agent.json"),
      "--mgmt-addr",
      "127.0.0.1",
      "--mgmt-interface",
      "lo",
      "--listen",
      "127.0.0.1:0",
      "--port-base",
      String(portBase),
    ],
    env: {
      LLMGW_JOIN_TOKEN: JOIN,
      PATH: `${join(ROOT, "testing/bin")}:${Deno.env.get("PATH")}`,
      FAKE_ENGINE_LOAD_SECONDS: "0.3",
      FAKE_ENGINE_ACCESS_LOG: "0",
    },
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
}

async function until<T>(what: string, probe: () => Promise<T | null>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const v = await probe();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("an agent process killed with SIGKILL: lost, rebuilt elsewhere, adopted and fenced on return", async () => {
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
    const a = spawnAgent(control.url, "h100-a", join(dir, "a"), 25000);
    procs.push(a);
    groups.add(a.pid);
    await until(
      "node a",
      async () => (await admin("GET", "/v1/nodes")).nodes.length === 1 ? true : null,
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
    });
    const b = spawnAgent(control.url, "h100-b", join(dir, "b"), 26000);
    procs.push(b);
    groups.add(b.pid);
    await until(
      "node b",
      async () => (await admin("GET", "/v1/nodes")).nodes.length === 2 ? true : null,
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
    );
    const moved = await until("rebuilt on b", async () => {
      const r = await replica();
      return r?.state === "ready" && r.shards[0].node === "h100-b" ? r : null;
    });
    assertEquals((await admin("GET", "/v1/nodes/h100-a")).state, "lost");
    assertEquals(moved.shards[0].node, "h100-b");
    assertEquals(
      groupMembers(engine).length > 0,
      true,
      "the old engine still runs while a is away",
    );

    const again = spawnAgent(control.url, "h100-a", join(dir, "a"), 25000);
    procs.push(again);
    groups.add(again.pid);
    await until(
      "stale engine stopped",
      () => Promise.resolve(groupMembers(engine).length === 0 ? true : null),
    );
    assertEquals((await admin("GET", "/v1/nodes/h100-a")).state, "ready");
    const still = await replica();
    assertEquals([still?.state, still?.shards[0].node], ["ready", "h100-b"]);
  } finally {
    // Agents first (their engines are in their own groups; stop those too).
    for (const p of procs) {
      try {
        Deno.kill(p.pid, "SIGTERM");
      } catch {
        // Gone.
      }
    }
    await Promise.all(procs.map((p) => p.status));
    for (const sub of ["a", "b"]) {
      try {
        for (const e of Deno.readDirSync(join(dir, sub, "shards"))) {
          try {
            groups.add(
              JSON.parse(Deno.readTextFileSync(join(dir, sub, "shards", e.name, "pid.json"))).pid,
            );
          } catch {
            // No pid file.
          }
        }
      } catch {
        // No shards.
      }
    }
    for (const g of groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});
