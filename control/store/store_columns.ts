/**
 * A record's column values, in the order both SQL stores' tables declare
 * them (control/sqlite_migrations.ts, control/postgres_migrations.ts):
 * keys and scalars as they are, structured parts as JSON text. One list per
 * record type, so the two stores cannot write a field differently.
 *
 * @module
 */
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  deploymentRevision,
  type EventRecord,
  replicaRevision,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
} from "./store.ts";

/** A column value. */
export type ColumnValue = string | number | null;

/** `value` as JSON text, or SQL NULL for null. */
export function nullableJson(value: unknown): string | null {
  return value === null ? null : JSON.stringify(value);
}

/** name, spec, created_at, updated_at, revision, history, rollout, uid. */
export function deploymentColumns(d: StoredDeployment): ColumnValue[] {
  return [
    d.name,
    JSON.stringify(d.spec),
    d.created_at,
    d.updated_at,
    deploymentRevision(d),
    JSON.stringify(d.history ?? []),
    nullableJson(d.rollout ?? null),
    d.uid ?? "",
  ];
}

/**
 * id, deployment, replica_index, phase, placement, explanation, failure,
 * created_at, updated_at, revision, uid.
 */
export function replicaColumns(r: StoredReplica): ColumnValue[] {
  return [
    r.id,
    r.deployment,
    r.index,
    r.phase,
    nullableJson(r.placement),
    nullableJson(r.explanation),
    nullableJson(r.failure ?? null),
    r.created_at,
    r.updated_at,
    replicaRevision(r),
    r.uid ?? "",
  ];
}

/**
 * id, registration, token_hash, intent, label_overrides, fabric_overrides,
 * generation, updated_at, last_seen_at.
 */
export function nodeColumns(n: StoredNode): ColumnValue[] {
  return [
    n.id,
    JSON.stringify(n.registration),
    n.token_hash,
    n.intent,
    JSON.stringify(n.label_overrides),
    JSON.stringify(n.fabric_overrides ?? {}),
    n.generation,
    n.updated_at,
    n.last_seen_at ?? null,
  ];
}

/** id, name, hash, models, created_at. */
export function apiKeyColumns(k: ApiKeyRecord): ColumnValue[] {
  return [k.id, k.name, k.hash, nullableJson(k.models), k.created_at];
}

/** id, kind, hash, description, created_at, expires_at. */
export function tokenColumns(t: AccessTokenRecord): ColumnValue[] {
  return [t.id, t.kind, t.hash, t.description, t.created_at, t.expires_at];
}

/** An event from its row (id, at, kind, subject, message, uid), as both SQL stores select it. */
export function eventFromRow(row: Record<string, unknown>): EventRecord {
  return {
    id: row.id as number,
    at: row.at as number,
    kind: row.kind as string,
    subject: row.subject as string,
    message: row.message as string,
    uid: row.uid as string,
  };
}
