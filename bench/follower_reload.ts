/**
 * What a follower pays to reload its read model (design §11.1): on a change
 * it opens the books whole from PostgreSQL, read-only, as a new leader does
 * on taking over. Registers N simulated 8-GPU nodes and R placed-looking
 * deployments on a throwaway PostgreSQL (tests/postgres_server.ts), then
 * times `ControlPlane.open({readOnly: true})` several times; the same books
 * on SQLite beside it, for the ratio.
 *
 * Run: `deno run -A bench/follower_reload.ts [NODES] [TIMES]` (default 10000 and 5).
 *
 * @module
 */
import { ControlPlane } from "../control/control_plane.ts";
import { LeaderLease } from "../control/leader_lease.ts";
import { PostgresStore } from "../control/store/postgres_store.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import type { ControlStore } from "../control/store/store.ts";
import { startPostgres } from "../tests/postgres_server.ts";
import { registrationOf, syntheticCluster } from "./synthetic_cluster.ts";

const NODES = Number(Deno.args[0] ?? 10_000);
const TIMES = Number(Deno.args[1] ?? 5);
if (!Number.isInteger(NODES) || NODES <= 0 || !Number.isInteger(TIMES) || TIMES <= 0) {
  console.error("Cannot run follower_reload: NODES and TIMES must be positive integers");
  Deno.exit(2);
}

/** Fills `store` with the nodes through a control plane, as registrations do. */
async function fill(store: ControlStore): Promise<number> {
  const t0 = performance.now();
  const cp = await ControlPlane.open({ store, reconcileMs: 3_600_000 });
  for (const n of syntheticCluster(NODES)) await cp.nodes.register(registrationOf(n), null);
  await cp.stop();
  return performance.now() - t0;
}

/** The median and the max of `TIMES` read-only opens (ms). */
async function reloads(store: ControlStore): Promise<{ median: number; max: number }> {
  const times: number[] = [];
  for (let i = 0; i < TIMES; i++) {
    const t0 = performance.now();
    const cp = await ControlPlane.open({ store, readOnly: true, leading: () => false });
    times.push(performance.now() - t0);
    await cp.stop();
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(times.length / 2)], max: times.at(-1)! };
}

const pg = await startPostgres();
const dir = await Deno.makeTempDir({ prefix: "llmgw_reload_bench_" });
try {
  const url = await pg.createDatabase("reload");
  const postgres = await PostgresStore.open(url, { log: () => {} });
  const lease = new LeaderLease({
    store: postgres,
    holder: "bench",
    address: "",
    leaseMs: 3_600_000,
  });
  const term = await lease.tryAcquire();
  postgres.setEpoch(term!.epoch, "bench");
  const sqlite = SqliteStore.open(`${dir}/llmgw.db`);
  const rows: string[] = [];
  const results: Record<string, number> = {};
  for (const [name, store] of [["SQLite", sqlite], ["PostgreSQL", postgres]] as const) {
    const filled = await fill(store);
    const r = await reloads(store);
    results[name] = r.median;
    rows.push(
      `| ${NODES.toLocaleString("en")} | ${name} | ${(filled / 1000).toFixed(1)} s | ${
        r.median.toFixed(0)
      } ms | ${r.max.toFixed(0)} ms |`,
    );
  }
  console.log("| nodes | store | registering them | read-only open: median | max |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const r of rows) console.log(r);
  console.log(
    `\nPostgreSQL/SQLite (median open) = ${(results.PostgreSQL / results.SQLite).toFixed(2)}`,
  );
  await postgres.close();
  sqlite.close();
} finally {
  await pg.stop();
  await Deno.remove(dir, { recursive: true });
}
