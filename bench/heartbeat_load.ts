/**
 * Heartbeat load on one control plane (design §16: 10,000 agents heartbeating
 * every 5 s on one 2-core machine, i.e. 2,000 heartbeats/s). Registers N
 * simulated 8-GPU nodes, then sends heartbeats as fast as 64 concurrent
 * clients can, for a fixed time, over real HTTP on loopback. The clients run
 * in a process of their own (bench/heartbeat_clients.ts), so the CPU figure
 * is the control plane's alone; on 2 cores they still compete with it. Each size runs twice in the same invocation,
 * over plain HTTP and over TLS (the control plane's own CA, clients pinning
 * it as agents do), so the two columns compare side by side.
 *
 * Run: `deno run -A bench/heartbeat_load.ts [SECONDS] [NODES,NODES…]`.
 */
import { cpuUsage } from "node:process";
import { MemoryStore } from "../control/memory_store.ts";
import { startControl } from "../control/server.ts";
import { registrationOf, syntheticCluster } from "./synthetic_cluster.ts";
import { ClusterTls } from "../control/cluster_tls.ts";
import { CertificateAuthority } from "../tls/authority.ts";

const SECONDS = Number(Deno.args[0] ?? 5);
const CLIENTS = new URL("./heartbeat_clients.ts", import.meta.url).pathname;

async function run(nodes: number, transport: "http" | "tls"): Promise<number> {
  const now = Date.now();
  const tls = transport === "http" ? undefined : await ClusterTls.of(
    (await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 })).ca,
    ["127.0.0.1"],
  );
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: ["admin"],
    joinTokens: ["join"],
    reconcileMs: 1_000,
    tls,
  });
  try {
    const tokens: string[] = [];
    for (const n of syntheticCluster(nodes)) {
      tokens.push((await control.cp.nodes.register(registrationOf(n), null)).node_token);
    }
    const dir = await Deno.makeTempDir({ prefix: "llmgw_hb_bench_" });
    const tokensFile = `${dir}/tokens`;
    Deno.writeTextFileSync(tokensFile, tokens.map((t, i) => `node-${i} ${t}`).join("\n"));
    const caFile = tls === undefined ? "-" : `${dir}/ca.crt`;
    if (tls !== undefined) Deno.writeTextFileSync(caFile, tls.ca.certPem);
    const cpu0 = cpuUsage();
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLIENTS, control.url, caFile, tokensFile, String(SECONDS)],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const cpu = cpuUsage(cpu0);
    await Deno.remove(dir, { recursive: true });
    const { sent, failed, seconds } = JSON.parse(new TextDecoder().decode(out.stdout));
    const cpuPct = ((cpu.user + cpu.system) / 1e6 / seconds) * 100;
    const rate = sent / seconds;
    console.log(
      `| ${nodes.toLocaleString("en")} | ${transport} | ${rate.toFixed(0)} | ${failed} | ${
        cpuPct.toFixed(0)
      }% | ${(nodes / 5).toFixed(0)} |`,
    );
    return rate;
  } finally {
    await control.close();
  }
}

console.log(
  "| simulated nodes | transport | heartbeats/s sustained | failed | control plane CPU (of one core) | needed at 5 s interval |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
const ratios: string[] = [];
for (const n of (Deno.args[1] ?? "1000,10000").split(",").map(Number)) {
  const plain = await run(n, "http");
  const tls = await run(n, "tls");
  ratios.push(`${n.toLocaleString("en")} nodes: TLS/plain = ${(tls / plain).toFixed(2)}`);
}
console.log(`\n${ratios.join("; ")}`);
