import { DatabaseSync } from "node:sqlite";
import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/assert.ts";
import { storedDeployment } from "../../tests/store_records.ts";
import { MIGRATIONS } from "./sqlite_migrations.ts";
import { StoreError } from "./store.ts";
import {
  API_KEYS,
  byKey,
  columnNames,
  columnValues,
  DEPLOYMENTS,
  eventFromRow,
  eventsQuery,
  NODES,
  parseRow,
  postgresUpsert,
  REPLICAS,
  type Row,
  sqliteUpsert,
  TABLES,
  TOKENS,
} from "./tables.ts";

/** The row a SQL store holds for these column values, as its driver returns it. */
function rowOf(names: string[], values: unknown[]): Row {
  return Object.fromEntries(names.map((n, i) => [n, values[i]]));
}

Deno.test("each declared table has the migrated SQLite file's columns", () => {
  const db = new DatabaseSync(":memory:");
  try {
    for (const m of MIGRATIONS) db.exec(m);
    for (const table of TABLES) {
      const info = db.prepare(`PRAGMA table_info(${table.name})`).all() as Row[];
      assertEquals(info.map((c) => c.name).sort(), columnNames(table).sort(), table.name);
    }
    const events = db.prepare("PRAGMA table_info(events)").all() as Row[];
    assertEquals(events.map((c) => c.name).sort(), [
      "at",
      "id",
      "kind",
      "message",
      "subject",
      "uid",
    ]);
  } finally {
    db.close();
  }
});

Deno.test("a record round-trips through its column values and row", () => {
  const d = storedDeployment("llama");
  const row = rowOf(columnNames(DEPLOYMENTS), columnValues(DEPLOYMENTS, d));
  assertEquals(parseRow(DEPLOYMENTS, row, "s"), d);
});

Deno.test("a record from before a column is written with the column's default", () => {
  const { revision: _r, history: _h, rollout: _o, uid: _u, ...old } = storedDeployment("llama");
  const values = columnValues(DEPLOYMENTS, old);
  const row = rowOf(columnNames(DEPLOYMENTS), values);
  assertEquals([row.revision, row.history, row.rollout, row.uid], [1, "[]", null, ""]);
  const node = {
    id: "n1",
    registration: {},
    token_hash: "h",
    intent: "active",
    label_overrides: {},
    generation: 1,
    updated_at: 2,
  };
  const nodeRow = rowOf(columnNames(NODES), columnValues(NODES, node as never));
  assertEquals([nodeRow.fabric_overrides, nodeRow.last_seen_at], ["{}", null]);
});

Deno.test("a replica's index is stored as replica_index", () => {
  const names = columnNames(REPLICAS);
  assertEquals(names.includes("replica_index") && !names.includes("index"), true);
});

Deno.test("one strict rule for JSON columns, whichever the store", () => {
  const good = rowOf(columnNames(DEPLOYMENTS), columnValues(DEPLOYMENTS, storedDeployment("a")));
  const cases: [string, unknown, string][] = [
    ["history", "{}", "holds JSON that is not an array; damaged?"],
    ["spec", "[1]", "holds JSON that is not an object; damaged?"],
    ["spec", "null", "holds JSON that is not an object; damaged?"],
    ["spec", "{", "is not valid JSON"],
    ["spec", null, "is not JSON text"],
    ["rollout", "[]", "holds JSON that is not an object; damaged?"],
    ["revision", "1", "is not a number; damaged?"],
    ["uid", 7, "is not text; damaged?"],
  ];
  for (const [column, value, message] of cases) {
    const e = assertThrows(
      () => parseRow(DEPLOYMENTS, { ...good, [column]: value }, "/var/lib/llmgw.db"),
      StoreError,
    );
    assertStringIncludes(e.message, message);
    assertStringIncludes(
      e.message,
      `Store /var/lib/llmgw.db: table deployments, row "a": column ${column}`,
    );
  }
  // A nullable JSON column may be NULL; a list column may be empty.
  const key = { id: "k", name: "n", hash: "h", models: null, created_at: 1 };
  assertEquals(parseRow(API_KEYS, key, "s"), key);
  assertEquals(parseRow(DEPLOYMENTS, { ...good, rollout: null }, "s").rollout, null);
});

Deno.test("an event row is checked like a record's", () => {
  const row = { id: 3, at: 1, kind: "k", subject: "s", message: "m", uid: "" };
  assertEquals(eventFromRow(row, "s"), row);
  assertThrows(
    () => eventFromRow({ ...row, uid: null }, "s"),
    StoreError,
    "column uid is not text",
  );
});

Deno.test("both dialects' upserts list the declared columns and update all but the key", () => {
  const names = columnNames(TOKENS).join(", ");
  const sqlite = sqliteUpsert(TOKENS);
  assertStringIncludes(sqlite, `INSERT INTO tokens (${names}) VALUES (?, ?, ?, ?, ?, ?)`);
  assertStringIncludes(sqlite, "ON CONFLICT (id) DO UPDATE SET kind = excluded.kind");
  assertEquals(sqlite.includes("id = excluded.id"), false);
  const pg = postgresUpsert(TOKENS, 3);
  assertStringIncludes(pg, `INSERT INTO tokens (${names}, epoch, seq)`);
  assertStringIncludes(pg, "SELECT $3, $4, $5, $6, $7, $8, fence.epoch, note.seq FROM fence, note");
  assertStringIncludes(pg, "expires_at = excluded.expires_at, epoch = excluded.epoch");
});

Deno.test("the events query numbers its parameters per dialect", () => {
  const q = { after: 5, subject: "node/n1", uid: "u", limit: 10 };
  const pg = eventsQuery(q, (n) => `$${n}`);
  assertStringIncludes(pg.sql, "WHERE id > $1 AND subject = $2 AND uid = $3");
  assertStringIncludes(pg.sql, "ORDER BY id DESC LIMIT $4");
  assertEquals(pg.params, [5, "node/n1", "u", 10]);
  const sqlite = eventsQuery({ limit: -3 }, () => "?");
  assertEquals(sqlite.sql.includes("WHERE"), false);
  assertEquals(sqlite.params, [0]);
  assertEquals(eventsQuery({}, () => "?").params, [100]);
});

Deno.test("records sort in natural key order", () => {
  const ids = ["r10", "r2", "r1"].map((id) => ({ id }));
  assertEquals(ids.sort(byKey((r) => r.id)).map((r) => r.id), ["r1", "r2", "r10"]);
});
