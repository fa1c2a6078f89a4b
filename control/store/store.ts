/**
 * The control plane's store (design §11): one interface, so the embedded
 * SQLite store (the default) and a PostgreSQL store for a highly available
 * control plane are interchangeable. It holds what must survive a restart:
 * deployments, replicas and their placements, operator node state and node
 * credentials, API keys (hashed), model pulls and events. Nothing past this interface
 * sees SQL types.
 *
 * Every method returns copies; a stored object changed by the caller
 * changes nothing until it is put back.
 *
 * @module
 */
import type { Deployment } from "../../deployment/schema.ts";
import type { PlacementPorts } from "../../engines/port_block.ts";
import type { Explanation, Placed } from "../../placement/types.ts";
import type { RegisterRequest } from "../../protocol/agent_protocol.ts";
import type { ModelPullStore } from "../model_pull_record.ts";

/** A deployment as stored. */
export interface StoredDeployment {
  /** Deployment name (the key). */
  name: string;
  /** The validated deployment, defaults applied. */
  spec: Deployment;
  /** When it was first applied (ms since epoch). */
  created_at: number;
  /** When it last changed. */
  updated_at: number;
  /** The revision `spec` is (design §6.3); absent in records from before revisions: 1. */
  revision?: number;
  /**
   * Recent revisions, oldest first, the current one included; bounded, but
   * never without a revision a replica still runs. Absent or empty in
   * records from before revisions.
   */
  history?: DeploymentRevision[];
  /** The rollout in progress, or null when every replica runs `revision`. */
  rollout?: RolloutRecord | null;
  /**
   * The commit the spec's model `revision` resolved to for this deployment
   * revision (issue #25 item 1): every replica of it serves this commit.
   * Null or absent: a local path model, or not resolved yet (the control
   * plane retries in the background); records from before read as null.
   */
  model_commit?: string | null;
  /**
   * This incarnation's identity: new each time the name is created, so a
   * deployment deleted and created again under the same name does not show
   * its predecessor's events (control/identity.ts). Absent or "" in records
   * from before identities.
   */
  uid?: string;
}

/** How a revision fared. */
export type RevisionOutcome = "rolling_out" | "complete" | "failed" | "superseded";

/** What made a revision. */
export type RevisionCause = "apply" | "undo" | "revert";

/** One revision of a deployment: a spec that changed more than its replica count. */
export interface DeploymentRevision {
  /** 1, 2, …: one more than the newest before it. */
  revision: number;
  /** The spec, as applied (its replica count is the count at that time). */
  spec: Deployment;
  /** When it was made (ms since epoch). */
  applied_at: number;
  /** An apply; an undo to an older revision's spec; an automatic revert after a failed rollout. */
  cause: RevisionCause;
  /** For an undo or a revert: the revision whose spec it copies; else null. */
  from_revision: number | null;
  /** rolling_out, complete, failed (its rollout stopped and was reverted) or superseded. */
  outcome: RevisionOutcome;
  /** Why it failed; null otherwise. */
  reason: string | null;
  /** The commit its model revision resolved to; null or absent when unknown or a local path. */
  model_commit?: string | null;
}

/** A rollout in progress: replicas move to `target` one at a time (design §6.3). */
export interface RolloutRecord {
  /** The revision being rolled out. */
  target: number;
  /** The revision to go back to when this one fails; null for a revert, never reverted again. */
  fallback: number | null;
  /** When it started. */
  started_at: number;
  /** The last progress (its start, a step begun or done): the deadline counts from it. */
  progress_at: number;
  /** Steps done. */
  steps: number;
  /** The step under way, or null between steps. */
  step: RolloutStepRecord | null;
}

/** One step of a rollout: an old replica replaced by a new one. */
export interface RolloutStepRecord {
  /** The old replica. */
  replaced: string;
  /** The new replica: a surge replica's own id, or the old id when rebuilt in place. */
  by: string;
  /** surge: the new one started first; in_place: the old one taken down first. */
  mode: "surge" | "in_place";
  /** When it began. */
  started_at: number;
}

/** Where a replica stands in the control plane's books. */
export type ReplicaPhase = "pending" | "placed" | "failed";

/** A replica as stored: its placement, or why it has none. */
export interface StoredReplica {
  /** Replica id, e.g. `llama-70b-r3` (the key). */
  id: string;
  /** Its deployment. */
  deployment: string;
  /** Its ordinal within the deployment. */
  index: number;
  /**
   * pending: waiting for a placement; placed: shards assigned; failed: its
   * shards failed for a reason retrying cannot change, and it is no longer
   * rebuilt (until its deployment changes).
   */
  phase: ReplicaPhase;
  /** The placement and its ports, when placed. */
  placement: StoredPlacement | null;
  /** The last placement attempt's explanation (design §1.2). */
  explanation: Explanation | null;
  /** The last failure that retrying cannot change; null when there was none. */
  failure?: ReplicaFailure | null;
  /** The deployment revision it is built from; absent in records from before revisions: 1. */
  revision?: number;
  /**
   * This incarnation's identity: new each time the id is created (a replica
   * removed and added again under its id is another replica). Absent or ""
   * in records from before identities.
   */
  uid?: string;
  /** When it was created. */
  created_at: number;
  /** When it last changed. */
  updated_at: number;
}

/** A placement as stored: where each shard runs, and the ports decided for it then. */
export interface StoredPlacement extends Placed {
  /**
   * Which placement of the replica this is, from 1 (protocol/ids.ts): the
   * next one takes the next number, so its shards get new ids. Absent in
   * records from before it was stored: read from `replica_id` then.
   */
  attempt?: number;
  /** The ports, decided once at placement. */
  ports: PlacementPorts;
  /** When all its shards first reported ready (`replica_ready`); absent or null before. */
  ready_at?: number | null;
  /**
   * When it left the gateways' endpoints ahead of being stopped (design
   * §6.3); absent or null while it serves.
   */
  retiring_at?: number | null;
}

/** A shard failure that retrying cannot change (the engine refused its arguments). */
export interface ReplicaFailure {
  /** The reason the agent reported. */
  reason: string;
  /** The shard that failed. */
  shard_id: string;
  /** Its node. */
  node: string;
  /** The end of the shard's log. */
  log_tail: string[];
  /** When it failed. */
  at: number;
  /** Placements in a row that failed this way. */
  attempts: number;
  /** The nodes it failed on this way: later placements try the others first. */
  nodes?: string[];
}

/** Operator intent on a node (design §1.3): survives re-registration and restarts. */
export type NodeIntent = "none" | "cordoned" | "draining";

/** A node as stored. */
export interface StoredNode {
  /** Node id (the key). */
  id: string;
  /** The agent's last registration (hardware, address, versions). */
  registration: RegisterRequest;
  /** SHA-256 of the node credential, bound at first registration (hex). */
  token_hash: string;
  /** Operator intent. */
  intent: NodeIntent;
  /** Operator label overrides, applied over the agent's labels. */
  label_overrides: Record<string, string>;
  /**
   * Operator fabric overrides over what the agent reports: a fabric renamed
   * (string) or excluded from placement (null). Fabric names are the
   * operator's (design §1.3, §5.2).
   */
  fabric_overrides: Record<string, string | null>;
  /** Desired-state generation; only ever increases (fencing, design §10). */
  generation: number;
  /** When it last changed. */
  updated_at: number;
  /**
   * When the node was last heard from, as last recorded (control/last_seen.ts
   * writes it at most once a minute per node); absent or null: never recorded.
   */
  last_seen_at?: number | null;
}

/** A node's last-seen time, for {@link ControlStore.recordNodesSeen}. */
export interface NodeSeen {
  /** Node id. */
  id: string;
  /** When it was last heard from, ms since the epoch. */
  last_seen_at: number;
}

/** Something that happened, for the events list (design §11, §13). */
export interface EventRecord {
  /** Increasing id. */
  id: number;
  /** When (ms since epoch). */
  at: number;
  /** What kind, e.g. `replica_placed`, `replica_unschedulable`, `node_lost`. */
  kind: string;
  /** What it is about: `deployment/NAME`, `replica/ID`, `node/ID`. */
  subject: string;
  /** In words. */
  message: string;
  /**
   * The identity of the subject's incarnation it is about (its `uid`): "" for
   * subjects without one (nodes, tokens, keys) and events from before identities.
   */
  uid: string;
}

/** An API key for the gateway (design §12), stored hashed. */
export interface ApiKeyRecord {
  /** Key id (the key). */
  id: string;
  /** A name for people. */
  name: string;
  /** SHA-256 of the key (hex). */
  hash: string;
  /** Served model names it may use; null for all. */
  models: string[] | null;
  /** When it was created. */
  created_at: number;
}

/** The kinds of access token the control plane issues (design §11.2). */
export type AccessTokenKind = "admin" | "gateway" | "metrics" | "join";

/** An access token, stored hashed; its secret is shown once, at creation. */
export interface AccessTokenRecord {
  /** Token id: the middle part of `llmgw1.<id>.<secret>`, safe to show. */
  id: string;
  /** What it may do. */
  kind: AccessTokenKind;
  /** SHA-256 of the token (hex). */
  hash: string;
  /** A note for people. */
  description: string;
  /** When it was created (ms since epoch). */
  created_at: number;
  /** When it stops working (ms since epoch); null: never. */
  expires_at: number | null;
}

/** Filters for {@link ControlStore.listEvents}. */
export interface EventQuery {
  /** Only events with a larger id. */
  after?: number;
  /** Only events about exactly this subject, e.g. `replica/llama-r0`. */
  subject?: string;
  /** Only events about this incarnation (its `uid`; "" for events from before identities). */
  uid?: string;
  /** At most this many, newest last. Default 100. */
  limit?: number;
}

/** The store interface; model pulls as control/model_pull_record.ts declares them. */
export interface ControlStore extends ModelPullStore {
  /** Every deployment, by name. */
  listDeployments(): Promise<StoredDeployment[]>;
  /** Creates or replaces a deployment. */
  putDeployment(d: StoredDeployment): Promise<void>;
  /** Deletes a deployment; false when there was none. */
  deleteDeployment(name: string): Promise<boolean>;

  /** Every replica, by id. */
  listReplicas(): Promise<StoredReplica[]>;
  /** Creates or replaces a replica. */
  putReplica(r: StoredReplica): Promise<void>;
  /** Deletes a replica; false when there was none. */
  deleteReplica(id: string): Promise<boolean>;

  /** Every node, by id. */
  listNodes(): Promise<StoredNode[]>;
  /** Creates or replaces a node. */
  putNode(n: StoredNode): Promise<void>;
  /** Deletes a node; false when there was none. */
  deleteNode(id: string): Promise<boolean>;
  /**
   * Sets the last-seen time of several nodes in one write, touching nothing
   * else of them; ids with no node are skipped (never creates one).
   */
  recordNodesSeen(seen: readonly NodeSeen[]): Promise<void>;

  /** Appends an event; returns it with its id. Only the newest {@link MAX_EVENTS} are kept. */
  addEvent(e: Omit<EventRecord, "id">): Promise<EventRecord>;
  /**
   * Appends several events in order, in one round trip: a store whose
   * writes cross a network has it, and the control plane then writes events
   * behind the lock instead of under it (control/state.ts).
   */
  addEvents?(events: readonly Omit<EventRecord, "id">[]): Promise<void>;
  /** Events, oldest first. */
  listEvents(q?: EventQuery): Promise<EventRecord[]>;

  /** Every API key. */
  listApiKeys(): Promise<ApiKeyRecord[]>;
  /** Creates or replaces an API key. */
  putApiKey(k: ApiKeyRecord): Promise<void>;
  /** Deletes an API key; false when there was none. */
  deleteApiKey(id: string): Promise<boolean>;

  /** Every access token, by id. */
  listTokens(): Promise<AccessTokenRecord[]>;
  /** Creates or replaces an access token. */
  putToken(t: AccessTokenRecord): Promise<void>;
  /** Deletes an access token; false when there was none. */
  deleteToken(id: string): Promise<boolean>;

  /** Releases the store (closes files, ends connections); a promise where that takes time. */
  close(): void | Promise<void>;
}

/** A deployment's revision: 1 for a record from before revisions. */
export function deploymentRevision(d: Pick<StoredDeployment, "revision">): number {
  return d.revision ?? 1;
}

/** A replica's revision: 1 for a record from before revisions. */
export function replicaRevision(r: Pick<StoredReplica, "revision">): number {
  return r.revision ?? 1;
}

/** A deployment with its revision fields present: what every store's reads return. */
export function withRevisionFields(d: StoredDeployment): StoredDeployment {
  return {
    ...d,
    revision: deploymentRevision(d),
    history: d.history ?? [],
    rollout: d.rollout ?? null,
    model_commit: d.model_commit ?? null,
  };
}

/** A replica with its revision present: what every store's reads return. */
export function withReplicaRevision(r: StoredReplica): StoredReplica {
  return { ...r, revision: replicaRevision(r) };
}

/** A record with its identity present ("" for records from before identities): what every store's reads return. */
export function withUid<T extends { uid?: string }>(x: T): T & { uid: string } {
  return { ...x, uid: x.uid ?? "" };
}

/** Events every store keeps; older ones are pruned as new ones come. */
export const MAX_EVENTS = 10_000;

/** Raised when a store cannot be opened: damaged, or from a newer schema. Never run on partial state. */
export class StoreError extends Error {
  /** Creates the error; the message says what is wrong with which file. */
  constructor(message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/** Raised by a write when this instance does not hold the lease it writes under. */
export class NotLeaderError extends StoreError {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "NotLeaderError";
  }
}
