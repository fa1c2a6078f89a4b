/**
 * The PostgreSQL store's schema (design §11, issue #15), as numbered
 * migrations recorded in `llmgw_schema`. `PostgresStore.open` applies the
 * pending ones in one transaction under `pg_advisory_xact_lock`, so two
 * control planes starting on an empty database migrate it once: the second
 * waits for the lock, then finds nothing left to do.
 *
 * The tables mirror the SQLite store's (control/store/sqlite_migrations.ts), with
 * two columns more on every record: `epoch`, the leadership term of the
 * write (design §11.1: a deposed leader's writes are refused, and the rows
 * show it), and `seq`, from one sequence, so a follower can tell that
 * something changed since it last looked. Structured parts are JSON text, not
 * jsonb: text round-trips exactly what was written (jsonb rejects `\u0000`,
 * which an engine's log tail may hold).
 *
 * @module
 */
import type pg from "pg";
import { StoreError } from "./store.ts";

/** The advisory lock key every migration takes ("llmgw" in ASCII). */
export const MIGRATION_LOCK_KEY = 0x6c6c6d6777;

/**
 * The schema, one migration per version: `PG_MIGRATIONS[i]` takes a database
 * from version `i` to `i + 1`. Append only; never edit a released one.
 */
export const PG_MIGRATIONS: readonly string[] = [
  // 1: the records, the leader lease and the change sequence.
  `
  CREATE SEQUENCE llmgw_change_seq;
  CREATE TABLE deployments (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,    -- Deployment, JSON
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    epoch       BIGINT NOT NULL,
    seq         BIGINT NOT NULL
  );
  CREATE TABLE replicas (
    id            TEXT PRIMARY KEY,
    deployment    TEXT NOT NULL,
    replica_index INTEGER NOT NULL,
    phase         TEXT NOT NULL,
    placement     TEXT,           -- StoredPlacement, JSON; NULL when not placed
    explanation   TEXT,           -- Explanation, JSON
    failure       TEXT,           -- ReplicaFailure, JSON
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    epoch         BIGINT NOT NULL,
    seq           BIGINT NOT NULL
  );
  CREATE INDEX replicas_by_deployment ON replicas (deployment);
  CREATE TABLE nodes (
    id               TEXT PRIMARY KEY,
    registration     TEXT NOT NULL,  -- RegisterRequest, JSON
    token_hash       TEXT NOT NULL,
    intent           TEXT NOT NULL,
    label_overrides  TEXT NOT NULL,  -- Record<string, string>, JSON
    fabric_overrides TEXT NOT NULL,  -- Record<string, string | null>, JSON
    generation       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    epoch            BIGINT NOT NULL,
    seq              BIGINT NOT NULL
  );
  CREATE TABLE events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      BIGINT NOT NULL,
    kind    TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    epoch   BIGINT NOT NULL
  );
  CREATE INDEX events_by_subject ON events (subject, id);
  CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL,
    models     TEXT,              -- string[], JSON; NULL for every model
    created_at BIGINT NOT NULL,
    epoch      BIGINT NOT NULL,
    seq        BIGINT NOT NULL
  );
  CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    hash        TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,           -- NULL: never
    epoch       BIGINT NOT NULL,
    seq         BIGINT NOT NULL
  );
  -- One row: who leads, until when by the database's clock, and the term.
  CREATE TABLE llmgw_leader (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    holder      TEXT NOT NULL,
    address     TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    acquired_at TIMESTAMPTZ
  );
  INSERT INTO llmgw_leader (id, holder, address, epoch, expires_at) VALUES (1, '', '', 0, '-infinity');
  -- Cluster-wide facts every instance must agree on (the CA's key hash).
  CREATE TABLE llmgw_cluster (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  `,
  // 2: revisions and rollouts (design §6.3). Records from before read as revision 1.
  `
  ALTER TABLE deployments ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE deployments ADD COLUMN history TEXT NOT NULL DEFAULT '[]';  -- DeploymentRevision[], JSON
  ALTER TABLE deployments ADD COLUMN rollout TEXT;                        -- RolloutRecord, JSON; NULL: none
  ALTER TABLE replicas ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
  `,
  // 3: when each node was last heard from, so a restart shows it (control/last_seen.ts).
  `ALTER TABLE nodes ADD COLUMN last_seen_at BIGINT;`,
  // 4: identities (issue #23), as SQLite's migration 7.
  `
  ALTER TABLE deployments ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  ALTER TABLE replicas ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  ALTER TABLE events ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  CREATE INDEX events_by_subject_uid ON events (subject, uid, id);
  `,
  // 5: a deployment revision's resolved model commit (issue #25 item 1), as SQLite's migration 8.
  `ALTER TABLE deployments ADD COLUMN model_commit TEXT;`,
  // 6: model pulls, as SQLite's migration 9.
  `
  CREATE TABLE model_pulls (
    id           TEXT PRIMARY KEY,  -- repo@commit
    model        TEXT NOT NULL,
    model_commit TEXT NOT NULL,
    nodes        TEXT NOT NULL,     -- PullNode[], JSON
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    finished_at  BIGINT,            -- NULL: a node is still requested
    epoch        BIGINT NOT NULL,
    seq          BIGINT NOT NULL
  );
  `,
];

/** The schema version this llmgw writes; a database with a larger one is refused. */
export const PG_SCHEMA_VERSION: number = PG_MIGRATIONS.length;

/**
 * Applies the pending migrations in one transaction under the migration
 * lock. `name` is the store's redacted URL, for the newer-schema refusal.
 *
 * @throws {StoreError} when the database's schema is newer than this llmgw's.
 */
export async function migrate(pool: pg.Pool, name: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
      await client.query("CREATE TABLE IF NOT EXISTS llmgw_schema (version INTEGER NOT NULL)");
      const { rows } = await client.query("SELECT version FROM llmgw_schema");
      const current = rows.length === 0 ? 0 : Number(rows[0].version);
      if (current > PG_SCHEMA_VERSION) {
        throw new StoreError(
          `Cannot open store ${name}: its schema version ${current} is newer than this ` +
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
