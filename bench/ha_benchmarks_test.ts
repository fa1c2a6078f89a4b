/**
 * The HA benchmarks (issue #15) in a small size, so CI runs them and they
 * cannot rot: each starts and stops its own PostgreSQL, and must print its
 * table with no failed heartbeat. The figures themselves are not checked
 * (tests never assert times); docs/benchmarks.md has the full runs.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { postgresAvailable } from "../tests/postgres_server.ts";

const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const available = postgresAvailable();

async function run(script: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", here(script), ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assertEquals(out.code, 0, `${script}: ${new TextDecoder().decode(out.stderr).slice(-2000)}`);
  return text;
}

Deno.test({
  name: "bench: heartbeats on SQLite and PostgreSQL, small",
  ignore: !available.ok,
  async fn() {
    const text = await run("./heartbeat_load.ts", ["--compare", "store", "1", "200"]);
    const rows = text.split("\n").filter((l) => l.startsWith("| 200 |"));
    assertEquals(rows.length, 3, text);
    for (const r of rows) assertEquals(r.split("|")[5].trim(), "0", `no failed heartbeat: ${r}`);
  },
});

Deno.test({
  name: "bench: failover over two leader kills, small",
  ignore: !available.ok,
  async fn() {
    const text = await run("./failover_time.ts", ["--kills", "2", "--lease", "2"]);
    const row = text.split("\n").find((l) => l.startsWith("| 2 s | 2 |"));
    assertOk(row !== undefined, text);
  },
});

Deno.test({
  name: "bench: a follower's reload, small",
  ignore: !available.ok,
  async fn() {
    const text = await run("./follower_reload.ts", ["200", "2"]);
    assertOk(text.includes("| 200 | PostgreSQL |"), text);
  },
});
