/**
 * Two HA control planes on one throwaway PostgreSQL database (issue #15):
 * one leader; an apply through either is visible through the other; a
 * leader that hands over is replaced within the retry period; with the
 * database down every instance answers reads from its last known state,
 * says so, and refuses writes with `not_leader`; all resumes when it returns.
 *
 * @module
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { postgresAvailable, startPostgres } from "../tests/postgres_server.ts";
import { until } from "../tests/until.ts";
import { type RunningHaControl, startHaControl } from "./ha_control.ts";
import { PostgresStore } from "./store/postgres_store.ts";
import { FORWARDED_BY_HEADER, READ_ONLY_HEADER } from "../protocol/leadership.ts";

const available = postgresAvailable();
const ADMIN = "ha-test-admin-token";
const DEPLOYMENT = {
  name: "demo",
  model: "org/demo",
  replicas: 1,
  profiles: [{ name: "h100", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
};

function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  extra: Record<string, string> = {},
): Promise<Response> {
  return fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json", ...extra },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function json(
  res: Promise<Response>,
): Promise<{ status: number; body: Record<string, unknown>; res: Response }> {
  const r = await res;
  return { status: r.status, body: await r.json(), res: r };
}

async function instance(url: string, name: string): Promise<RunningHaControl> {
  const store = await PostgresStore.open(url, { log: () => {}, queryTimeoutMs: 2_000 });
  return await startHaControl({
    hostname: "127.0.0.1",
    port: 0,
    store,
    adminTokens: [ADMIN],
    joinTokens: [],
    holder: name,
    leaseMs: 1_500,
    retryMs: 100,
    pollMs: 300,
    reloadEveryMs: 150,
    reconcileMs: 200,
  });
}

Deno.test({
  name: "HA control planes on one database",
  ignore: !available.ok,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const pg = await startPostgres();
    const running: RunningHaControl[] = [];
    try {
      const db = await pg.createDatabase("ha");
      const a = await instance(db, "a");
      running.push(a);
      assertEquals(a.leadership().role, "leader");
      const b = await instance(db, "b");
      running.push(b);

      await t.step("one leader; the follower names it", async () => {
        assertEquals(a.leadership().role, "leader");
        const lb = await until("b sees a lead", () => {
          const l = b.leadership();
          return l.role === "follower" ? l : null;
        });
        assertEquals(lb.epoch, a.leadership().epoch);
        assertOk(a.leader() !== null && b.leader() === null);
      });

      await t.step("an apply through either is visible through the other", async () => {
        assertEquals((await call(b.url, "POST", "/v1/deployments", DEPLOYMENT)).status, 201);
        const onA = await json(call(a.url, "GET", "/v1/deployments"));
        assertEquals((onA.body.deployments as { name: string }[]).map((d) => d.name), ["demo"]);
        const scaled = await json(
          call(a.url, "POST", "/v1/deployments/demo/scale", { replicas: 2 }),
        );
        assertEquals(scaled.status, 200, JSON.stringify(scaled.body));
        const onB = await json(call(b.url, "GET", "/v1/deployments/demo"));
        assertEquals((onB.body as { spec: { replicas: number } }).spec.replicas, 2);
      });

      await t.step("a leader handing over is replaced at once", async () => {
        const epoch = a.leadership().epoch;
        await a.close();
        running.shift();
        const l = await until(
          "b leads",
          () => b.leadership().role === "leader" ? b.leadership() : null,
          {
            timeoutMs: 5_000,
          },
        );
        assertEquals(l.epoch, epoch + 1);
        const onB = await json(call(b.url, "GET", "/v1/deployments"));
        assertEquals((onB.body.deployments as { name: string }[]).map((d) => d.name), ["demo"]);
        // The rows written in the new term carry its epoch.
        assertEquals(
          (await call(b.url, "POST", "/v1/deployments/demo/scale", { replicas: 1 })).status,
          200,
        );
        assertEquals(
          (await pg.psql("ha", "SELECT epoch FROM deployments WHERE name = 'demo'")).trim(),
          String(epoch + 1),
        );
      });

      await t.step(
        "the database down: reads from the last known state, writes refused; then resumed",
        async () => {
          const c = await instance(db, "c");
          running.push(c);
          await until("c follows", () => c.leadership().role === "follower");
          // Its own last known state, not the leader's answer forwarded: a follower
          // answers a request already forwarded once from what it has loaded.
          await until("c has loaded the state", async () => {
            const r = await call(c.url, "GET", "/v1/deployments", undefined, {
              [FORWARDED_BY_HEADER]: "ha-test",
            });
            return r.status === 200 && ((await r.json()).deployments as unknown[]).length === 1;
          });
          await pg.stopServer();
          await until(
            "both read-only",
            () => b.leadership().role === "read_only" && c.leadership().role === "read_only",
            {
              timeoutMs: 8_000,
            },
          );
          for (const x of [b, c]) {
            const read = await call(x.url, "GET", "/v1/deployments");
            assertEquals(read.status, 200);
            assertOk(read.headers.get(READ_ONLY_HEADER), "the answer says it is read-only");
            assertEquals(((await read.json()).deployments as { name: string }[])[0].name, "demo");
            const write = await json(
              call(x.url, "POST", "/v1/deployments/demo/scale", { replicas: 3 }),
            );
            assertEquals(write.status, 503);
            assertEquals((write.body.error as { code: string }).code, "not_leader");
            // The agent API is never answered from old state.
            const agent = await call(x.url, "GET", "/v1/agent/desired?generation=0&wait_ms=0");
            assertEquals(agent.status, 503);
            await agent.body?.cancel();
            const leader = await json(call(x.url, "GET", "/v1/leader"));
            assertOk(
              String(leader.body.reason).includes("unreachable"),
              JSON.stringify(leader.body),
            );
          }
          await pg.startServer();
          const leader = await until("a leader again", () => {
            const l = [b, c].find((x) => x.leadership().role === "leader");
            return l ?? null;
          }, { timeoutMs: 15_000 });
          const other = leader === b ? c : b;
          await until("the other follows", () => other.leadership().role === "follower", {
            timeoutMs: 5_000,
          });
          assertEquals(
            (await call(other.url, "POST", "/v1/deployments/demo/scale", { replicas: 2 })).status,
            200,
          );
        },
      );
    } finally {
      for (const r of running) await r.close().catch(() => {});
      await pg.stop();
    }
  },
});
