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
  type Table,
  TOKENS,
} from "./tables.ts";
import { ChangeListener, type ChangeTable, payload, type StoreChange } from "./postgres_changes.ts";
import { transient } from "./postgres_errors.ts";
import { describeStoreError as describe, openFailure, storeFailure } from "./store_errors.ts";
import {
  ADD_EVENT,
  ADD_EVENTS,
  fencedDelete,
  fencedUpsert,
  RECORD_SEEN,
} from "./postgres_fenced_sql.ts";
import { migrate } from "./postgres_migrations.ts";
import { isPostgresUrl, redactUrl } from "./postgres_url.ts";
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventQuery,
  type EventRecord,
  type NodeSeen,
  NotLeaderError,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
  StoreError,
} from "./store.ts";
import { type Clock, systemClock } from "../../time/clock.ts";
import type { ModelPull } from "../model_pull_record.ts";

export { isPostgresUrl, NotLeaderError, redactUrl };

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
  /** Times `openTimeoutMs`. Default: the system clock. */
  clock?: Clock;
}

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
    const clock = options.clock ?? systemClock;
    const deadline = clock.now() + (options.openTimeoutMs ?? 60_000);
    let delay = 250;
    for (;;) {
      try {
        await migrate(pool, store.#name);
        return store;
      } catch (e) {
        if (e instanceof StoreError || !transient(e) || clock.now() + delay > deadline) {
          await pool.end().catch(() => {});
          throw openFailure(store.#name, e);
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
    return this.#list("list deployments", DEPLOYMENTS);
  }

  putDeployment(d: StoredDeployment): Promise<void> {
    return this.#put("put deployment", DEPLOYMENTS, d);
  }

  deleteDeployment(name: string): Promise<boolean> {
    return this.#delete("deployments", "name", name);
  }

  listReplicas(): Promise<StoredReplica[]> {
    return this.#list("list replicas", REPLICAS);
  }

  putReplica(r: StoredReplica): Promise<void> {
    return this.#put("put replica", REPLICAS, r);
  }

  deleteReplica(id: string): Promise<boolean> {
    return this.#delete("replicas", "id", id);
  }

  listNodes(): Promise<StoredNode[]> {
    return this.#list("list nodes", NODES);
  }

  putNode(n: StoredNode): Promise<void> {
    return this.#put("put node", NODES, n);
  }

  /** Sets nodes' last-seen times in one fenced statement (the change sequence does not move). */
  async recordNodesSeen(seen: readonly NodeSeen[]): Promise<void> {
    if (seen.length === 0) return;
    await this.#fenced(
      "record nodes seen",
      RECORD_SEEN,
      [seen.map((n) => n.id), seen.map((n) => n.last_seen_at)],
    );
  }

  deleteNode(id: string): Promise<boolean> {
    return this.#delete("nodes", "id", id);
  }

  /** Appends an event and keeps the newest MAX_EVENTS, as MemoryStore does. */
  async addEvent(e: Omit<EventRecord, "id">): Promise<EventRecord> {
    const [row] = await this.#fenced(
      "add event",
      ADD_EVENT,
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

  /** Appends events in order in one statement, keeping the newest MAX_EVENTS. */
  async addEvents(events: readonly Omit<EventRecord, "id">[]): Promise<void> {
    if (events.length === 0) return;
    await this.#fenced(
      "add events",
      ADD_EVENTS,
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
    const { sql, params } = eventsQuery(q, (n) => `$${n}`);
    const rows = await this.query("list events", sql, params);
    return rows.reverse().map((row) => eventFromRow(row, this.#name));
  }

  listApiKeys(): Promise<ApiKeyRecord[]> {
    return this.#list("list API keys", API_KEYS);
  }

  putApiKey(k: ApiKeyRecord): Promise<void> {
    return this.#put("put API key", API_KEYS, k);
  }

  deleteApiKey(id: string): Promise<boolean> {
    return this.#delete("api_keys", "id", id);
  }

  listTokens(): Promise<AccessTokenRecord[]> {
    return this.#list("list tokens", TOKENS);
  }

  putToken(t: AccessTokenRecord): Promise<void> {
    return this.#put("put token", TOKENS, t);
  }

  deleteToken(id: string): Promise<boolean> {
    return this.#delete("tokens", "id", id);
  }

  listModelPulls(): Promise<ModelPull[]> {
    return this.#list("list model pulls", MODEL_PULLS);
  }

  putModelPull(p: ModelPull): Promise<void> {
    return this.#put("put model pull", MODEL_PULLS, p);
  }

  deleteModelPull(id: string): Promise<boolean> {
    return this.#delete("model_pulls", "id", id);
  }

  /** Ends the pool and the change listener. Calling it again does nothing. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#listener?.stop();
    await this.#pool.end().catch(() => {});
  }

  /** Every record of `table`, parsed by the one strict rule, in natural key order. */
  async #list<R>(what: string, table: Table<R>): Promise<R[]> {
    const rows = await this.query(what, `SELECT * FROM ${table.name}`);
    return sortByKey(table, rows.map((row) => parseRow(table, row, this.#name)));
  }

  /** A fenced upsert of one record, which also notifies followers of its key. */
  async #put<R>(what: string, table: Table<R>, record: R): Promise<void> {
    const key = String(record[table.key]);
    await this.#fenced(
      what,
      fencedUpsert(table),
      // $1 is the epoch (added by #fenced), $2 the change; the record's values start at $3.
      [payload(table.name, key), ...columnValues(table, record)],
    );
  }

  /** A fenced delete of the row with `key`; true when there was one. */
  async #delete(table: ChangeTable, column: string, key: string): Promise<boolean> {
    const [row] = await this.#fenced(
      `delete from ${table}`,
      fencedDelete(table, column),
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

  #error(what: string, e: unknown): StoreError {
    return storeFailure(this.#name, what, e);
  }
}
