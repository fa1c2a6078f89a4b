/**
 * Heartbeat load on one control plane (design §16: 10,000 agents heartbeating
 * every 5 s on one 2-core machine, i.e. 2,000 heartbeats/s). Registers N
 * simulated 8-GPU nodes, then sends heartbeats as fast as a bounded number
 * of concurrent clients can, for a fixed time, over real HTTP on loopback.
 * The clients run in this process too, so the CPU figure is an upper bound
 * for the control plane alone.
 *
 * Run: `deno run -A bench/heartbeat_load.ts [SECONDS]`.
 */
import { cpuUsage } from "node:process";
import { MemoryStore } from "../control/memory_store.ts";
import { startControl } from "../control/server.ts";
import { registrationOf, syntheticCluster } from "./synthetic_cluster.ts";

const SECONDS = Number(Deno.args[0] ?? 5);
const CONCURRENCY = 64;

async function run(nodes: number): Promise<void> {
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: ["admin"],
    joinTokens: ["join"],
    reconcileMs: 1_000,
  });
  try {
    const tokens: string[] = [];
    for (const n of syntheticCluster(nodes)) {
      tokens.push((await control.cp.nodes.register(registrationOf(n), null)).node_token);
    }
    let sent = 0;
    let failed = 0;
    const deadline = performance.now() + SECONDS * 1000;
    const cpu0 = cpuUsage();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, async (_, worker) => {
      for (let i = worker; performance.now() < deadline; i += CONCURRENCY) {
        const n = i % nodes;
        const res = await fetch(`${control.url}/v1/agent/heartbeat`, {
          method: "POST",
          headers: { authorization: `Bearer ${tokens[n]}`, "content-type": "application/json" },
          body: JSON.stringify({ node_id: `node-${n}`, generation: 0, shards: [] }),
        });
        await res.body?.cancel();
        if (res.ok) sent++;
        else failed++;
      }
    }));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuUsage(cpu0);
    const cpuPct = ((cpu.user + cpu.system) / 1e6 / seconds) * 100;
    console.log(
      `| ${nodes.toLocaleString("en")} | ${(sent / seconds).toFixed(0)} | ${failed} | ${
        cpuPct.toFixed(0)
      }% | ${(nodes / 5).toFixed(0)} |`,
    );
  } finally {
    await control.close();
  }
}

console.log(
  "| simulated nodes | heartbeats/s sustained | failed | CPU (control + clients, of one core) | needed at 5 s interval |",
);
console.log("| --- | --- | --- | --- | --- |");
for (const n of (Deno.args[1] ?? "1000,10000").split(",").map(Number)) await run(n);
