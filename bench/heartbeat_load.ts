/**
 * Heartbeat load on one control plane (design §16: 10,000 agents heartbeating
 * every 5 s on one 2-core machine, i.e. 2,000 heartbeats/s). Registers N
 * simulated 8-GPU nodes, then sends heartbeats as fast as 64 concurrent
 * clients can, for a fixed time, over real HTTP on loopback. The clients run
 * in a process of their own (bench/heartbeat_clients.ts), so the CPU figure
 * is the control plane's alone; on 2 cores they still compete with it.
 *
 * Two comparisons, chosen by `--compare`:
 *
 * - `transport` (the default): each size runs twice on an in-memory store,
 *   over plain HTTP and over TLS (the control plane's own CA, clients pinning
 *   it as agents do), so the two columns compare side by side.
 * - `store`: each size runs over plain HTTP on SQLite (`SqliteStore` in a
 *   temporary directory, one control plane) and on PostgreSQL (a throwaway
 *   cluster from tests/postgres_server.ts, one HA instance holding the
 *   lease, design §11.1), then once more with the heartbeats sent to a second
 *   HA instance, a follower, which forwards each to the leader. Registration
 *   time is reported too: every registration writes its node row (and an
 *   event) to the store, one at a time. The CPU column is this process's,
 *   which on the follower row holds both instances; the PostgreSQL server's
 *   own CPU (its postmaster and backends, from /proc) is a column of its own.
 *   Each store row first sends one unmeasured heartbeat per node: a node's
 *   first heartbeat after a long registration changes its liveness (an
 *   event), and the steady state is what a fleet sees.
 *
 * Run: `deno run -A bench/heartbeat_load.ts [--compare transport|store] [SECONDS] [NODES,NODES…]`
 * (default 5 seconds, 1000,10000 nodes).
 *
 * @module
 */
import { join } from "node:path";
import { cpuUsage } from "node:process";
import { parseArgs } from "node:util";
import { MemoryStore } from "../control/store/memory_store.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { PostgresStore } from "../control/store/postgres_store.ts";
import { type RunningHaControl, startHaControl } from "../control/ha_control.ts";
import { startControl } from "../control/server.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import { registrationOf, syntheticCluster } from "./synthetic_cluster.ts";
import { ClusterTls } from "../control/cluster_tls.ts";
import { CertificateAuthority } from "../tls/authority.ts";
import { type PostgresServer, startPostgres } from "../tests/postgres_server.ts";

const { values: flags, positionals } = parseArgs({
  args: Deno.args,
  options: { compare: { type: "string", default: "transport" } },
  allowPositionals: true,
});
const COMPARE = flags.compare;
const SECONDS = Number(positionals[0] ?? 5);
const SIZES = (positionals[1] ?? "1000,10000").split(",").map(Number);
if (COMPARE !== "transport" && COMPARE !== "store") {
  throw new RangeError(
    `Cannot run heartbeat_load: --compare must be transport or store, got "${COMPARE}"`,
  );
}
if (!Number.isFinite(SECONDS) || SECONDS <= 0) {
  throw new RangeError(
    `Cannot run heartbeat_load: SECONDS must be a positive number, got "${positionals[0]}"`,
  );
}
if (!SIZES.every((n) => Number.isInteger(n) && n >= 1)) {
  throw new RangeError(
    `Cannot run heartbeat_load: NODES must be positive integers separated by commas, got "${
      positionals[1]
    }"`,
  );
}
if (positionals.length > 2) {
  throw new RangeError(`Cannot run heartbeat_load: unexpected argument "${positionals[2]}"`);
}

const CLIENTS = new URL("./heartbeat_clients.ts", import.meta.url).pathname;
const ADMIN = "bench-admin-token";

/** One measurement: what the clients achieved and what it cost. */
interface Measured {
  rate: number;
  failed: number;
  /** This process's CPU, in % of one core. */
  cpuPct: number;
  /** The PostgreSQL server's CPU, in % of one core; null without one. */
  dbCpuPct: number | null;
}

/** Registers `nodes` synthetic nodes directly on `cp`; their credentials and the time it took. */
async function registerAll(
  cp: ControlPlane,
  nodes: number,
): Promise<{ tokens: string[]; seconds: number }> {
  const t0 = performance.now();
  const tokens: string[] = [];
  for (const n of syntheticCluster(nodes)) {
    tokens.push((await cp.nodes.register(registrationOf(n), null)).node_token);
  }
  return { tokens, seconds: (performance.now() - t0) / 1000 };
}

/** Sends heartbeats for `tokens` to `url` for SECONDS from the client process. */
async function measure(
  url: string,
  tokens: string[],
  caPem: string | null,
  dbPid: number | null,
  warm = false,
): Promise<Measured> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_hb_bench_" });
  try {
    const tokensFile = join(dir, "tokens");
    Deno.writeTextFileSync(tokensFile, tokens.map((t, i) => `node-${i} ${t}`).join("\n"));
    const caFile = caPem === null ? "-" : join(dir, "ca.crt");
    if (caPem !== null) Deno.writeTextFileSync(caFile, caPem);
    if (warm) {
      // One heartbeat per node first, unmeasured: the steady state is what a fleet sees.
      const w = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CLIENTS, url, caFile, tokensFile, "once"],
        stdout: "null",
        stderr: "inherit",
      }).output();
      if (!w.success) throw new Error(`heartbeat_clients.ts (warm-up) exited with code ${w.code}`);
    }
    const cpu0 = cpuUsage();
    const db0 = dbPid === null ? null : processTreeCpuS(dbPid);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLIENTS, url, caFile, tokensFile, String(SECONDS)],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const cpu = cpuUsage(cpu0);
    const db1 = dbPid === null ? null : processTreeCpuS(dbPid);
    if (!out.success) throw new Error(`heartbeat_clients.ts exited with code ${out.code}`);
    const { sent, failed, seconds } = JSON.parse(new TextDecoder().decode(out.stdout));
    return {
      rate: sent / seconds,
      failed,
      cpuPct: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
      dbCpuPct: db0 === null || db1 === null ? null : ((db1 - db0) / seconds) * 100,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const CLK_TCK = (() => {
  try {
    const out = new Deno.Command("getconf", { args: ["CLK_TCK"], stderr: "null" }).outputSync();
    const n = Number(new TextDecoder().decode(out.stdout).trim());
    return out.success && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU seconds (user + system) of `root` and its children, from /proc: the
 * postmaster and its backends, live ones directly and exited ones through
 * the postmaster's reaped-children times. Null where /proc cannot be read.
 */
function processTreeCpuS(root: number): number | null {
  let ticks = 0;
  try {
    for (const e of Deno.readDirSync("/proc")) {
      if (!/^\d+$/.test(e.name)) continue;
      let stat: string;
      try {
        stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      } catch {
        continue; // exited meanwhile
      }
      // Fields after the command name, which may hold spaces: state ppid … utime stime.
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const isRoot = Number(e.name) === root;
      if (!isRoot && Number(f[1]) !== root) continue;
      ticks += Number(f[11]) + Number(f[12]);
      if (isRoot) ticks += Number(f[13]) + Number(f[14]);
    }
  } catch {
    return null;
  }
  return ticks / CLK_TCK;
}

/** Waits, polling every 50 ms, until `ok()` holds; bounded in time and count. */
async function waitFor(what: string, ok: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (let i = 0; i <= timeoutMs / 50; i++) {
    if (ok()) return;
    if (performance.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Cannot run heartbeat_load: timed out after ${timeoutMs} ms waiting for ${what}`);
}

const pct = (p: number | null) => p === null ? "n/a" : `${p.toFixed(0)}%`;
const count = (n: number) => n.toLocaleString("en");

async function transportRow(nodes: number, transport: "http" | "tls"): Promise<number> {
  const now = Date.now();
  const tls = transport === "http" ? undefined : await ClusterTls.of(
    (await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 })).ca,
    ["127.0.0.1"],
  );
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: ["join"],
    reconcileMs: 1_000,
    tls,
  });
  try {
    const { tokens } = await registerAll(control.cp, nodes);
    const m = await measure(control.url, tokens, tls?.ca.certPem ?? null, null);
    console.log(
      `| ${count(nodes)} | ${transport} | ${m.rate.toFixed(0)} | ${m.failed} | ${pct(m.cpuPct)} | ${
        (nodes / 5).toFixed(0)
      } |`,
    );
    return m.rate;
  } finally {
    await control.close();
  }
}

async function compareTransports(): Promise<void> {
  console.log(
    "| simulated nodes | transport | heartbeats/s sustained | failed | control plane CPU (of one core) | needed at 5 s interval |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  const ratios: string[] = [];
  for (const n of SIZES) {
    const plain = await transportRow(n, "http");
    const tls = await transportRow(n, "tls");
    ratios.push(`${count(n)} nodes: TLS/plain = ${(tls / plain).toFixed(2)}`);
  }
  console.log(`\n${ratios.join("; ")}`);
}

function storeRow(nodes: number, store: string, registration: number | null, m: Measured): void {
  console.log(
    `| ${count(nodes)} | ${store} | ${
      registration === null ? "(registered above)" : `${registration.toFixed(1)} s`
    } | ${m.rate.toFixed(0)} | ${m.failed} | ${pct(m.cpuPct)} | ${pct(m.dbCpuPct)} | ${
      (nodes / 5).toFixed(0)
    } |`,
  );
}

async function sqliteRow(nodes: number): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_hb_sqlite_" });
  try {
    const control = await startControl({
      hostname: "127.0.0.1",
      port: 0,
      store: SqliteStore.open(join(dir, "llmgw.db")),
      adminTokens: [ADMIN],
      joinTokens: ["join"],
      reconcileMs: 1_000,
    });
    try {
      const reg = await registerAll(control.cp, nodes);
      const m = await measure(control.url, reg.tokens, null, null, true);
      storeRow(nodes, "SQLite", reg.seconds, m);
      return m.rate;
    } finally {
      await control.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function haInstance(url: string, holder: string): Promise<RunningHaControl> {
  return await startHaControl({
    hostname: "127.0.0.1",
    port: 0,
    store: await PostgresStore.open(url, { applicationName: `llmgw-bench-${holder}` }),
    adminTokens: [ADMIN],
    joinTokens: ["join"],
    reconcileMs: 1_000,
    holder,
  });
}

/** The leader row, then the follower row, on one database: the nodes register once. */
async function postgresRows(nodes: number, pg: PostgresServer): Promise<[number, number]> {
  const url = await pg.createDatabase(`hb_${nodes}`);
  const running: RunningHaControl[] = [];
  try {
    const leader = await haInstance(url, "leader");
    running.push(leader);
    await waitFor("the first instance to lead", () => leader.leader() !== null);
    const reg = await registerAll(leader.leader()!, nodes);
    const direct = await measure(leader.url, reg.tokens, null, pg.pid, true);
    storeRow(nodes, "PostgreSQL, to the leader", reg.seconds, direct);
    const follower = await haInstance(url, "follower");
    running.push(follower);
    await waitFor("the second instance to follow", () => follower.leadership().role === "follower");
    const forwarded = await measure(follower.url, reg.tokens, null, pg.pid, true);
    storeRow(nodes, "PostgreSQL, to a follower (forwarded)", null, forwarded);
    return [direct.rate, forwarded.rate];
  } finally {
    // The follower first: the leader's handover would otherwise make it lead.
    for (const r of running.reverse()) await r.close();
  }
}

async function compareStores(): Promise<void> {
  const pg = await startPostgres();
  // A signal skips `finally`; the database must not outlive the run. (The
  // client process stops on its own after SECONDS.)
  const onSignal = () => void pg.stop().finally(() => Deno.exit(130));
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  try {
    console.log(
      "| simulated nodes | store | registration | heartbeats/s sustained | failed | control plane CPU (of one core) | PostgreSQL CPU | needed at 5 s interval |",
    );
    console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
    const ratios: string[] = [];
    for (const n of SIZES) {
      const sqlite = await sqliteRow(n);
      const [leader, follower] = await postgresRows(n, pg);
      ratios.push(
        `${count(n)} nodes: PostgreSQL/SQLite = ${(leader / sqlite).toFixed(2)}, ` +
          `via a follower/SQLite = ${(follower / sqlite).toFixed(2)}`,
      );
    }
    console.log(`\n${ratios.join("; ")}`);
  } finally {
    await pg.stop();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

if (COMPARE === "transport") await compareTransports();
else await compareStores();
