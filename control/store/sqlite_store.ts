/**
 * The embedded SQLite {@link ControlStore} (design §11): the control plane's
 * default store, nothing to install. It uses Deno's built-in `node:sqlite`
 * (no native add-on, no FFI), so `deno compile` keeps shipping one binary.
 *
 * The file is opened in WAL mode with `synchronous=NORMAL`: readers (a CLI
 * looking at events) never block the control plane's writes, and a commit
 * costs no fsync. A power cut (not a crash of llmgw) can lose the last
 * commits before the next WAL sync, never the file's consistency: SQLite's
 * documented trade for WAL + NORMAL, the one most servers make.
 *
 * The schema evolves by numbered migrations, recorded in SQLite's
 * `user_version`. A file from a newer llmgw, or a damaged one, is refused
 * with a {@link StoreError} before anything is written to it: a control
 * plane that ran on partial or misread state could stop engines that should
 * run (design §11: a restarted control plane resumes without restarting any
 * engine).
 *
 * Structured parts of a record (a deployment's spec, a placement, a node's
 * registration, …) are stored as JSON text; keys and scalars are columns.
 * Ordering matches {@link MemoryStore}: natural order by key, sorted here in
 * TypeScript because SQLite's collations do not sort `r2` before `r10`.
 *
 * @module
 */
import { MIGRATIONS, SCHEMA_VERSION } from "./sqlite_migrations.ts";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { openFailure, storeFailure } from "./store_errors.ts";
import {
  API_KEYS,
  columnValues,
  DEPLOYMENTS,
  eventFromRow,
  eventsQuery,
  MODEL_PULLS,
  NODES,
  parseRow,
  REPLICAS,
  type Row,
  sortByKey,
  sqliteUpsert,
  type Table,
  TOKENS,
} from "./tables.ts";
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventQuery,
  type EventRecord,
  MAX_EVENTS,
  type NodeSeen,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
  StoreError,
} from "./store.ts";
import type { ModelPull } from "../model_pull_record.ts";

export { SCHEMA_VERSION };

/** How long a statement waits for another process's write lock, by default. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

/** Options for {@link SqliteStore.open}. */
export interface SqliteStoreOptions {
  /** How long to wait for another connection's lock before failing (ms). */
  busyTimeoutMs?: number;
}

/** The SQLite store. Open it with {@link SqliteStore.open}. */
export class SqliteStore implements ControlStore {
  readonly #path: string;
  #db: DatabaseSync | null;
  readonly #statements = new Map<string, StatementSync>();

  private constructor(db: DatabaseSync, path: string) {
    this.#db = db;
    this.#path = path;
  }

  /**
   * Opens (creating when missing) the store at `path` and brings its schema
   * up to {@link SCHEMA_VERSION}.
   *
   * @throws {StoreError} when the file is not a database, is damaged, or was
   * written by a newer llmgw; the message names the file and the problem.
   */
  static open(path: string, options: SqliteStoreOptions = {}): SqliteStore {
    let db: DatabaseSync;
    try {
      db = new DatabaseSync(path);
    } catch (e) {
      throw openFailure(path, e);
    }
    try {
      // The busy timeout first, so that every later statement waits for a
      // control plane or CLI holding the lock instead of failing at once.
      const busy = Math.max(0, Math.trunc(options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS));
      db.exec(`PRAGMA busy_timeout = ${busy}`);
      // Checks before any write: a refused file is left exactly as it was.
      checkIntegrity(db, path);
      const version = userVersion(db);
      if (version > SCHEMA_VERSION) throw newerSchema(path, version);
      // WAL is persistent in the file; asking again is a no-op. A store that
      // cannot use WAL (":memory:") keeps what SQLite gives it.
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = NORMAL");
      // No foreign keys yet (see migration 1); on so later migrations can rely on them.
      db.exec("PRAGMA foreign_keys = ON");
      if (version < SCHEMA_VERSION) migrate(db, path);
      return new SqliteStore(db, path);
    } catch (e) {
      db.close();
      throw openFailure(path, e);
    }
  }

  /** The file this store lives in. */
  get path(): string {
    return this.#path;
  }

  /** Every deployment, by name. */
  listDeployments(): Promise<StoredDeployment[]> {
    return this.#list("list deployments", DEPLOYMENTS);
  }

  /** Creates or replaces a deployment. */
  putDeployment(d: StoredDeployment): Promise<void> {
    return this.#put("put deployment", DEPLOYMENTS, d);
  }

  /** Deletes a deployment; false when there was none. */
  deleteDeployment(name: string): Promise<boolean> {
    return this.#delete("deployments", "name", name);
  }

  /** Every replica, by id. */
  listReplicas(): Promise<StoredReplica[]> {
    return this.#list("list replicas", REPLICAS);
  }

  /** Creates or replaces a replica. */
  putReplica(r: StoredReplica): Promise<void> {
    return this.#put("put replica", REPLICAS, r);
  }

  /** Deletes a replica; false when there was none. */
  deleteReplica(id: string): Promise<boolean> {
    return this.#delete("replicas", "id", id);
  }

  /** Every node, by id. */
  listNodes(): Promise<StoredNode[]> {
    return this.#list("list nodes", NODES);
  }

  /** Creates or replaces a node. */
  putNode(n: StoredNode): Promise<void> {
    return this.#put("put node", NODES, n);
  }

  /** Sets nodes' last-seen times in one transaction; unknown ids are skipped. */
  recordNodesSeen(seen: readonly NodeSeen[]): Promise<void> {
    if (seen.length === 0) return Promise.resolve();
    return this.#do("record nodes seen", (db) =>
      transaction(db, () => {
        const update = this.#stmt("UPDATE nodes SET last_seen_at = ? WHERE id = ?");
        for (const n of seen) update.run(n.last_seen_at, n.id);
      }));
  }

  /** Deletes a node; false when there was none. */
  deleteNode(id: string): Promise<boolean> {
    return this.#delete("nodes", "id", id);
  }

  /**
   * Appends an event; returns it with its id. Keeps the newest
   * {@link MAX_EVENTS}, as MemoryStore does.
   */
  addEvent(e: Omit<EventRecord, "id">): Promise<EventRecord> {
    return this.#do("add event", (db) =>
      transaction(db, (): EventRecord => {
        const { lastInsertRowid } = this.#stmt(
          "INSERT INTO events (at, kind, subject, message, uid) VALUES (?, ?, ?, ?, ?)",
        ).run(e.at, e.kind, e.subject, e.message, e.uid);
        const id = Number(lastInsertRowid);
        // AUTOINCREMENT ids are dense (only pruning deletes, and only the
        // oldest), so "newest MAX_EVENTS" is "id > id - MAX_EVENTS": one
        // range delete on the primary key instead of counting rows.
        this.#stmt("DELETE FROM events WHERE id <= ?").run(id - MAX_EVENTS);
        return { id, at: e.at, kind: e.kind, subject: e.subject, message: e.message, uid: e.uid };
      }));
  }

  /** Events, oldest first: the newest `limit` (default 100) that match. */
  listEvents(q: EventQuery = {}): Promise<EventRecord[]> {
    return this.#do("list events", () => {
      const { sql, params } = eventsQuery(q, () => "?");
      const rows = this.#stmt(sql).all(...params) as Row[];
      return rows.reverse().map((row) => eventFromRow(row, this.#path));
    });
  }

  /** Every API key, by id. */
  listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.#list("list API keys", API_KEYS);
  }

  /** Creates or replaces an API key. */
  putApiKey(k: ApiKeyRecord): Promise<void> {
    return this.#put("put API key", API_KEYS, k);
  }

  /** Deletes an API key; false when there was none. */
  deleteApiKey(id: string): Promise<boolean> {
    return this.#delete("api_keys", "id", id);
  }

  /** Every access token, by id. */
  listTokens(): Promise<AccessTokenRecord[]> {
    return this.#list("list tokens", TOKENS);
  }

  /** Creates or replaces an access token. */
  putToken(t: AccessTokenRecord): Promise<void> {
    return this.#put("put token", TOKENS, t);
  }

  /** Deletes an access token; false when there was none. */
  deleteToken(id: string): Promise<boolean> {
    return this.#delete("tokens", "id", id);
  }

  /** Every model pull, by id. */
  listModelPulls(): Promise<ModelPull[]> {
    return this.#list("list model pulls", MODEL_PULLS);
  }

  /** Creates or replaces a model pull. */
  putModelPull(p: ModelPull): Promise<void> {
    return this.#put("put model pull", MODEL_PULLS, p);
  }

  /** Deletes a model pull; false when there was none. */
  deleteModelPull(id: string): Promise<boolean> {
    return this.#delete("model_pulls", "id", id);
  }

  /** Closes the database. Calling it again does nothing; any other call then fails. */
  close(): void {
    const db = this.#db;
    if (db === null) return;
    this.#db = null;
    this.#statements.clear();
    db.close();
  }

  /**
   * Runs `fn` against the open database and settles a promise with its
   * result: the interface is async (a PostgreSQL store will need it) while
   * node:sqlite is synchronous. Failures become {@link StoreError}s naming
   * the file, so nothing past the interface sees SQLite's errors (store.ts).
   */
  #do<T>(what: string, fn: (db: DatabaseSync) => T): Promise<T> {
    try {
      if (this.#db === null) throw new StoreError(`Store ${this.#path} is closed`);
      return Promise.resolve(fn(this.#db));
    } catch (e) {
      return Promise.reject(storeFailure(this.#path, what, e));
    }
  }

  /** A prepared statement, prepared once per store. */
  #stmt(sql: string): StatementSync {
    let stmt = this.#statements.get(sql);
    if (stmt === undefined) {
      stmt = this.#db!.prepare(sql);
      this.#statements.set(sql, stmt);
    }
    return stmt;
  }

  /** Every record of `table`, parsed by the one strict rule, in natural key order. */
  #list<R>(what: string, table: Table<R>): Promise<R[]> {
    return this.#do(what, () => {
      const rows = this.#stmt(`SELECT * FROM ${table.name}`).all() as Row[];
      return sortByKey(table, rows.map((row) => parseRow(table, row, this.#path)));
    });
  }

  /** Creates or replaces one record of `table`. */
  #put<R>(what: string, table: Table<R>, record: R): Promise<void> {
    return this.#do(what, () => {
      this.#stmt(sqliteUpsert(table)).run(...columnValues(table, record));
    });
  }

  /** Deletes the row with `key`; true when there was one. */
  #delete(table: string, column: string, key: string): Promise<boolean> {
    return this.#do(
      `delete from ${table}`,
      () => Number(this.#stmt(`DELETE FROM ${table} WHERE ${column} = ?`).run(key).changes) > 0,
    );
  }
}

/** The file's schema version (0 for a new file). */
function userVersion(db: DatabaseSync): number {
  const row = db.prepare("PRAGMA user_version").get() as Row | undefined;
  return Number(row?.user_version ?? 0);
}

/**
 * Refuses a damaged file. quick_check reads every page (it skips only the
 * index-versus-table cross-check of integrity_check), which takes
 * milliseconds for a control plane's few megabytes; corruption SQLite
 * notices while reading throws instead, and {@link openFailure} says so.
 */
function checkIntegrity(db: DatabaseSync, path: string): void {
  const rows = db.prepare("PRAGMA quick_check(5)").all() as Row[];
  // Each row may hold several lines, under a "*** in database main ***" heading.
  const problems = rows.flatMap((r) => String(Object.values(r)[0]).split("\n"))
    .map((line) => line.trim()).filter((line) => line && !line.startsWith("***"));
  if (problems.length === 1 && problems[0] === "ok") return;
  throw new StoreError(
    `Cannot open store ${path}: the database is damaged (${problems.join("; ")})`,
  );
}

/** The newer-schema refusal. */
function newerSchema(path: string, version: number): StoreError {
  return new StoreError(
    `Cannot open store ${path}: its schema version ${version} is newer than this llmgw ` +
      `(${SCHEMA_VERSION}); upgrade llmgw or use another store`,
  );
}

/**
 * Applies the pending migrations in one write transaction, so a crash or a
 * failing migration leaves the file at its old version, and a second
 * control plane opening the same file at the same time waits and then finds
 * nothing left to do.
 */
function migrate(db: DatabaseSync, path: string): void {
  transaction(db, () => {
    // Read again under the write lock: another process may have migrated.
    const current = userVersion(db);
    if (current > SCHEMA_VERSION) throw newerSchema(path, current);
    for (let v = current; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]);
    // user_version lives in the file header, which the transaction covers.
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
  });
}

/** Runs `fn` in a write transaction; rolls back when it throws. */
function transaction<T>(db: DatabaseSync, fn: () => T): T {
  // IMMEDIATE takes the write lock up front, so the busy timeout applies
  // here rather than failing with SQLITE_BUSY at the first write.
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (e) {
    try {
      db.exec("ROLLBACK");
    } catch {
      // SQLite already rolled back (e.g. on SQLITE_FULL); the first error is the one to report.
    }
    throw e;
  }
}
