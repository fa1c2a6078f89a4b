/**
 * The SQL stores' tables, each declared once (design §11): name, key, and
 * typed columns with the JSON shape each structured column must hold. Both
 * dialects derive from these declarations their row parsing, the values and
 * column lists of their upserts, and their event queries, so SQLite and
 * PostgreSQL cannot read or write a field differently. The migrations
 * (sqlite_migrations.ts, postgres_migrations.ts) create the same columns;
 * `tables_test.ts` (SQLite) and `postgres_store_test.ts` check that each
 * declared table matches the migrated one.
 *
 * One strict rule for stored JSON: a column that does not parse, or holds the
 * wrong kind of value (an object where a list belongs), fails the whole read.
 * A list with a record missing would look to the reconciler like a deleted
 * deployment or a vanished node, so llmgw refuses to run on it.
 *
 * @module
 */
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type EventQuery,
  type EventRecord,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
  StoreError,
} from "./store.ts";
import { compareNatural } from "../../inventory/natural_order.ts";
import type { ModelPull } from "../model_pull_record.ts";

/** How a column is stored: a scalar, or a structured part as JSON text; `?`: NULL allowed. */
export type ColumnType = "text" | "text?" | "int" | "int?" | "json" | "json?";

/** What a JSON column must hold. */
export type JsonShape = "object" | "array";

/** One column of a table. */
export interface Column<R> {
  /** The SQL column. */
  name: string;
  /** The record's field, when it is named differently from the column. */
  field?: keyof R & string;
  /** How it is stored. */
  type: ColumnType;
  /** For JSON columns: the kind of value it must hold. */
  shape?: JsonShape;
  /** Written when the record lacks the field (a record from before the column existed). */
  missing?: unknown;
}

/** The record tables' names. */
export type TableName =
  | "deployments"
  | "replicas"
  | "nodes"
  | "api_keys"
  | "tokens"
  | "model_pulls";

/** A table of records `R`, keyed by the text column `key` (also the record's field). */
export interface Table<R> {
  /** The SQL table. */
  name: TableName;
  /** The primary key column. */
  key: keyof R & string;
  /** Every column, in the order the values are written. */
  columns: readonly Column<R>[];
}

/** A column value as both SQL drivers take it. */
export type ColumnValue = string | number | null;

/** A row as the SQL drivers return it. */
export type Row = Record<string, unknown>;

/** `deployments`: one row per deployment. */
export const DEPLOYMENTS: Table<StoredDeployment> = {
  name: "deployments",
  key: "name",
  columns: [
    { name: "name", type: "text" },
    { name: "spec", type: "json", shape: "object" },
    { name: "created_at", type: "int" },
    { name: "updated_at", type: "int" },
    { name: "revision", type: "int", missing: 1 },
    { name: "history", type: "json", shape: "array", missing: [] },
    { name: "rollout", type: "json?", shape: "object", missing: null },
    { name: "uid", type: "text", missing: "" },
    { name: "model_commit", type: "text?", missing: null },
  ],
};

/** `replicas`: one row per replica. */
export const REPLICAS: Table<StoredReplica> = {
  name: "replicas",
  key: "id",
  columns: [
    { name: "id", type: "text" },
    { name: "deployment", type: "text" },
    { name: "replica_index", field: "index", type: "int" },
    { name: "phase", type: "text" },
    { name: "placement", type: "json?", shape: "object" },
    { name: "explanation", type: "json?", shape: "object" },
    { name: "failure", type: "json?", shape: "object", missing: null },
    { name: "created_at", type: "int" },
    { name: "updated_at", type: "int" },
    { name: "revision", type: "int", missing: 1 },
    { name: "uid", type: "text", missing: "" },
  ],
};

/** `nodes`: one row per registered node. */
export const NODES: Table<StoredNode> = {
  name: "nodes",
  key: "id",
  columns: [
    { name: "id", type: "text" },
    { name: "registration", type: "json", shape: "object" },
    { name: "token_hash", type: "text" },
    { name: "intent", type: "text" },
    { name: "label_overrides", type: "json", shape: "object" },
    { name: "fabric_overrides", type: "json", shape: "object", missing: {} },
    { name: "generation", type: "int" },
    { name: "updated_at", type: "int" },
    { name: "last_seen_at", type: "int?", missing: null },
  ],
};

/** `api_keys`: one row per gateway API key (hashed). */
export const API_KEYS: Table<ApiKeyRecord> = {
  name: "api_keys",
  key: "id",
  columns: [
    { name: "id", type: "text" },
    { name: "name", type: "text" },
    { name: "hash", type: "text" },
    { name: "models", type: "json?", shape: "array" },
    { name: "created_at", type: "int" },
  ],
};

/** `tokens`: one row per access token (hashed). */
export const TOKENS: Table<AccessTokenRecord> = {
  name: "tokens",
  key: "id",
  columns: [
    { name: "id", type: "text" },
    { name: "kind", type: "text" },
    { name: "hash", type: "text" },
    { name: "description", type: "text" },
    { name: "created_at", type: "int" },
    { name: "expires_at", type: "int?", missing: null },
  ],
};

/** `model_pulls`: one row per model revision pulled onto nodes (`repo@commit`). */
export const MODEL_PULLS: Table<ModelPull> = {
  name: "model_pulls",
  key: "id",
  columns: [
    { name: "id", type: "text" },
    { name: "model", type: "text" },
    // COMMIT is a keyword of both dialects.
    { name: "model_commit", field: "commit", type: "text" },
    { name: "nodes", type: "json", shape: "array" },
    { name: "created_at", type: "int" },
    { name: "updated_at", type: "int" },
    { name: "finished_at", type: "int?", missing: null },
  ],
};

/** Any of the record tables. */
export type AnyTable =
  | Table<StoredDeployment>
  | Table<StoredReplica>
  | Table<StoredNode>
  | Table<ApiKeyRecord>
  | Table<AccessTokenRecord>
  | Table<ModelPull>;

/** Every record table. */
export const TABLES: readonly AnyTable[] = [
  DEPLOYMENTS,
  REPLICAS,
  NODES,
  API_KEYS,
  TOKENS,
  MODEL_PULLS,
];

/**
 * The event columns both stores select; events are appended and pruned by
 * each dialect's own statement (ids come from the database).
 */
export const EVENT_COLUMNS = ["id", "at", "kind", "subject", "message", "uid"] as const;

/** A record's column values, in the table's column order. */
export function columnValues<R>(table: Table<R>, record: R): ColumnValue[] {
  return table.columns.map((c) => {
    const raw = (record as Record<string, unknown>)[c.field ?? c.name];
    const value = raw === undefined ? c.missing ?? null : raw;
    switch (c.type) {
      case "json":
        return JSON.stringify(value);
      case "json?":
        return value === null ? null : JSON.stringify(value);
      default:
        return value as ColumnValue;
    }
  });
}

/**
 * A record from its row, by the one strict rule: every column holds its
 * type, JSON parses and has its shape. `store` names the store in the error.
 *
 * @throws {StoreError} naming the store, table, row and column.
 */
export function parseRow<R>(table: Table<R>, row: Row, store: string): R {
  const record: Record<string, unknown> = {};
  const where = (column: string) =>
    `Store ${store}: table ${table.name}, row ${JSON.stringify(row[table.key])}: column ${column}`;
  for (const c of table.columns) {
    record[c.field ?? c.name] = parseValue(c.type, c.shape, row[c.name], () => where(c.name));
  }
  return record as R;
}

/** An event from its row. */
export function eventFromRow(row: Row, store: string): EventRecord {
  const record: Record<string, unknown> = {};
  for (const name of EVENT_COLUMNS) {
    const type = name === "id" || name === "at" ? "int" : "text";
    record[name] = parseValue(
      type,
      undefined,
      row[name],
      () => `Store ${store}: table events, row ${JSON.stringify(row.id)}: column ${name}`,
    );
  }
  return record as unknown as EventRecord;
}

/** One column's value, checked against its type. */
function parseValue(
  type: ColumnType,
  shape: JsonShape | undefined,
  value: unknown,
  where: () => string,
): unknown {
  if (value === null && type.endsWith("?")) return null;
  switch (type) {
    case "text":
    case "text?":
      if (typeof value !== "string") throw new StoreError(`${where()} is not text; damaged?`);
      return value;
    case "int":
    case "int?":
      if (typeof value !== "number") throw new StoreError(`${where()} is not a number; damaged?`);
      return value;
    default:
      return parseJson(value, shape ?? "object", where);
  }
}

/** A JSON column's value, refused unless it parses to `shape`. */
function parseJson(text: unknown, shape: JsonShape, where: () => string): unknown {
  if (typeof text !== "string") throw new StoreError(`${where()} is not JSON text`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new StoreError(`${where()} is not valid JSON (${(e as Error).message}); damaged?`);
  }
  const ok = shape === "array"
    ? Array.isArray(value)
    : typeof value === "object" && value !== null && !Array.isArray(value);
  if (!ok) throw new StoreError(`${where()} holds JSON that is not an ${shape}; damaged?`);
  return value;
}

/** The column names of a table, in order. */
export function columnNames(table: { columns: readonly { name: string }[] }): string[] {
  return table.columns.map((c) => c.name);
}

/** `SET c = excluded.c, …` for every column but the key, and `extra`. */
function updateSet<R>(table: Table<R>, extra: readonly string[] = []): string {
  return [...columnNames(table).filter((c) => c !== table.key), ...extra]
    .map((c) => `${c} = excluded.${c}`).join(", ");
}

/** SQLite's upsert of one record; its values are {@link columnValues}, as `?`. */
export function sqliteUpsert<R>(table: Table<R>): string {
  const names = columnNames(table);
  return `INSERT INTO ${table.name} (${names.join(", ")}) VALUES (${
    names.map(() => "?").join(", ")
  })
    ON CONFLICT (${table.key}) DO UPDATE SET ${updateSet(table)}`;
}

/**
 * PostgreSQL's upsert of one record, to run inside the store's fenced
 * statement: the values are {@link columnValues} from `$first` on, and the
 * `fence` and `note` CTEs give each row the writer's epoch and a change number.
 */
export function postgresUpsert<R>(table: Table<R>, first: number): string {
  const names = columnNames(table);
  const params = names.map((_, i) => `$${first + i}`);
  return `INSERT INTO ${table.name} (${[...names, "epoch", "seq"].join(", ")})
    SELECT ${params.join(", ")}, fence.epoch, note.seq FROM fence, note
    ON CONFLICT (${table.key}) DO UPDATE SET ${updateSet(table, ["epoch", "seq"])}`;
}

/**
 * The newest `limit` (default 100) events matching `q`, newest first (the
 * caller reverses them): the SQL and its parameters, with placeholders as
 * `param(n)` writes the n-th (1-based).
 */
export function eventsQuery(
  q: EventQuery,
  param: (n: number) => string,
): { sql: string; params: (number | string)[] } {
  const where: string[] = [];
  const params: (number | string)[] = [];
  const add = (condition: string, value: number | string) => {
    params.push(value);
    where.push(`${condition} ${param(params.length)}`);
  };
  if (q.after !== undefined) add("id >", q.after);
  if (q.subject !== undefined) add("subject =", q.subject);
  if (q.uid !== undefined) add("uid =", q.uid);
  // "At most this many" (store.ts): a limit of 0 or less gives none.
  params.push(Math.max(0, Math.trunc(q.limit ?? 100)));
  const filter = where.length ? `WHERE ${where.join(" AND ")}` : "";
  return {
    sql: `SELECT ${EVENT_COLUMNS.join(", ")} FROM events ${filter} ORDER BY id DESC LIMIT ${
      param(params.length)
    }`,
    params,
  };
}

/** Records sorted in every store's order: natural order of their keys (`r2` before `r10`). */
export function sortByKey<R>(table: Table<R>, records: R[]): R[] {
  return records.sort((a, b) => compareNatural(String(a[table.key]), String(b[table.key])));
}

/** Records sorted by natural order of `key`, as {@link sortByKey}, for stores without rows. */
export function byKey<T>(key: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => compareNatural(key(a), key(b));
}
