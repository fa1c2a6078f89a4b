/**
 * The HA control plane's faults with real processes (issue #15): two
 * `llmgw control serve` instances on one throwaway PostgreSQL, an agent and
 * a gateway each given both URLs, and client traffic through the gateway
 * the whole time.
 *
 * - SIGKILL of the leader: a new leader within the lease plus 2 s, which
 *   places a new replica; no engine restarted, no failed request.
 * - SIGSTOP of the leader, SIGCONT once a new leader exists: the same, and
 *   the thawed instance steps down; no row carries its epoch from after the
 *   takeover.
 * - PostgreSQL restarted: every instance reconnects, nothing is lost.
 * - PostgreSQL unreachable for longer than a lease: every instance serves
 *   its last known state read-only and says so, agents keep their engines,
 *   the gateway keeps serving; all resumes when it returns.
 *
 * Every process is stopped by the test, by pid, even on failure.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk } from "./assert.ts";
import { until } from "./until.ts";
import { enginePids, spawnAgent } from "./agent_processes.ts";
import { startTestHub } from "./test_hub.ts";
import { freePortsIn, portBlock, portsOf } from "./port_plan.ts";
import { postgresAvailable, type PostgresServer, startPostgres } from "./postgres_server.ts";
import { FailoverFetch } from "../http/failover_fetch.ts";
import { READ_ONLY_HEADER } from "../protocol/leadership.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const ADMIN = "ha-failover-admin-token";
const JOIN = "ha-failover-join-token";
const LEASE_S = 3;
/** The acceptance bound: a new leader within the lease plus 2 s. */
const TAKEOVER_BOUND_MS = LEASE_S * 1000 + 2000;
const POLL = { timeoutMs: 30_000, intervalMs: 100 };
/**
 * This file's ports (tests/port_plan.ts): block 0 for the agent's engines,
 * the two control planes' ports from block 1, planned rather than picked by
 * the kernel because each comes back on its port after its kill.
 */
const PORTS = portsOf(import.meta.url);
const available = postgresAvailable();

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

interface Instance {
  name: string;
  port: number;
  url: string;
  dir: string;
  proc: Deno.ChildProcess | null;
}

Deno.test({
  name: "HA failover with real processes: leader killed, frozen, database restarted and away",
  ignore: !available.ok,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await using hub = await startTestHub(["org/demo"]);
    const root = await Deno.makeTempDir({ prefix: "llmgw_ha_failover_" });
    const procs: Deno.ChildProcess[] = [];
    const groups = new Set<number>();
    let pg: PostgresServer | null = null;
    let client: Deno.HttpClient | null = null;
    let traffic: Traffic | null = null;
    try {
      pg = await startPostgres();
      const db = await pg.createDatabase("ha");
      const controlPorts = freePortsIn(portBlock(PORTS, 1), 2);
      const instances: Instance[] = ["a", "b"].map((name, n) => {
        const port = controlPorts[n];
        return { name, port, url: `https://127.0.0.1:${port}`, dir: join(root, name), proc: null };
      });
      const start = (i: Instance) => {
        i.proc = new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            join(ROOT, "main.ts"),
            "control",
            "serve",
            "--listen",
            `127.0.0.1:${i.port}`,
            "--state-dir",
            i.dir,
            "--gateway-listen",
            "off",
            "--lease",
            String(LEASE_S),
            "--heartbeat-interval",
            "1",
            "--unreachable-after",
            "20",
            "--lost-after",
            "40",
          ],
          env: { LLMGW_STORE_URL: db, LLMGW_ADMIN_TOKEN: ADMIN, LLMGW_JOIN_TOKEN: JOIN },
          stdout: "null",
          stderr: "null",
        }).spawn();
        procs.push(i.proc);
      };
      const [a, b] = instances;
      start(a);
      const caPath = join(a.dir, "tls", "ca.crt");
      await until("a's CA", () => Deno.stat(join(a.dir, "tls", "ca.key")).then(() => true), POLL);
      // The operator copies the cluster CA to every control host (docs/ha.md).
      await Deno.mkdir(join(b.dir, "tls"), { recursive: true });
      for (const f of ["ca.crt", "ca.key"]) {
        await Deno.copyFile(join(a.dir, "tls", f), join(b.dir, "tls", f));
      }
      client = Deno.createHttpClient({ caCerts: [await Deno.readTextFile(caPath)] });
      const http = client;
      const direct = (url: string, path: string, init: RequestInit = {}) =>
        fetch(url + path, {
          ...init,
          client: http,
          headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        });
      const leadership = async (i: Instance) => {
        const res = await direct(i.url, "/v1/leader", { signal: AbortSignal.timeout(1_000) });
        return await res.json() as { role: string; epoch: number };
      };
      await until("a leads", async () => (await leadership(a)).role === "leader", POLL);
      start(b);
      await until("b follows", async () => (await leadership(b)).role === "follower", POLL);
      // The admin client is the CLI's: both URLs, moving on failure.
      const cli = new FailoverFetch(
        [a.url, b.url],
        (input, init) => fetch(input, { ...init, client: http }),
      );
      // As an operator would: a request the frozen leader never answered is sent again
      // (the client then starts at the next URL).
      const admin = async (method: string, path: string, body?: unknown) => {
        for (let attempt = 1;; attempt++) {
          try {
            const res = await cli.fetch(a.url + path, {
              method,
              headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
              body: body === undefined ? undefined : JSON.stringify(body),
              signal: AbortSignal.timeout(5_000),
            });
            return { status: res.status, body: await res.json() };
          } catch (e) {
            if (attempt >= 3 || !(e instanceof DOMException)) throw e;
          }
        }
      };
      const leaderOf = async () => {
        for (const i of instances) {
          if (i.proc === null) continue;
          const l = await leadership(i).catch(() => null);
          if (l?.role === "leader") return { i, epoch: l.epoch };
        }
        return null;
      };

      const agentDir = join(root, "agent");
      const agent = spawnAgent(
        `${a.url},${b.url}`,
        JOIN,
        "h100-a",
        "dgx_h100_idle",
        agentDir,
        portBlock(PORTS, 0),
        {
          LLMGW_CA: caPath,
          ...hub.env,
        },
      );
      procs.push(agent);
      groups.add(agent.pid);
      await until("the node registered", async () => {
        const r = await admin("GET", "/v1/nodes");
        return r.status === 200 && r.body.nodes.length === 1;
      }, POLL);
      const applied = await admin("POST", "/v1/deployments", {
        name: "demo",
        model: "org/demo",
        replicas: 1,
        profiles: [{ name: "h100", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
      });
      assertEquals(applied.status, 201, JSON.stringify(applied.body));
      const readyReplicas = async () => {
        const r = await admin("GET", "/v1/replicas");
        if (r.status !== 200) return [];
        return (r.body.replicas as { id: string; state: string }[]).filter((x) =>
          x.state === "ready"
        );
      };
      await until("the replica is ready", async () => (await readyReplicas()).length === 1, POLL);
      const engines = enginePids(agentDir).sort();
      assertEquals(engines.length, 1);

      const token = await admin("POST", "/v1/tokens", { kind: "gateway" });
      assertEquals(token.status, 201, JSON.stringify(token.body));
      const gwPort = freePort();
      const gateway = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          join(ROOT, "main.ts"),
          "gateway",
          "serve",
          "--control",
          a.url,
          "--control",
          b.url,
          "--listen",
          `127.0.0.1:${gwPort}`,
          "--poll-interval",
          "0.5",
        ],
        env: { LLMGW_TOKEN: token.body.token, LLMGW_CA: caPath },
        stdout: "null",
        stderr: "null",
      }).spawn();
      procs.push(gateway);
      const gatewayUrl = `http://127.0.0.1:${gwPort}`;
      await until("the gateway serves demo", async () => {
        const r = await chat(gatewayUrl).catch(() => null);
        return r?.ok ?? false;
      }, POLL);
      traffic = new Traffic(gatewayUrl);
      traffic.start();

      await t.step(
        "SIGKILL of the leader: a new leader within the lease + 2 s places a replica",
        async () => {
          const before = (await leaderOf())!;
          assertEquals(before.i, a);
          const killedAt = performance.now();
          const killedWall = Date.now();
          a.proc!.kill("SIGKILL");
          await a.proc!.status;
          a.proc = null;
          const after = await until("b leads", async () => {
            const l = await leadership(b).catch(() => null);
            return l?.role === "leader" ? l : null;
          }, { timeoutMs: TAKEOVER_BOUND_MS + 5_000, intervalMs: 50 });
          const tookOver = performance.now() - killedAt;
          assertOk(tookOver <= TAKEOVER_BOUND_MS, `new leader after ${tookOver.toFixed(0)} ms`);
          assertEquals(after.epoch, before.epoch + 1);
          // The new leader places: a second replica, through the CLI's URL list.
          const scaled = await admin("POST", "/v1/deployments/demo/scale", { replicas: 2 });
          assertEquals(scaled.status, 200, JSON.stringify(scaled.body));
          await until("two replicas placed", async () => {
            const r = await admin("GET", "/v1/replicas");
            return r.status === 200 && r.body.replicas.length === 2 &&
              r.body.replicas.every((x: { phase?: string; state: string }) =>
                x.state !== "pending"
              );
          }, POLL);
          const placedAfter = performance.now() - killedAt;
          assertOk(
            placedAfter <= TAKEOVER_BOUND_MS,
            `the new leader placed the new replica ${placedAfter.toFixed(0)} ms after the kill`,
          );
          await until("two replicas ready", async () => (await readyReplicas()).length === 2, POLL);
          console.log(
            `leader killed: new leader after ${tookOver.toFixed(0)} ms; 2nd replica placed after ${
              placedAfter.toFixed(0)
            } ms`,
          );
          // The agent, given both URLs, heartbeats to the new leader, with the same engine.
          await until("a heartbeat reaches the new leader", async () => {
            const n = (await admin("GET", "/v1/nodes")).body.nodes[0];
            return n?.state === "ready" && n.last_seen_ms > killedWall;
          }, POLL);
          sameEnginesOf(enginePids(agentDir), engines[0]);
          start(a);
          await until(
            "a follows again",
            async () => (await leadership(a).catch(() => null))?.role === "follower",
            POLL,
          );
        },
      );

      await t.step(
        "SIGSTOP of the leader, SIGCONT after takeover: its term is fenced, it steps down",
        async () => {
          const before = (await leaderOf())!;
          assertEquals(before.i, b);
          b.proc!.kill("SIGSTOP");
          const stoppedAt = performance.now();
          let thawed = false;
          try {
            const after = await until("a leads", async () => {
              const l = await leadership(a).catch(() => null);
              return l?.role === "leader" ? l : null;
            }, { timeoutMs: TAKEOVER_BOUND_MS + 5_000, intervalMs: 50 });
            const tookOver = performance.now() - stoppedAt;
            assertOk(tookOver <= TAKEOVER_BOUND_MS, `new leader after ${tookOver.toFixed(0)} ms`);
            assertEquals(after.epoch, before.epoch + 1);
            const takeoverMs = Date.now();
            // A change made under the new leader while the old one is frozen.
            assertEquals(
              (await admin("POST", "/v1/deployments/demo/scale", { replicas: 1 })).status,
              200,
            );
            await until("one replica", async () => {
              const r = await admin("GET", "/v1/replicas");
              return r.status === 200 && r.body.replicas.length === 1;
            }, POLL);
            // A change sent to the frozen leader itself: it is read only when it thaws, still
            // believing it leads. Either its write is refused by the fence (503) or, once it has
            // stepped down, it forwards the request to the new leader (200).
            const toFrozen = direct(b.url, "/v1/deployments/demo/scale", {
              method: "POST",
              body: JSON.stringify({ replicas: 3 }),
              signal: AbortSignal.timeout(20_000),
            }).then(async (r) => ({ status: r.status, body: await r.json() }));
            b.proc!.kill("SIGCONT");
            thawed = true;
            const late = await toFrozen;
            console.log(
              `a change sent to the frozen leader, answered after it thawed: ${late.status}`,
            );
            assertOk([200, 503].includes(late.status), JSON.stringify(late.body));
            if (late.status === 503) assertEquals(late.body.error.code, "not_leader");
            await until("b steps down", async () => {
              const l = await leadership(b).catch(() => null);
              return l !== null && l.role !== "leader";
            }, POLL);
            // Give the thawed instance's timers their chance, then check the rows.
            await until(
              "b follows",
              async () => (await leadership(b).catch(() => null))?.role === "follower",
              POLL,
            );
            for (const table of ["deployments", "replicas", "nodes"]) {
              const stale = await pg!.psql(
                "ha",
                `SELECT count(*) FROM ${table} WHERE epoch = ${before.epoch} AND updated_at >= ${takeoverMs}`,
              );
              assertEquals(
                stale.trim(),
                "0",
                `${table}: rows written by the old term after the takeover`,
              );
            }
            const staleEvents = await pg!.psql(
              "ha",
              `SELECT count(*) FROM events WHERE epoch = ${before.epoch} AND at >= ${takeoverMs}`,
            );
            assertEquals(staleEvents.trim(), "0");
            // The deployment's row is the new term's: replicas 1, or 3 when the thawed instance
            // forwarded the late change to the new leader.
            assertEquals(
              (await pg!.psql("ha", "SELECT epoch FROM deployments WHERE name = 'demo'")).trim(),
              String(after.epoch),
            );
            const spec = JSON.parse(
              await pg!.psql("ha", "SELECT spec FROM deployments WHERE name = 'demo'"),
            );
            assertEquals(spec.replicas, late.status === 200 ? 3 : 1);
            if (late.status === 200) {
              assertEquals(
                (await admin("POST", "/v1/deployments/demo/scale", { replicas: 1 })).status,
                200,
              );
            }
            sameEnginesOf(enginePids(agentDir), engines[0]);
          } finally {
            if (!thawed) b.proc?.kill("SIGCONT");
          }
        },
      );

      await t.step("PostgreSQL restarted: both reconnect and nothing is lost", async () => {
        await pg!.stopServer();
        await pg!.startServer();
        const l = await until("a leader", () => leaderOf(), POLL);
        const other = l.i === a ? b : a;
        await until(
          "the other follows",
          async () => (await leadership(other).catch(() => null))?.role === "follower",
          POLL,
        );
        // For a lease and more, both keep their roles: each renews or reads over a new connection.
        const since = performance.now();
        await until("both stay in their roles for a lease", async () => {
          const roles = [(await leadership(l.i)).role, (await leadership(other)).role];
          assertEquals(roles, ["leader", "follower"], "roles after the restart");
          return performance.now() - since > LEASE_S * 1000 + 1000;
        }, POLL);
        assertEquals(
          (await admin("POST", "/v1/deployments/demo/scale", { replicas: 1 })).status,
          200,
        );
        const deployments = await admin("GET", "/v1/deployments");
        assertEquals(deployments.body.deployments.map((d: { name: string }) => d.name), ["demo"]);
        await until(
          "the replica ready again in the leader's view",
          async () => (await readyReplicas()).length === 1,
          POLL,
        );
        sameEnginesOf(enginePids(agentDir), engines[0]);
      });

      await t.step(
        "PostgreSQL away for longer than a lease: read-only, engines kept; then resumed",
        async () => {
          await pg!.stopServer();
          try {
            for (const i of instances) {
              await until(
                `${i.name} read-only`,
                async () => (await leadership(i).catch(() => null))?.role === "read_only",
                {
                  timeoutMs: LEASE_S * 1000 + 10_000,
                  intervalMs: 100,
                },
              );
            }
            for (const i of instances) {
              const res = await direct(i.url, "/v1/deployments");
              assertEquals(res.status, 200);
              assertOk(res.headers.get(READ_ONLY_HEADER), `${i.name} says it is read-only`);
              assertEquals((await res.json()).deployments.length, 1);
              const write = await direct(i.url, "/v1/deployments/demo/scale", {
                method: "POST",
                body: JSON.stringify({ replicas: 2 }),
              });
              assertEquals(write.status, 503);
              assertEquals((await write.json()).error.code, "not_leader");
            }
            // Longer than a lease in all, while the agent and the gateway carry on.
            const gatewayOk = await chat(gatewayUrl);
            assertEquals(gatewayOk.status, 200);
            await gatewayOk.body?.cancel();
            sameEnginesOf(enginePids(agentDir), engines[0]);
          } finally {
            await pg!.startServer();
          }
          await until("a leader again", () => leaderOf(), POLL);
          await until("the node ready in the new term", async () => {
            const r = await admin("GET", "/v1/nodes");
            return r.status === 200 && r.body.nodes[0]?.state === "ready";
          }, POLL);
          await until("the replica ready", async () => (await readyReplicas()).length === 1, POLL);
          sameEnginesOf(enginePids(agentDir), engines[0]);
        },
      );

      const report = await traffic.stop();
      traffic = null;
      assertOk(report.sent > 0, "traffic was sent");
      assertEquals(report.failures, [], `failed requests out of ${report.sent}`);
    } finally {
      await traffic?.stop();
      for (const p of procs) {
        try {
          p.kill("SIGCONT");
          p.kill("SIGKILL");
        } catch {
          // Gone.
        }
      }
      await Promise.all(procs.map((p) => p.status.catch(() => {})));
      for (const pid of enginePids(join(root, "agent"))) groups.add(pid);
      for (const g of groups) {
        try {
          Deno.kill(-g, "SIGKILL");
        } catch {
          // Gone.
        }
      }
      client?.close();
      await pg?.stop();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  },
});

/** Asserts the first replica's engine is among `pids`. */
function sameEnginesOf(pids: number[], first: number): void {
  assertOk(pids.includes(first), `the first replica's engine ${first} still runs (now ${pids})`);
}

/** One chat completion through the gateway. */
function chat(gatewayUrl: string): Promise<Response> {
  return fetch(`${gatewayUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "demo",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    }),
    signal: AbortSignal.timeout(10_000),
  });
}

/** Steady client traffic through the gateway, bounded in count and time. */
class Traffic {
  readonly #url: string;
  #running = false;
  #loop: Promise<void> = Promise.resolve();
  sent = 0;
  failures: string[] = [];

  constructor(url: string) {
    this.#url = url;
  }

  start(): void {
    this.#running = true;
    const deadline = Date.now() + 300_000;
    this.#loop = (async () => {
      while (this.#running && this.sent < 20_000 && Date.now() < deadline) {
        this.sent++;
        try {
          const res = await chat(this.#url);
          if (!res.ok) this.failures.push(`${res.status} ${await res.text()}`);
          else await res.body?.cancel();
        } catch (e) {
          this.failures.push(String(e));
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  }

  async stop(): Promise<{ sent: number; failures: string[] }> {
    this.#running = false;
    await this.#loop;
    return { sent: this.sent, failures: this.failures };
  }
}
