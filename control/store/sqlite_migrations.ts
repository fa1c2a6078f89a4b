/**
 * The SQLite store's schema (design §11), as numbered migrations recorded in
 * SQLite's `user_version`; `SqliteStore.open` applies the pending ones in one
 * transaction.
 *
 * @module
 */

/**
 * The schema, one migration per version: `MIGRATIONS[i]` takes a file from
 * version `i` to `i + 1`. Append only; never edit a released migration, since
 * files already past it will not run it again.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: the first schema. No foreign keys between replicas and deployments:
  // the interface treats each record type on its own (the reconciler deletes
  // a deployment's replicas itself), exactly as MemoryStore does.
  `
  CREATE TABLE deployments (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL,    -- Deployment, JSON
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
  );
  CREATE TABLE replicas (
    id            TEXT PRIMARY KEY NOT NULL,
    deployment    TEXT NOT NULL,
    replica_index INTEGER NOT NULL,
    phase         TEXT NOT NULL,
    placement     TEXT,           -- Placed, JSON; NULL when not placed
    explanation   TEXT,           -- Explanation, JSON; NULL before the first attempt
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
  );
  CREATE INDEX replicas_by_deployment ON replicas (deployment);
  CREATE TABLE nodes (
    id              TEXT PRIMARY KEY NOT NULL,
    registration    TEXT NOT NULL,  -- RegisterRequest, JSON
    token_hash      TEXT NOT NULL,
    intent          TEXT NOT NULL,
    label_overrides TEXT NOT NULL,  -- Record<string, string>, JSON
    generation      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
  );
  CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, even after pruning
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL
  );
  CREATE INDEX events_by_subject ON events (subject, id);
  CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL,
    models     TEXT,              -- string[], JSON; NULL for every model
    created_at INTEGER NOT NULL
  );
  `,
  // 2: operator fabric overrides on nodes.
  `ALTER TABLE nodes ADD COLUMN fabric_overrides TEXT NOT NULL DEFAULT '{}';`,
  // 3: a replica's last failure that retrying cannot change (ReplicaFailure, JSON).
  `ALTER TABLE replicas ADD COLUMN failure TEXT;`,
  // 4: access tokens by kind (admin, gateway, metrics, join), hashed.
  `
  CREATE TABLE tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    kind        TEXT NOT NULL,
    hash        TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER           -- NULL: never
  );
  `,
  // 5: revisions and rollouts (design §6.3). Records from before read as revision 1.
  `
  ALTER TABLE deployments ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE deployments ADD COLUMN history TEXT NOT NULL DEFAULT '[]';  -- DeploymentRevision[], JSON
  ALTER TABLE deployments ADD COLUMN rollout TEXT;                        -- RolloutRecord, JSON; NULL: none
  ALTER TABLE replicas ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
  `,
  // 6: when each node was last heard from, so a restart shows it (control/last_seen.ts).
  `ALTER TABLE nodes ADD COLUMN last_seen_at INTEGER;`,
  // 7: identities (issue #23): a deployment's and a replica's incarnation, and the one an event is
  // about, so a name created again does not show its predecessor's events (control/identity.ts).
  // Records and events from before read as "" and keep showing each other.
  `
  ALTER TABLE deployments ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  ALTER TABLE replicas ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  ALTER TABLE events ADD COLUMN uid TEXT NOT NULL DEFAULT '';
  CREATE INDEX events_by_subject_uid ON events (subject, uid, id);
  `,
  // 8: the commit a deployment revision's model revision resolved to (issue #25 item 1); NULL:
  // a local path model, or not resolved yet. Records from before read as NULL.
  `ALTER TABLE deployments ADD COLUMN model_commit TEXT;`,
  // 9: model pulls (issue #25 leftovers), so a restarted control plane keeps asking for them
  // (control/model_pull_record.ts).
  `
  CREATE TABLE model_pulls (
    id           TEXT PRIMARY KEY NOT NULL,  -- repo@commit
    model        TEXT NOT NULL,
    model_commit TEXT NOT NULL,
    nodes        TEXT NOT NULL,              -- PullNode[], JSON
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER                     -- NULL: a node is still requested
  );
  `,
];

/** The schema version this llmgw writes; a file with a larger one is refused. */
export const SCHEMA_VERSION: number = MIGRATIONS.length;
