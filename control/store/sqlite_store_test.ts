/**
 * SqliteStore against the store contract, plus what only a file has:
 * surviving a restart, WAL, schema versions and refusing damaged files
 * (design §11, §15).
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import {
  assertEquals,
  assertOk,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "../../tests/assert.ts";
import { SCHEMA_VERSION, SqliteStore } from "./sqlite_store.ts";
import { MIGRATIONS } from "./sqlite_migrations.ts";
import { StoreError } from "./store.ts";
import { storeContract } from "../../tests/store_contract.ts";
import {
  apiKey,
  event,
  storedDeployment,
  storedNode,
  storedReplica,
} from "../../tests/store_records.ts";

/** A fresh directory for one test's database, removed by `cleanup`. */
async function tempDir(): Promise<{ dir: string; path: string; cleanup: () => Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-store-" });
  return {
    dir,
    path: join(dir, "llmgw.db"),
    cleanup: () => Deno.remove(dir, { recursive: true }),
  };
}

storeContract("SqliteStore", async () => {
  const tmp = await tempDir();
  const store = SqliteStore.open(tmp.path);
  return {
    store,
    cleanup: async () => {
      store.close();
      await tmp.cleanup();
    },
  };
});

/** Runs `fn` with a temp database path; removes it afterwards. */
async function withPath(fn: (path: string) => Promise<void>): Promise<void> {
  const tmp = await tempDir();
  try {
    await fn(tmp.path);
  } finally {
    await tmp.cleanup();
  }
}

/** A store at `path` holding one record of each type and three events. */
async function populate(path: string): Promise<void> {
  const store = SqliteStore.open(path);
  try {
    await store.putDeployment(storedDeployment("llama"));
    await store.putReplica(storedReplica("llama-r1"));
    await store.putReplica(storedReplica("llama-r2", "llama", false));
    await store.putNode(storedNode("node-1"));
    await store.putApiKey(apiKey("k1"));
    await store.putApiKey(apiKey("k2", null));
    for (let i = 0; i < 3; i++) await store.addEvent(event(`replica/llama-r${i}`, i));
  } finally {
    store.close();
  }
}

/** Runs raw SQL on the file, as a damaged disk or another tool might. */
function raw(path: string, fn: (db: DatabaseSync) => void): void {
  const db = new DatabaseSync(path);
  try {
    fn(db);
  } finally {
    db.close();
  }
}

Deno.test("SqliteStore: data survives close and reopen", async () => {
  await withPath(async (path) => {
    await populate(path);
    const store = SqliteStore.open(path);
    try {
      assertEquals(await store.listDeployments(), [storedDeployment("llama")]);
      assertEquals(await store.listReplicas(), [
        storedReplica("llama-r1"),
        storedReplica("llama-r2", "llama", false),
      ]);
      assertEquals(await store.listNodes(), [storedNode("node-1")]);
      assertEquals(await store.listApiKeys(), [apiKey("k1"), apiKey("k2", null)]);
      const events = await store.listEvents();
      assertEquals(events.map((e) => e.subject), [
        "replica/llama-r0",
        "replica/llama-r1",
        "replica/llama-r2",
      ]);
      // AUTOINCREMENT: ids keep increasing across restarts.
      const next = await store.addEvent(event("node/node-1"));
      assertEquals(next.id, events[2].id + 1);
    } finally {
      store.close();
    }
  });
});

Deno.test("SqliteStore: a second store on the same file sees the first one's writes", async () => {
  await withPath(async (path) => {
    const a = SqliteStore.open(path);
    const b = SqliteStore.open(path);
    try {
      await a.putNode(storedNode("node-1"));
      assertEquals(await b.listNodes(), [storedNode("node-1")]);
      assertEquals(await b.deleteNode("node-1"), true);
      assertEquals(await a.listNodes(), []);
    } finally {
      a.close();
      b.close();
    }
  });
});

Deno.test("SqliteStore: the file is in WAL mode, at the current schema version", async () => {
  await withPath((path) => {
    SqliteStore.open(path).close();
    raw(path, (db) => {
      assertEquals(db.prepare("PRAGMA journal_mode").get()?.journal_mode, "wal");
      assertEquals(db.prepare("PRAGMA user_version").get()?.user_version, SCHEMA_VERSION);
      const tables = db.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      ).all().map((r) => r.name);
      assertEquals(tables, [
        "api_keys",
        "deployments",
        "events",
        "model_pulls",
        "nodes",
        "replicas",
        "tokens",
      ]);
    });
    return Promise.resolve();
  });
});

Deno.test("SqliteStore: opening again migrates nothing and loses nothing", async () => {
  await withPath(async (path) => {
    await populate(path);
    const schema = () => {
      let sql: unknown[] = [];
      raw(path, (db) => sql = db.prepare("SELECT sql FROM sqlite_master ORDER BY name").all());
      return sql;
    };
    const before = schema();
    for (let i = 0; i < 2; i++) SqliteStore.open(path).close();
    assertEquals(schema(), before);
    const store = SqliteStore.open(path);
    try {
      assertEquals((await store.listReplicas()).length, 2);
    } finally {
      store.close();
    }
  });
});

Deno.test("SqliteStore: a newer schema version is refused, the file untouched", async () => {
  await withPath(async (path) => {
    await populate(path);
    raw(path, (db) => db.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 6}`));
    const before = await Deno.readFile(path);
    assertThrows(
      () => SqliteStore.open(path),
      StoreError,
      `Cannot open store ${path}: its schema version ${SCHEMA_VERSION + 6} is newer than ` +
        `this llmgw (${SCHEMA_VERSION}); upgrade llmgw or use another store`,
    );
    assertEquals(await Deno.readFile(path), before);
  });
});

Deno.test("SqliteStore: a file of random bytes is refused", async () => {
  await withPath(async (path) => {
    const bytes = crypto.getRandomValues(new Uint8Array(16_384));
    await Deno.writeFile(path, bytes);
    assertThrows(
      () => SqliteStore.open(path),
      StoreError,
      `Cannot open store ${path}: file is not a database (damaged?)`,
    );
    assertEquals(await Deno.readFile(path), bytes);
  });
});

Deno.test("SqliteStore: a text file is refused", async () => {
  await withPath(async (path) => {
    await Deno.writeTextFile(path, "deployments:\n  - name: llama\n".repeat(200));
    assertThrows(() => SqliteStore.open(path), StoreError, "file is not a database");
  });
});

Deno.test("SqliteStore: a truncated database is refused", async () => {
  await withPath(async (path) => {
    await populate(path);
    // Enough rows that the tables span many pages, then cut the file short.
    const store = SqliteStore.open(path);
    for (let i = 0; i < 300; i++) await store.putNode(storedNode(`node-${i}`));
    store.close();
    const size = (await Deno.stat(path)).size;
    await Deno.truncate(path, Math.floor(size / 2));
    const err = assertThrows(() => SqliteStore.open(path), StoreError, `Cannot open store ${path}`);
    assertStringIncludes(err.message, "damaged");
  });
});

Deno.test("SqliteStore: a database with overwritten pages is refused", async () => {
  await withPath(async (path) => {
    await populate(path);
    const store = SqliteStore.open(path);
    for (let i = 0; i < 300; i++) await store.putNode(storedNode(`node-${i}`));
    store.close();
    const size = (await Deno.stat(path)).size;
    const file = await Deno.open(path, { write: true });
    try {
      // Garbage over pages 3 to 6 (4 KiB pages), past the header and schema.
      await file.seek(3 * 4096, Deno.SeekMode.Start);
      await file.write(new Uint8Array(Math.min(4 * 4096, size - 3 * 4096)).fill(0xa5));
    } finally {
      file.close();
    }
    assertThrows(() => SqliteStore.open(path), StoreError, "damaged");
  });
});

Deno.test("SqliteStore: a missing directory is a StoreError naming the file", () => {
  const path = "/nonexistent-llmgw-dir/sub/llmgw.db";
  assertThrows(() => SqliteStore.open(path), StoreError, `Cannot open store ${path}`);
});

/** A JSON column to damage, and the list call that must then fail. */
const DAMAGE: {
  table: string;
  key: string;
  column: string;
  list: (s: SqliteStore) => Promise<unknown>;
}[] = [
  { table: "deployments", key: "llama", column: "spec", list: (s) => s.listDeployments() },
  { table: "replicas", key: "llama-r1", column: "placement", list: (s) => s.listReplicas() },
  { table: "replicas", key: "llama-r1", column: "explanation", list: (s) => s.listReplicas() },
  { table: "nodes", key: "node-1", column: "registration", list: (s) => s.listNodes() },
  { table: "nodes", key: "node-1", column: "label_overrides", list: (s) => s.listNodes() },
  { table: "api_keys", key: "k1", column: "models", list: (s) => s.listApiKeys() },
];

for (const { table, key, column, list } of DAMAGE) {
  Deno.test(`SqliteStore: invalid JSON in ${table}.${column} fails the list, naming the row`, async () => {
    await withPath(async (path) => {
      await populate(path);
      const keyColumn = table === "deployments" ? "name" : "id";
      raw(
        path,
        (db) =>
          db.prepare(`UPDATE ${table} SET ${column} = ? WHERE ${keyColumn} = ?`).run(
            '{"trunc',
            key,
          ),
      );
      const store = SqliteStore.open(path);
      try {
        const err = await assertRejects(() => list(store), StoreError, `table ${table}`);
        assertStringIncludes(err.message, `row "${key}"`);
        assertStringIncludes(err.message, `column ${column}`);
        assertStringIncludes(err.message, path);
        // The other tables still read.
        assertEquals((await store.listEvents()).length, 3);
      } finally {
        store.close();
      }
    });
  });
}

Deno.test("SqliteStore: JSON of the wrong kind fails the list", async () => {
  await withPath(async (path) => {
    await populate(path);
    raw(path, (db) => db.exec(`UPDATE api_keys SET models = '{"a": 1}' WHERE id = 'k1'`));
    const store = SqliteStore.open(path);
    try {
      await assertRejects(() => store.listApiKeys(), StoreError, "not an array");
    } finally {
      store.close();
    }
  });
});

Deno.test("SqliteStore: a closed store rejects calls; close twice is harmless", async () => {
  await withPath(async (path) => {
    const store = SqliteStore.open(path);
    store.close();
    store.close();
    await assertRejects(() => store.listNodes(), StoreError, "is closed");
  });
});

Deno.test("SqliteStore: a file from before identities upgrades; its records and events read uid ''", async () => {
  await withPath(async (path) => {
    // The file as the llmgw before identities left it: every migration before the one adding uid.
    const before = MIGRATIONS.findIndex((m) => m.includes("ADD COLUMN uid"));
    assertOk(before > 0);
    raw(path, (db) => {
      for (const m of MIGRATIONS.slice(0, before)) db.exec(m);
      db.exec(`PRAGMA user_version = ${before}`);
      db.prepare("INSERT INTO deployments (name, spec, created_at, updated_at) VALUES (?, ?, 1, 1)")
        .run("llama", JSON.stringify(storedDeployment("llama").spec));
      db.prepare("INSERT INTO events (at, kind, subject, message) VALUES (1, ?, ?, ?)")
        .run("deployment_created", "deployment/llama", "2 replicas");
    });
    const store = SqliteStore.open(path);
    try {
      assertEquals((await store.listDeployments()).map((d) => d.uid), [""]);
      const [old] = await store.listEvents();
      assertEquals([old.subject, old.uid], ["deployment/llama", ""]);
      // The deployment from before and its events from before still go together.
      assertEquals(await store.listEvents({ subject: "deployment/llama", uid: "" }), [old]);
      await store.addEvent(event("deployment/llama", 2, "u-new"));
      assertEquals((await store.listEvents({ uid: "u-new" })).map((e) => e.at), [2]);
    } finally {
      store.close();
    }
  });
});
