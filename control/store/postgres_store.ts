/**
 * The PostgreSQL {@link ControlStore} (design §11, issue #15): the store for
 * a highly available control plane, several instances on one database.
 *
 * - **Client.** npm `pg`: a killed session is an ordinary error here (the
 *   `postgres` package crashes the process on one). One pool per store;
 *   connections are made again on demand after a failure, and every query
 *   is bounded in time, so an unreachable database gives errors, not hangs.
 * - **Fenced writes.** Every write is one statement that first takes the
 *   lease row `FOR SHARE` and checks that it still names this instance's
 *   epoch with an expiry in the database's future. A takeover (an UPDATE of
 *   that row) therefore waits for writes in flight, and a deposed leader's
 *   later writes change nothing: they fail with {@link NotLeaderError}. Each
 *   row records the epoch that wrote it.
 * - **Changes.** The same statement of every record write (events are read
 *   from the store directly, so they send none) sends `NOTIFY llmgw_changes` with the
 *   table and the keys only (PostgreSQL refuses payloads of 8,000 bytes or
 *   more) and takes a number from `llmgw_change_seq`, which followers poll.
 * - **Secrets.** The URL's password appears in no message: errors name the
 *   store by {@link redactUrl}.
 *
 * Ordering matches {@link MemoryStore}: natural order by key, sorted here.
 *
 * @module
 */
import pg from "pg";
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
  CHANGE_CHANNEL,
  ChangeListener,
  type ChangeTable,
  payload,
  type StoreChange,
} from "./postgres_changes.ts";
import { describe, transient } from "./postgres_errors.ts";
import { MIGRATION_LOCK_KEY, PG_MIGRATIONS, PG_SCHEMA_VERSION } from "./postgres_migrations.ts";
import {
  type AccessTokenKind,
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventQuery,
  type EventRecord,
  type NodeIntent,
  type NodeSeen,
  NotLeaderError,
  type ReplicaPhase,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
  StoreError,
} from "./store.ts";

export { NotLeaderError };

/** Options for {@link PostgresStore.open}. */
export interface PostgresStoreOptions {
  /** Connections in the pool. Default 10. */
  poolSize?: number;
  /** How long opening keeps retrying an unreachable database (ms). Default 60,000. */
  openTimeoutMs?: number;
  /** The bound on one query, including waiting for a connection (ms). Default 10,000. */
  queryTimeoutMs?: number;
  /** Where warnings go (one line each, no secret). Default: stderr. */
  log?: (line: string) => void;
  /** `application_name` of the sessions, shown in `pg_stat_activity`. */
  applicationName?: string;
}

/** A URL's password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    for (const k of [...u.searchParams.keys()]) {
      if (/pass/i.test(k)) u.searchParams.set(k, "***");
    }
    return u.toString();
  } catch {
    return "(a store URL that does not parse)";
  }
}

/** Whether `store` names a PostgreSQL database rather than a directory. */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//i.test(store);
}

// Intl.Collator with the same locale and options is what localeCompare uses.
const collator = new Intl.Collator("en", { numeric: true });
const byKey = <T>(key: (t: T) => string) => (a: T, b: T) => collator.compare(key(a), key(b));

type Row = Record<string, unknown>;

/** int8 (oid 20) as a JS number: every BIGINT here is a time in ms, an id or an epoch. */
const types = {
  getTypeParser:
    ((oid: number, format?: string) =>
      oid === 20
        ? (v: string) => Number(v)
        : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

/** The PostgreSQL store. Open it with {@link PostgresStore.open}. */
export class PostgresStore implements ControlStore {
  readonly #pool: pg.Pool;
  readonly #url: string;
  readonly #name: string;
  readonly #log: (line: string) => void;
  #epoch: number | null = null;
  #holder = "";
  #closed = false;
  #listener: ChangeListener | null = null;

  private constructor(pool: pg.Pool, url: string, log: (line: string) => void) {
    this.#pool = pool;
    this.#url = url;
    this.#name = redactUrl(url);
    this.#log = log;
  }

  /**
   * Connects (retrying an unreachable database with backoff up to
   * `openTimeoutMs`) and brings the schema up to {@link PG_SCHEMA_VERSION}.
   *
   * @throws {StoreError} When the database stays unreachable, refuses the
   *   credentials, or has a newer schema; the message names the store
   *   without its password.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    if (!isPostgresUrl(url)) {
      throw new StoreError(`Cannot open store ${redactUrl(url)}: not a postgres:// URL`);
    }
    const log = options.log ?? ((line) => console.error(line));
    const queryTimeout = options.queryTimeoutMs ?? 10_000;
    const pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: Math.min(queryTimeout, 5_000),
      query_timeout: queryTimeout,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      application_name: options.applicationName ?? "llmgw-control",
      types,
    });
    const store = new PostgresStore(pool, url, log);
    // An idle connection dying (the server restarted) is reported here;
    // without a listener the pool would throw it out of the event loop.
    pool.on("error", (e) => log(`store ${store.#name}: idle connection lost: ${describe(e)}`));
    const deadline = Date.now() + (options.openTimeoutMs ?? 60_000);
    let delay = 250;
    for (;;) {
      try {
        await store.#migrate();
        return store;
      } catch (e) {
        if (e instanceof StoreError || !transient(e) || Date.now() + delay > deadline) {
          await pool.end().catch(() => {});
          throw e instanceof StoreError
            ? e
            : new StoreError(`Cannot open store ${store.#name}: ${describe(e)}`);
        }
        log(`store ${store.#name}: ${describe(e)}; retrying in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  /** The store's URL with its password hidden. */
  get name(): string {
    return this.#name;
  }

  /** The leadership term writes are made under; null: none (every write is refused). */
  get epoch(): number | null {
    return this.#epoch;
  }

  /** Sets the term writes are made under (the lease sets it on taking over, clears it on losing). */
  setEpoch(epoch: number | null, holder = ""): void {
    this.#epoch = epoch;
    this.#holder = holder;
  }

  /**
   * One query on the pool, for the lease and the checks beside the store.
   * Failures are {@link StoreError}s naming `what`.
   */
  async query(what: string, sql: string, values: unknown[] = []): Promise<Row[]> {
    if (this.#closed) throw new StoreError(`Store ${this.#name} is closed`);
    try {
      return (await this.#pool.query(sql, values)).rows as Row[];
    } catch (e) {
      throw this.#error(what, e);
    }
  }

  /** The change sequence's current value: it moves with every write. */
  async changeSeq(): Promise<number> {
    const [row] = await this.query(
      "read the change sequence",
      "SELECT last_value, is_called FROM llmgw_change_seq",
    );
    return row.is_called ? Number(row.last_value) : 0;
  }

  /**
   * Calls `fn` with each change notification, over a connection of its own
   * that is made again with backoff when lost (then `fn` gets `table: "*"`,
   * since notifications sent meanwhile are gone). Returns a stop function.
   */
  listen(fn: (change: StoreChange) => void): () => Promise<void> {
    this.#listener?.stop();
    const listener = new ChangeListener(this.#url, this.#name, fn, this.#log);
    this.#listener = listener;
    listener.start();
    return () => listener.stop();
  }

  listDeployments(): Promise<StoredDeployment[]> {
    return this.#list("deployments", "list deployments", (row) => ({
      name: row.name as string,
      spec: this.#json(row, "deployments", row.name, "spec"),
      created_at: row.created_at as number,
      updated_at: row.updated_at as number,
      revision: row.revision as number,
      history: this.#json(row, "deployments", row.name, "history"),
      rollout: this.#json(row, "deployments", row.name, "rollout", true),
      uid: row.uid as string,
    }), (d) => d.name);
  }

  putDeployment(d: StoredDeployment): Promise<void> {
    return this.#put(
      "put deployment",
      "deployments",
      d.name,
      `INSERT INTO deployments (name, spec, created_at, updated_at, revision, history, rollout,
         uid, epoch, seq)
       SELECT $3, $4, $5, $6, $7, $8, $9, $10, fence.epoch, note.seq FROM fence, note
       ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, created_at = excluded.created_at,
         updated_at = excluded.updated_at, revision = excluded.revision,
         history = excluded.history, rollout = excluded.rollout, uid = excluded.uid,
         epoch = excluded.epoch, seq = excluded.seq`,
      deploymentColumns(d),
    );
  }

  deleteDeployment(name: string): Promise<boolean> {
    return this.#delete("deployments", "name", name);
  }

  listReplicas(): Promise<StoredReplica[]> {
    return this.#list("replicas", "list replicas", (row) => ({
      id: row.id as string,
      deployment: row.deployment as string,
      index: row.replica_index as number,
      phase: row.phase as ReplicaPhase,
      placement: this.#json(row, "replicas", row.id, "placement", true),
      explanation: this.#json(row, "replicas", row.id, "explanation", true),
      failure: this.#json(row, "replicas", row.id, "failure", true),
      revision: row.revision as number,
      uid: row.uid as string,
      created_at: row.created_at as number,
      updated_at: row.updated_at as number,
    }), (r) => r.id);
  }

  putReplica(r: StoredReplica): Promise<void> {
    return this.#put(
      "put replica",
      "replicas",
      r.id,
      `INSERT INTO replicas (id, deployment, replica_index, phase, placement, explanation, failure,
         created_at, updated_at, revision, uid, epoch, seq)
       SELECT $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, fence.epoch, note.seq FROM fence, note
       ON CONFLICT (id) DO UPDATE SET deployment = excluded.deployment,
         replica_index = excluded.replica_index, phase = excluded.phase,
         placement = excluded.placement, explanation = excluded.explanation,
         failure = excluded.failure, created_at = excluded.created_at,
         updated_at = excluded.updated_at, revision = excluded.revision, uid = excluded.uid,
         epoch = excluded.epoch, seq = excluded.seq`,
      replicaColumns(r),
    );
  }

  deleteReplica(id: string): Promise<boolean> {
    return this.#delete("replicas", "id", id);
  }

  listNodes(): Promise<StoredNode[]> {
    return this.#list("nodes", "list nodes", (row) => ({
      id: row.id as string,
      registration: this.#json(row, "nodes", row.id, "registration"),
      token_hash: row.token_hash as string,
      intent: row.intent as NodeIntent,
      label_overrides: this.#json(row, "nodes", row.id, "label_overrides"),
      fabric_overrides: this.#json(row, "nodes", row.id, "fabric_overrides"),
      generation: row.generation as number,
      updated_at: row.updated_at as number,
      last_seen_at: (row.last_seen_at ?? null) as number | null,
    }), (n) => n.id);
  }

  putNode(n: StoredNode): Promise<void> {
    return this.#put(
      "put node",
      "nodes",
      n.id,
      `INSERT INTO nodes (id, registration, token_hash, intent, label_overrides, fabric_overrides,
         generation, updated_at, last_seen_at, epoch, seq)
       SELECT $3, $4, $5, $6, $7, $8, $9, $10, $11, fence.epoch, note.seq FROM fence, note
       ON CONFLICT (id) DO UPDATE SET registration = excluded.registration,
         token_hash = excluded.token_hash, intent = excluded.intent,
         label_overrides = excluded.label_overrides, fabric_overrides = excluded.fabric_overrides,
         generation = excluded.generation, updated_at = excluded.updated_at,
         last_seen_at = excluded.last_seen_at, epoch = excluded.epoch, seq = excluded.seq`,
      nodeColumns(n),
    );
  }

  /**
   * Sets nodes' last-seen times in one fenced statement. The change sequence
   * does not move: a follower reloading its whole state for a last-seen
   * time would cost more than the time is worth (it reads it at its next
   * reload, or on taking over).
   */
  async recordNodesSeen(seen: readonly NodeSeen[]): Promise<void> {
    if (seen.length === 0) return;
    await this.#fenced(
      "record nodes seen",
      `WITH fence AS (${FENCE}),
       w AS (UPDATE nodes SET last_seen_at = s.at, epoch = fence.epoch
             FROM fence, unnest($2::text[], $3::bigint[]) AS s(id, at)
             WHERE nodes.id = s.id RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`,
      [seen.map((n) => n.id), seen.map((n) => n.last_seen_at)],
    );
  }

  deleteNode(id: string): Promise<boolean> {
    return this.#delete("nodes", "id", id);
  }

  /** Appends an event and keeps the newest {@link MAX_EVENTS}, as MemoryStore does. */
  async addEvent(e: Omit<EventRecord, "id">): Promise<EventRecord> {
    const [row] = await this.#fenced(
      "add event",
      `WITH fence AS (${FENCE}),
       w AS (INSERT INTO events (at, kind, subject, message, uid, epoch)
             SELECT $2, $3, $4, $5, $6, epoch FROM fence RETURNING id),
       prune AS (DELETE FROM events WHERE id <= (SELECT id FROM w) - ${MAX_EVENTS} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT id FROM w) AS id,
         (SELECT count(*) FROM prune)::int AS pruned`,
      [e.at, e.kind, e.subject, e.message, e.uid],
    );
    return {
      id: row.id as number,
      at: e.at,
      kind: e.kind,
      subject: e.subject,
      message: e.message,
      uid: e.uid,
    };
  }

  /** Appends events in order in one statement, keeping the newest {@link MAX_EVENTS}. */
  async addEvents(events: readonly Omit<EventRecord, "id">[]): Promise<void> {
    if (events.length === 0) return;
    await this.#fenced(
      "add events",
      `WITH fence AS (${FENCE}),
       w AS (INSERT INTO events (at, kind, subject, message, uid, epoch)
             SELECT e.at, e.kind, e.subject, e.message, e.uid, fence.epoch
             FROM fence, unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
               WITH ORDINALITY AS e(at, kind, subject, message, uid, n)
             ORDER BY e.n RETURNING id),
       prune AS (DELETE FROM events WHERE id <= (SELECT max(id) FROM w) - ${MAX_EVENTS} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n,
         (SELECT count(*) FROM prune)::int AS pruned`,
      [
        events.map((e) => e.at),
        events.map((e) => e.kind),
        events.map((e) => e.subject),
        events.map((e) => e.message),
        events.map((e) => e.uid),
      ],
    );
  }

  async listEvents(q: EventQuery = {}): Promise<EventRecord[]> {
    const where: string[] = [];
    const params: (number | string)[] = [];
    if (q.after !== undefined) {
      params.push(q.after);
      where.push(`id > $${params.length}`);
    }
    if (q.subject !== undefined) {
      params.push(q.subject);
      where.push(`subject = $${params.length}`);
    }
    if (q.uid !== undefined) {
      params.push(q.uid);
      where.push(`uid = $${params.length}`);
    }
    params.push(Math.max(0, Math.trunc(q.limit ?? 100)));
    const rows = await this.query(
      "list events",
      `SELECT id, at, kind, subject, message, uid FROM events
       ${
        where.length ? `WHERE ${where.join(" AND ")}` : ""
      } ORDER BY id DESC LIMIT $${params.length}`,
      params,
    );
    return rows.reverse().map(eventFromRow);
  }

  listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.#list("api_keys", "list API keys", (row) => ({
      id: row.id as string,
      name: row.name as string,
      hash: row.hash as string,
      models: this.#json(row, "api_keys", row.id, "models", true),
      created_at: row.created_at as number,
    }), (k) => k.id);
  }

  putApiKey(k: ApiKeyRecord): Promise<void> {
    return this.#put(
      "put API key",
      "api_keys",
      k.id,
      `INSERT INTO api_keys (id, name, hash, models, created_at, epoch, seq)
       SELECT $3, $4, $5, $6, $7, fence.epoch, note.seq FROM fence, note
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, hash = excluded.hash,
         models = excluded.models, created_at = excluded.created_at,
         epoch = excluded.epoch, seq = excluded.seq`,
      apiKeyColumns(k),
    );
  }

  deleteApiKey(id: string): Promise<boolean> {
    return this.#delete("api_keys", "id", id);
  }

  listTokens(): Promise<AccessTokenRecord[]> {
    return this.#list("tokens", "list tokens", (row) => ({
      id: row.id as string,
      kind: row.kind as AccessTokenKind,
      hash: row.hash as string,
      description: row.description as string,
      created_at: row.created_at as number,
      expires_at: (row.expires_at as number | null) ?? null,
    }), (t) => t.id);
  }

  putToken(t: AccessTokenRecord): Promise<void> {
    return this.#put(
      "put token",
      "tokens",
      t.id,
      `INSERT INTO tokens (id, kind, hash, description, created_at, expires_at, epoch, seq)
       SELECT $3, $4, $5, $6, $7, $8, fence.epoch, note.seq FROM fence, note
       ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, hash = excluded.hash,
         description = excluded.description, created_at = excluded.created_at,
         expires_at = excluded.expires_at, epoch = excluded.epoch, seq = excluded.seq`,
      tokenColumns(t),
    );
  }

  deleteToken(id: string): Promise<boolean> {
    return this.#delete("tokens", "id", id);
  }

  /** Ends the pool and the change listener. Calling it again does nothing. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#listener?.stop();
    await this.#pool.end().catch(() => {});
  }

  /** Applies the pending migrations in one transaction under the migration lock. */
  async #migrate(): Promise<void> {
    const client = await this.#pool.connect();
    try {
      await client.query("BEGIN");
      try {
        await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
        await client.query("CREATE TABLE IF NOT EXISTS llmgw_schema (version INTEGER NOT NULL)");
        const { rows } = await client.query("SELECT version FROM llmgw_schema");
        const current = rows.length === 0 ? 0 : Number(rows[0].version);
        if (current > PG_SCHEMA_VERSION) {
          throw new StoreError(
            `Cannot open store ${this.#name}: its schema version ${current} is newer than this ` +
              `llmgw (${PG_SCHEMA_VERSION}); upgrade llmgw or use another database`,
          );
        }
        for (let v = current; v < PG_SCHEMA_VERSION; v++) await client.query(PG_MIGRATIONS[v]);
        if (rows.length === 0) {
          await client.query("INSERT INTO llmgw_schema (version) VALUES ($1)", [PG_SCHEMA_VERSION]);
        } else if (current < PG_SCHEMA_VERSION) {
          await client.query("UPDATE llmgw_schema SET version = $1", [PG_SCHEMA_VERSION]);
        }
        await client.query("COMMIT");
      } catch (e) {
        await client.query("ROLLBACK").catch(() => {});
        throw e;
      }
    } finally {
      client.release();
    }
  }

  /** Every row of `table`, parsed and in natural key order. */
  async #list<T>(
    table: string,
    what: string,
    parse: (row: Row) => T,
    key: (t: T) => string,
  ): Promise<T[]> {
    const rows = await this.query(what, `SELECT * FROM ${table}`);
    return rows.map(parse).sort(byKey(key));
  }

  /** A fenced upsert of one record; `insert` reads $3… and the `fence` and `note` CTEs. */
  async #put(
    what: string,
    table: ChangeTable,
    key: string,
    insert: string,
    values: unknown[],
  ): Promise<void> {
    await this.#fenced(
      what,
      `WITH fence AS (${FENCE}),
       note AS (SELECT pg_notify('${CHANGE_CHANNEL}', $2), nextval('llmgw_change_seq') AS seq
                FROM fence),
       w AS (${insert} RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`,
      [payload(table, key), ...values],
      // $1 is the epoch (added by #fenced), so the record's values start at $3.
    );
  }

  /** A fenced delete of the row with `key`; true when there was one. */
  async #delete(table: ChangeTable, column: string, key: string): Promise<boolean> {
    const [row] = await this.#fenced(
      `delete from ${table}`,
      `WITH fence AS (${FENCE}),
       note AS (SELECT pg_notify('${CHANGE_CHANNEL}', $2), nextval('llmgw_change_seq') AS seq
                FROM fence),
       w AS (DELETE FROM ${table} WHERE ${column} = $3 AND EXISTS (SELECT 1 FROM note) RETURNING 1)
       SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM w)::int AS n`,
      [payload(table, key), key],
    );
    return (row.n as number) > 0;
  }

  /**
   * Runs a statement whose `fence` CTE reads the term from $1; refuses with
   * {@link NotLeaderError} when this instance holds no term, or the fence
   * found the term ended (nothing was written then).
   */
  async #fenced(what: string, sql: string, values: unknown[]): Promise<Row[]> {
    const epoch = this.#epoch;
    if (epoch === null) {
      throw new NotLeaderError(
        `Store ${this.#name}: ${what} refused: this control plane is not the leader`,
      );
    }
    const rows = await this.query(what, sql, [`${epoch}/${this.#holder}`, ...values]);
    if ((rows[0]?.fenced as number) !== 1) {
      throw new NotLeaderError(
        `Store ${this.#name}: ${what} refused: the leadership of epoch ${epoch} has ended`,
      );
    }
    return rows;
  }

  /** Parses a JSON column; a column that does not parse fails the whole read. */
  #json<T>(row: Row, table: string, key: unknown, column: string, nullable = false): T {
    const text = row[column];
    if (text === null && nullable) return null as T;
    const where = `Store ${this.#name}: table ${table}, row ${
      JSON.stringify(key)
    }: column ${column}`;
    if (typeof text !== "string") throw new StoreError(`${where} is not JSON text`);
    try {
      const value = JSON.parse(text);
      if (typeof value !== "object" || value === null) throw new Error("not an object or array");
      return value as T;
    } catch (e) {
      throw new StoreError(`${where} is not valid JSON (${(e as Error).message}); damaged?`);
    }
  }

  #error(what: string, e: unknown): StoreError {
    if (e instanceof StoreError) return e;
    const err = new StoreError(`Store ${this.#name}: ${what} failed: ${describe(e)}`);
    err.cause = e;
    return err;
  }
}

/**
 * The fence: the lease row, locked against a takeover, if it still names this
 * term and holder ($1 is `epoch/holder`: an epoch alone could repeat if a
 * database failover lost the commit of a takeover).
 */
const FENCE = `SELECT epoch FROM llmgw_leader
   WHERE id = 1 AND epoch::text || '/' || holder = $1 AND expires_at > now() FOR SHARE`;
