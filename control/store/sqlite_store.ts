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
import { MAX_EVENTS } from "./memory_store.ts";
import {
  apiKeyColumns,
  deploymentColumns,
  eventFromRow,
  nodeColumns,
  replicaColumns,
  tokenColumns,
} from "./store_columns.ts";
import {
  type AccessTokenKind,
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type DeploymentRevision,
  type EventQuery,
  type EventRecord,
  type NodeIntent,
  type NodeSeen,
  type ReplicaFailure,
  type ReplicaPhase,
  type RolloutRecord,
  type StoredDeployment,
  type StoredNode,
  type StoredPlacement,
  type StoredReplica,
  StoreError,
} from "./store.ts";
import type { Deployment } from "../../deployment/schema.ts";
import type { Explanation } from "../../placement/types.ts";
import type { RegisterRequest } from "../../protocol/agent_protocol.ts";

export { SCHEMA_VERSION };

/** How long a statement waits for another process's write lock, by default. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

/** Options for {@link SqliteStore.open}. */
export interface SqliteStoreOptions {
  /** How long to wait for another connection's lock before failing (ms). */
  busyTimeoutMs?: number;
}

// Intl.Collator with the same locale and options is what localeCompare uses
// (ECMA-402), so this is MemoryStore's order, without a collator per compare.
const collator = new Intl.Collator("en", { numeric: true });
const byKey = <T>(key: (t: T) => string) => (a: T, b: T) => collator.compare(key(a), key(b));

/** SQLite's primary result codes that mean the file itself is bad. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/** A row as node:sqlite returns it. */
type Row = Record<string, unknown>;

/** What a JSON column must hold. */
type JsonShape = "object" | "array";

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
      throw openError(path, e);
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
      throw openError(path, e);
    }
  }

  /** The file this store lives in. */
  get path(): string {
    return this.#path;
  }

  /** Every deployment, by name. */
  listDeployments(): Promise<StoredDeployment[]> {
    return this.#do(
      "list deployments",
      () =>
        this.#all("SELECT * FROM deployments").map((row): StoredDeployment => {
          const name = row.name as string;
          return {
            name,
            spec: this.#json<Deployment>(row, "deployments", name, "spec", "object"),
            created_at: row.created_at as number,
            updated_at: row.updated_at as number,
            revision: row.revision as number,
            history: this.#json<DeploymentRevision[]>(row, "deployments", name, "history", "array"),
            rollout: this.#json<RolloutRecord | null>(
              row,
              "deployments",
              name,
              "rollout",
              "object",
              true,
            ),
            uid: row.uid as string,
          };
        }).sort(byKey((d) => d.name)),
    );
  }

  /** Creates or replaces a deployment. */
  putDeployment(d: StoredDeployment): Promise<void> {
    return this.#do("put deployment", () => {
      this.#stmt(
        `INSERT INTO deployments (name, spec, created_at, updated_at, revision, history, rollout,
           uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,
           created_at = excluded.created_at, updated_at = excluded.updated_at,
           revision = excluded.revision, history = excluded.history, rollout = excluded.rollout,
           uid = excluded.uid`,
      ).run(...deploymentColumns(d));
    });
  }

  /** Deletes a deployment; false when there was none. */
  deleteDeployment(name: string): Promise<boolean> {
    return this.#delete("deployments", "name", name);
  }

  /** Every replica, by id. */
  listReplicas(): Promise<StoredReplica[]> {
    return this.#do(
      "list replicas",
      () =>
        this.#all("SELECT * FROM replicas").map((row): StoredReplica => {
          const id = row.id as string;
          return {
            id,
            deployment: row.deployment as string,
            index: row.replica_index as number,
            phase: row.phase as ReplicaPhase,
            placement: this.#json<StoredPlacement | null>(
              row,
              "replicas",
              id,
              "placement",
              "object",
              true,
            ),
            explanation: this.#json<Explanation | null>(
              row,
              "replicas",
              id,
              "explanation",
              "object",
              true,
            ),
            failure: this.#json<ReplicaFailure | null>(
              row,
              "replicas",
              id,
              "failure",
              "object",
              true,
            ),
            revision: row.revision as number,
            uid: row.uid as string,
            created_at: row.created_at as number,
            updated_at: row.updated_at as number,
          };
        }).sort(byKey((r) => r.id)),
    );
  }

  /** Creates or replaces a replica. */
  putReplica(r: StoredReplica): Promise<void> {
    return this.#do("put replica", () => {
      this.#stmt(
        `INSERT INTO replicas (id, deployment, replica_index, phase, placement, explanation,
           failure, created_at, updated_at, revision, uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET deployment = excluded.deployment,
           replica_index = excluded.replica_index, phase = excluded.phase,
           placement = excluded.placement, explanation = excluded.explanation,
           failure = excluded.failure, created_at = excluded.created_at,
           updated_at = excluded.updated_at, revision = excluded.revision, uid = excluded.uid`,
      ).run(...replicaColumns(r));
    });
  }

  /** Deletes a replica; false when there was none. */
  deleteReplica(id: string): Promise<boolean> {
    return this.#delete("replicas", "id", id);
  }

  /** Every node, by id. */
  listNodes(): Promise<StoredNode[]> {
    return this.#do("list nodes", () =>
      this.#all("SELECT * FROM nodes").map((row): StoredNode => {
        const id = row.id as string;
        return {
          id,
          registration: this.#json<RegisterRequest>(row, "nodes", id, "registration", "object"),
          token_hash: row.token_hash as string,
          intent: row.intent as NodeIntent,
          label_overrides: this.#json<Record<string, string>>(
            row,
            "nodes",
            id,
            "label_overrides",
            "object",
          ),
          fabric_overrides: this.#json<Record<string, string | null>>(
            row,
            "nodes",
            id,
            "fabric_overrides",
            "object",
          ),
          generation: row.generation as number,
          updated_at: row.updated_at as number,
          last_seen_at: (row.last_seen_at ?? null) as number | null,
        };
      }).sort(byKey((n) => n.id)));
  }

  /** Creates or replaces a node. */
  putNode(n: StoredNode): Promise<void> {
    return this.#do("put node", () => {
      this.#stmt(
        `INSERT INTO nodes (id, registration, token_hash, intent, label_overrides, fabric_overrides,
           generation, updated_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET registration = excluded.registration,
           token_hash = excluded.token_hash, intent = excluded.intent,
           label_overrides = excluded.label_overrides, fabric_overrides = excluded.fabric_overrides,
           generation = excluded.generation, updated_at = excluded.updated_at,
           last_seen_at = excluded.last_seen_at`,
      ).run(...nodeColumns(n));
    });
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
      const where: string[] = [];
      const params: (number | string)[] = [];
      if (q.after !== undefined) {
        where.push("id > ?");
        params.push(q.after);
      }
      if (q.subject !== undefined) {
        where.push("subject = ?");
        params.push(q.subject);
      }
      if (q.uid !== undefined) {
        where.push("uid = ?");
        params.push(q.uid);
      }
      // "At most this many" (store.ts): a limit of 0 or less gives none.
      params.push(Math.max(0, Math.trunc(q.limit ?? 100)));
      const rows = this.#stmt(
        `SELECT id, at, kind, subject, message, uid FROM events
         ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT ?`,
      ).all(...params) as Row[];
      return rows.reverse().map(eventFromRow);
    });
  }

  /** Every API key, by id. */
  listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.#do(
      "list API keys",
      () =>
        this.#all("SELECT * FROM api_keys").map((row): ApiKeyRecord => {
          const id = row.id as string;
          return {
            id,
            name: row.name as string,
            hash: row.hash as string,
            models: this.#json<string[] | null>(row, "api_keys", id, "models", "array", true),
            created_at: row.created_at as number,
          };
        }).sort(byKey((k) => k.id)),
    );
  }

  /** Creates or replaces an API key. */
  putApiKey(k: ApiKeyRecord): Promise<void> {
    return this.#do("put API key", () => {
      this.#stmt(
        `INSERT INTO api_keys (id, name, hash, models, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, hash = excluded.hash,
           models = excluded.models, created_at = excluded.created_at`,
      ).run(...apiKeyColumns(k));
    });
  }

  /** Deletes an API key; false when there was none. */
  deleteApiKey(id: string): Promise<boolean> {
    return this.#delete("api_keys", "id", id);
  }

  /** Every access token, by id. */
  listTokens(): Promise<AccessTokenRecord[]> {
    return this.#do(
      "list tokens",
      () =>
        this.#all("SELECT * FROM tokens").map((row): AccessTokenRecord => ({
          id: row.id as string,
          kind: row.kind as AccessTokenKind,
          hash: row.hash as string,
          description: row.description as string,
          created_at: row.created_at as number,
          expires_at: (row.expires_at as number | null) ?? null,
        })).sort(byKey((t) => t.id)),
    );
  }

  /** Creates or replaces an access token. */
  putToken(t: AccessTokenRecord): Promise<void> {
    return this.#do("put token", () => {
      this.#stmt(
        `INSERT INTO tokens (id, kind, hash, description, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, hash = excluded.hash,
           description = excluded.description, created_at = excluded.created_at,
           expires_at = excluded.expires_at`,
      ).run(...tokenColumns(t));
    });
  }

  /** Deletes an access token; false when there was none. */
  deleteToken(id: string): Promise<boolean> {
    return this.#delete("tokens", "id", id);
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
      return Promise.reject(operationError(this.#path, what, e));
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

  /** Every row of a query without parameters. */
  #all(sql: string): Row[] {
    return this.#stmt(sql).all() as Row[];
  }

  /** Deletes the row with `key`; true when there was one. */
  #delete(table: string, column: string, key: string): Promise<boolean> {
    return this.#do(
      `delete from ${table}`,
      () => Number(this.#stmt(`DELETE FROM ${table} WHERE ${column} = ?`).run(key).changes) > 0,
    );
  }

  /**
   * Parses a JSON column. A column that does not parse, or holds the wrong
   * kind of value, fails the whole read: a list with a record missing would
   * look to the reconciler like a deleted deployment or a vanished node.
   */
  #json<T>(
    row: Row,
    table: string,
    key: string,
    column: string,
    shape: JsonShape,
    nullable = false,
  ): T {
    const text = row[column];
    if (text === null && nullable) return null as T;
    const where = `Store ${this.#path}: table ${table}, row ${
      JSON.stringify(key)
    }: column ${column}`;
    if (typeof text !== "string") throw new StoreError(`${where} is not JSON text`);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new StoreError(`${where} is not valid JSON (${(e as Error).message}); damaged?`);
    }
    const ok = shape === "array"
      ? Array.isArray(value)
      : typeof value === "object" && value !== null && !Array.isArray(value);
    if (!ok) throw new StoreError(`${where} holds JSON that is not an ${shape}; damaged?`);
    return value as T;
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
 * notices while reading throws instead, and {@link openError} says so.
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

/** SQLite's primary result code of a node:sqlite error, if any. */
function sqliteCode(e: unknown): number | undefined {
  const code = (e as { errcode?: unknown } | null)?.errcode;
  return typeof code === "number" ? code & 0xff : undefined;
}

/** What a SQLite error says about the file, in words. */
function describe(e: unknown): string {
  switch (sqliteCode(e)) {
    case SQLITE_NOTADB:
      return "file is not a database (damaged?)";
    case SQLITE_CORRUPT:
      return `the database is damaged (${(e as Error).message})`;
    default:
      return e instanceof Error ? e.message : String(e);
  }
}

/** Any failure while opening, as a StoreError naming the file. */
function openError(path: string, e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = new StoreError(`Cannot open store ${path}: ${describe(e)}`);
  err.cause = e;
  return err;
}

/** Any failure of an operation on an open store, as a StoreError naming the file. */
function operationError(path: string, what: string, e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = new StoreError(`Store ${path}: ${what} failed: ${describe(e)}`);
  err.cause = e;
  return err;
}
