/**
 * PostgresStore against the store contract on a throwaway PostgreSQL
 * cluster (tests/postgres_server.ts), plus what only a shared database
 * has: migrating once under concurrent starts, fenced writes by epoch,
 * change notifications with keys only, and recovery after the server
 * restarts (design §11, issue #15).
 *
 * @module
 */
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../../tests/assert.ts";
import {
  postgresAvailable,
  type PostgresServer,
  startPostgres,
} from "../../tests/postgres_server.ts";
import { until } from "../../tests/until.ts";
import { LeaderLease } from "../leader_lease.ts";
import { PG_MIGRATIONS, PG_SCHEMA_VERSION } from "./postgres_migrations.ts";
import { NotLeaderError, PostgresStore, redactUrl } from "./postgres_store.ts";
import type { StoreChange } from "./postgres_changes.ts";
import { storeContractSteps } from "../../tests/store_contract.ts";
import { storedDeployment, storedNode } from "../../tests/store_records.ts";
import { StoreError } from "./store.ts";
import { columnNames, TABLES } from "./tables.ts";
import { CertificateAuthority } from "../../tls/authority.ts";

const available = postgresAvailable();
if (!available.ok) console.error(`PostgresStore tests ignored: ${available.reason}`);

let serial = 0;
/** A fresh database on `pg`, its store open and leading (a long lease, so no renewal is needed). */
async function leadingStore(pg: PostgresServer): Promise<{ store: PostgresStore; url: string }> {
  const url = await pg.createDatabase(`t${++serial}`);
  const store = await PostgresStore.open(url, { log: () => {} });
  const lease = new LeaderLease({ store, holder: "test", address: "", leaseMs: 600_000 });
  const term = await lease.tryAcquire();
  store.setEpoch(term!.epoch, "test");
  return { store, url };
}

Deno.test({
  name: "PostgresStore",
  ignore: !available.ok,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const pg = await startPostgres();
    try {
      await storeContractSteps(t, async () => {
        const { store } = await leadingStore(pg);
        return { store, cleanup: () => store.close() };
      });

      await t.step("a database from before identities upgrades; its rows read uid ''", async () => {
        const db = `t${++serial}`;
        const url = await pg.createDatabase(db);
        const before = PG_MIGRATIONS.findIndex((m) => m.includes("ADD COLUMN uid"));
        assertOk(before > 0);
        const spec = JSON.stringify(storedDeployment("llama").spec).replaceAll("'", "''");
        await pg.psql(
          db,
          PG_MIGRATIONS.slice(0, before).join(";\n") +
            `;\nCREATE TABLE llmgw_schema (version INTEGER NOT NULL);
            INSERT INTO llmgw_schema (version) VALUES (${before});
            INSERT INTO deployments (name, spec, created_at, updated_at, epoch, seq)
              VALUES ('llama', '${spec}', 1, 1, 1, 1);
            INSERT INTO events (at, kind, subject, message, epoch)
              VALUES (1, 'deployment_created', 'deployment/llama', '2 replicas', 1);`,
        );
        const store = await PostgresStore.open(url, { log: () => {} });
        try {
          assertEquals((await store.listDeployments()).map((d) => d.uid), [""]);
          const events = await store.listEvents({ subject: "deployment/llama", uid: "" });
          assertEquals(events.map((e) => [e.kind, e.uid]), [["deployment_created", ""]]);
        } finally {
          await store.close();
        }
      });

      await t.step("a damaged JSON column fails the list, as in SQLite", async () => {
        const { store } = await leadingStore(pg);
        try {
          await store.putDeployment(storedDeployment("llama"));
          // An object where the revision history (a list) belongs: loading it would
          // hand the rollout code a history it cannot walk.
          await pg.psql(`t${serial}`, `UPDATE deployments SET history = '{}'`);
          const e = await assertRejects(() => store.listDeployments(), StoreError, "not an array");
          assertStringIncludes(e.message, 'table deployments, row "llama": column history');
          await pg.psql(`t${serial}`, `UPDATE deployments SET history = '[]', spec = '[1]'`);
          await assertRejects(() => store.listDeployments(), StoreError, "not an object");
        } finally {
          await store.close();
        }
      });

      await t.step("each declared table has the migrated database's columns", async () => {
        const { store } = await leadingStore(pg);
        try {
          for (const table of TABLES) {
            const rows = await store.query(
              "read columns",
              `SELECT column_name FROM information_schema.columns
               WHERE table_name = $1 AND column_name NOT IN ('epoch', 'seq')
               ORDER BY ordinal_position`,
              [table.name],
            );
            assertEquals(
              rows.map((r) => r.column_name).sort(),
              columnNames(table).sort(),
              table.name,
            );
          }
        } finally {
          await store.close();
        }
      });

      await t.step("two instances starting on an empty database migrate it once", async () => {
        const url = await pg.createDatabase(`t${++serial}`);
        const [a, b] = await Promise.all([
          PostgresStore.open(url, { log: () => {} }),
          PostgresStore.open(url, { log: () => {} }),
        ]);
        try {
          assertEquals(
            (await pg.psql(`t${serial}`, "SELECT version FROM llmgw_schema")).trim(),
            String(PG_SCHEMA_VERSION),
          );
          assertEquals(
            (await pg.psql(`t${serial}`, "SELECT count(*) FROM llmgw_leader")).trim(),
            "1",
          );
        } finally {
          await a.close();
          await b.close();
        }
      });

      await t.step(
        "a database from a newer llmgw is refused, naming it without the password",
        async () => {
          const url = await pg.createDatabase(`t${++serial}`);
          await (await PostgresStore.open(url, { log: () => {} })).close();
          await pg.psql(`t${serial}`, "UPDATE llmgw_schema SET version = 99");
          const withPassword = url.replace("postgres@", "postgres:hunter2@");
          const e = await assertRejects(
            () => PostgresStore.open(withPassword, { log: () => {} }),
            StoreError,
          );
          assertStringIncludes(e.message, "schema version 99 is newer");
          assertOk(!e.message.includes("hunter2"), e.message);
          assertStringIncludes(e.message, "***");
        },
      );

      await t.step(
        "an unreachable database: a clear error once the open timeout passes",
        async () => {
          const e = await assertRejects(
            () =>
              PostgresStore.open("postgres://u:secret@127.0.0.1:1/db", {
                openTimeoutMs: 600,
                log: () => {},
              }),
            StoreError,
          );
          assertStringIncludes(e.message, "connection refused");
          assertOk(!e.message.includes("secret"), e.message);
        },
      );

      await t.step("writes without a term are refused and change nothing", async () => {
        const url = await pg.createDatabase(`t${++serial}`);
        const store = await PostgresStore.open(url, { log: () => {} });
        try {
          await assertRejects(() => store.putDeployment(storedDeployment("a")), NotLeaderError);
          assertEquals(await store.listDeployments(), []);
        } finally {
          await store.close();
        }
      });

      await t.step(
        "a deposed leader's writes are refused: the rows keep the new epoch",
        async () => {
          const url = await pg.createDatabase(`t${++serial}`);
          const db = `t${serial}`;
          const a = await PostgresStore.open(url, { log: () => {} });
          const b = await PostgresStore.open(url, { log: () => {} });
          try {
            const leaseA = new LeaderLease({
              store: a,
              holder: "a",
              address: "https://a",
              leaseMs: 300,
            });
            const leaseB = new LeaderLease({
              store: b,
              holder: "b",
              address: "https://b",
              leaseMs: 60_000,
            });
            const termA = (await leaseA.tryAcquire())!;
            a.setEpoch(termA.epoch, "a");
            assertEquals(await leaseB.tryAcquire(), null, "a running lease is not taken");
            await a.putDeployment(storedDeployment("llama"));
            // A stops renewing (frozen); once its lease expires by the database's clock, B takes over.
            const termB = await until("B takes the expired lease", () => leaseB.tryAcquire(), {
              timeoutMs: 5_000,
              intervalMs: 50,
            });
            assertEquals(termB.epoch, termA.epoch + 1);
            b.setEpoch(termB.epoch, "b");
            assertEquals((await leaseB.read()).address, "https://b");
            const changed = { ...storedDeployment("llama"), updated_at: 2 };
            await b.putDeployment(changed);
            // A wakes up and writes as if it still led: every kind of write is refused.
            await assertRejects(() => a.putDeployment(storedDeployment("llama")), NotLeaderError);
            await assertRejects(() => a.deleteDeployment("llama"), NotLeaderError);
            await assertRejects(() => a.putNode(storedNode("n1")), NotLeaderError);
            await assertRejects(
              () => a.addEvent({ at: 1, kind: "x", subject: "node/n1", message: "stale", uid: "" }),
              NotLeaderError,
            );
            assertEquals(await leaseA.renew(termA), null, "a lapsed term is not revived");
            assertEquals(await b.listDeployments(), [changed]);
            assertEquals(await b.listNodes(), []);
            assertEquals(await b.listEvents(), []);
            assertEquals(
              (await pg.psql(db, "SELECT name || ':' || epoch FROM deployments")).trim(),
              `llama:${termB.epoch}`,
            );
            // A clean shutdown hands over at once.
            await leaseB.release(termB);
            const termA2 = await leaseA.tryAcquire();
            assertEquals(termA2?.epoch, termB.epoch + 1);
          } finally {
            await a.close();
            await b.close();
          }
        },
      );

      await t.step("followers hear of changes by table and key, never the record", async () => {
        const { store: leader, url } = await leadingStore(pg);
        const follower = await PostgresStore.open(url, { log: () => {} });
        const heard: StoreChange[] = [];
        const stop = follower.listen((c) => heard.push(c));
        try {
          const before = await follower.changeSeq();
          // The listener connects in the background: write until it hears.
          await until("the follower hears a write", async () => {
            await leader.putDeployment(storedDeployment("llama"));
            return heard.length > 0;
          }, { timeoutMs: 5_000, intervalMs: 100 });
          assertEquals(heard[0], { table: "deployments", keys: ["llama"] });
          await leader.deleteDeployment("llama");
          await until(
            "the delete is heard",
            () => heard.length > 1 && heard.at(-1)?.keys?.[0] === "llama",
          );
          assertOk((await follower.changeSeq()) > before, "the change sequence moved");
        } finally {
          await stop();
          await follower.close();
          await leader.close();
        }
      });

      await t.step("after PostgreSQL restarts, queries and notifications resume", async () => {
        const { store, url } = await leadingStore(pg);
        const follower = await PostgresStore.open(url, { log: () => {} });
        const heard: StoreChange[] = [];
        const stop = follower.listen((c) => heard.push(c));
        try {
          await store.putDeployment(storedDeployment("before"));
          await pg.stopServer();
          await assertRejects(() => store.listDeployments(), StoreError);
          await pg.startServer();
          const listed = await until(
            "queries work again",
            () => store.listDeployments().catch(() => null),
            { timeoutMs: 10_000 },
          );
          assertEquals(listed.map((d) => d.name), ["before"]);
          // The listener reconnects and says anything may have changed.
          await until("the listener reconnects", () => heard.some((c) => c.table === "*"), {
            timeoutMs: 10_000,
          });
          await store.putDeployment(storedDeployment("after"));
          await until(
            "a write after the restart is heard",
            () => heard.some((c) => c.keys?.[0] === "after"),
            { timeoutMs: 5_000 },
          );
        } finally {
          await stop();
          await follower.close();
          await store.close();
        }
      });

      await t.step(
        "a listener that starts while PostgreSQL is down says, once it listens, that anything may have changed",
        async () => {
          const { store, url } = await leadingStore(pg);
          const follower = await PostgresStore.open(url, { log: () => {} });
          const heard: StoreChange[] = [];
          let stop = () => Promise.resolve();
          try {
            await pg.stopServer();
            // Its first attempts fail: writes made meanwhile (by a leader on a
            // database that came back first) would go unheard.
            stop = follower.listen((c) => heard.push(c));
            await pg.startServer();
            await until("the listener listens", () => heard.some((c) => c.table === "*"), {
              timeoutMs: 10_000,
            });
          } finally {
            await stop();
            await follower.close();
            await store.close();
          }
        },
      );

      await t.step("redactUrl hides passwords in the URL and its parameters", () => {
        assertEquals(
          redactUrl("postgres://llmgw:s3cret@db:5432/llmgw?sslmode=require&password=x"),
          "postgres://llmgw:***@db:5432/llmgw?sslmode=require&password=***",
        );
        assertEquals(redactUrl("postgres://db/llmgw"), "postgres://db/llmgw");
      });
    } finally {
      await pg.stop();
    }
  },
});

Deno.test({
  name: "PostgresStore over TLS: verify-full against the database's CA; another CA is refused",
  ignore: !available.ok,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const now = Date.now();
    const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
    const server = await ca.issueWithKey({
      commonName: "postgres",
      ipAddresses: ["127.0.0.1"],
      use: "server",
      now,
      lifetimeMs: 86_400_000,
    });
    const { ca: other } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
    const pg = await startPostgres({ tls: { certPem: server.cert, keyPem: server.key } });
    const dir = await Deno.makeTempDir({ prefix: "llmgw-pg-tls-" });
    try {
      const url = await pg.createDatabase("tls");
      await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
      await Deno.writeTextFile(`${dir}/other.crt`, other.certPem);
      const store = await PostgresStore.open(
        `${url}?sslmode=verify-full&sslrootcert=${dir}/ca.crt`,
        { log: () => {} },
      );
      try {
        const [row] = await store.query(
          "check TLS",
          "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        );
        assertEquals(row.ssl, true, "the session is encrypted");
      } finally {
        await store.close();
      }
      const e = await assertRejects(
        () =>
          PostgresStore.open(`${url}?sslmode=verify-full&sslrootcert=${dir}/other.crt`, {
            log: () => {},
            openTimeoutMs: 500,
          }),
        StoreError,
      );
      assertStringIncludes(e.message, "Cannot open store");
    } finally {
      await pg.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
