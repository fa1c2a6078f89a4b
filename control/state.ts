/**
 * The control plane's one state: the in-memory books every service reads,
 * one lock for every mutation, write-through to the store, events, and the
 * injected clock. Services hold a reference to it; nothing else keeps a copy
 * of a node, deployment or replica.
 *
 * @module
 */
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import type { ModelPull } from "./model_pull_record.ts";
import { DiskFullBook } from "./disk_full_backoff.ts";
import type { LivenessThresholds } from "../inventory/node_state.ts";
import { InventoryStore, type NodeRegistration } from "../inventory/store.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import type { Deployment } from "../deployment/schema.ts";
import type { Clock } from "../time/clock.ts";
import { currentUid } from "./identity.ts";
import { revisionCommit, revisionSpec } from "./rollout_revisions.ts";
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventRecord,
  replicaRevision,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
} from "./store/store.ts";
import { Wake } from "./wake.ts";
import { createLogger } from "../log/log.ts";
import { ModelFactsBook } from "./model_facts_book.ts";
import { ModelCommits } from "./model_commits.ts";
import type { CommitSource } from "../models/commit_source.ts";
import { localFactsSource, type ModelFactsSource } from "../models/facts_source.ts";

/** The control plane's warnings, one JSON line each. */
const log = createLogger("control");

/** The most events queued for a batching store; past it the oldest are dropped (and counted). */
const MAX_PENDING_EVENTS = 10_000;

/** Events written per round trip. */
const EVENT_BATCH = 500;

/** Settings of the state. */
export interface ControlStateOptions {
  /** Where state lives. */
  store: ControlStore;
  /** The clock every service reads. */
  clock: Clock;
  /** Node liveness thresholds. */
  thresholds?: Partial<LivenessThresholds>;
  /** See {@link ControlState.retireGraceMs}; default {@link DEFAULT_RETIRE_GRACE_MS}. */
  retireGraceMs?: number;
  /** See {@link ControlState.leading}; default: always (a store of its own). */
  leading?: () => boolean;
  /** What {@link ControlState.kick} asks: the reconciler answers it (control/wake.ts). */
  wake?: Wake;
  /** Where models' facts come from; default: local and shared paths only. */
  modelFacts?: ModelFactsSource;
  /** Where model revisions resolve to commits (the hub); absent: none are resolved. */
  commits?: CommitSource;
}

/**
 * How long a ready replica that a rollout or a drain replaces stays out of
 * the gateways' endpoints before it is stopped: gateways poll the endpoint
 * feed every 2 s by default, so two polls and a margin.
 */
export const DEFAULT_RETIRE_GRACE_MS = 5_000;

/** The books, the lock and the store. */
export class ControlState {
  /** The clock. */
  readonly clock: Clock;
  /** The store every change is written through to. */
  readonly store: ControlStore;
  /** Node facts, liveness and GPU allocations: the one book of nodes placement reads. */
  readonly inventory: InventoryStore;
  /** Deployments by name. */
  readonly deployments: Map<string, StoredDeployment> = new Map();
  /** Replicas by id. */
  readonly replicas: Map<string, StoredReplica> = new Map();
  /** Stored node records (credential, intent, overrides, generation) by id. */
  readonly nodes: Map<string, StoredNode> = new Map();
  /** API keys by id. */
  readonly apiKeys: Map<string, ApiKeyRecord> = new Map();
  /** Access tokens by id. */
  readonly tokens: Map<string, AccessTokenRecord> = new Map();
  /** Node credential hash → node id: agents' long polls name no node. */
  readonly byTokenHash: Map<string, string> = new Map();
  /** Each node's last shard reports, by shard id. */
  readonly reports: Map<string, Map<string, ShardReport>> = new Map();
  /**
   * Each node's model cache as its last heartbeat reported it
   * (protocol/model_cache_report.ts); absent for agents that report none.
   * Not stored: the next heartbeat brings it again.
   */
  readonly modelCaches: Map<string, ModelCacheReport> = new Map();
  /** Model revisions being pulled onto nodes, by `repo@commit` (control/model_pulls.ts). */
  readonly modelPulls: Map<string, ModelPull> = new Map();
  /** Nodes that ran out of disk fetching a revision lately, held back for it (control/disk_full_backoff.ts). */
  readonly diskFull: DiskFullBook = new DiskFullBook();
  /** Nodes that held placed shards when the store was opened and have not reported since. */
  readonly awaitingFirstReport: Set<string> = new Set();
  /** Nodes whose desired state may have changed since the reconciler last published. */
  readonly dirty: Set<string> = new Set();
  /** When this control plane started. */
  readonly startedAt: number;
  /**
   * Whether this control plane may act: always, on a store of its own; while
   * its leadership term certainly holds, on a shared one (control/ha_control.ts).
   */
  readonly leading: () => boolean;
  /** The reconciler's wake: {@link kick} asks it for a pass. */
  readonly wake: Wake;
  /** The models' facts placement checks memory and heads against (control/model_facts_book.ts). */
  readonly modelFacts: ModelFactsBook;
  /** Model revisions resolved to commits, and the retries of those not yet (issue #25 item 1). */
  readonly modelCommits: ModelCommits;
  /** Events queued and then given up (the queue was full, or the store refused them). */
  droppedEvents = 0;
  /**
   * How long a ready replica being replaced is out of the endpoints before
   * it stops (design §6.3), so no gateway sends it a request it cannot
   * answer; 0 stops it at once.
   */
  retireGraceMs: number;
  #lock: Promise<unknown> = Promise.resolve();
  readonly #pendingEvents: Omit<EventRecord, "id">[] = [];
  #flushing: Promise<void> | null = null;

  /** Creates empty books. */
  constructor(options: ControlStateOptions) {
    this.clock = options.clock;
    this.store = options.store;
    this.inventory = new InventoryStore({ thresholds: options.thresholds });
    this.startedAt = options.clock.now();
    this.retireGraceMs = options.retireGraceMs ?? DEFAULT_RETIRE_GRACE_MS;
    this.leading = options.leading ?? (() => true);
    this.wake = options.wake ?? new Wake();
    this.modelCommits = new ModelCommits(options.commits ?? null);
    this.modelFacts = new ModelFactsBook(
      options.modelFacts ?? localFactsSource(),
      () => options.clock.now(),
    );
  }

  /** Asks for a reconcile pass soon (debounced by the reconciler, which answers the wake). */
  kick(): void {
    this.wake.kick();
  }

  /** The current time. */
  now(): number {
    return this.clock.now();
  }

  /** Runs `fn` alone: no other mutation interleaves its store writes with it. */
  locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  /**
   * Records an event. On a store that batches (PostgreSQL) it is queued and
   * written behind the lock, in order, so a burst of them (every node coming
   * back after a partition) never holds heartbeats behind database round
   * trips; {@link flushEvents} waits for the queue. Elsewhere it is written
   * at once. It is about the subject's current incarnation (control/identity.ts)
   * unless `uid` names one already gone from the books.
   */
  async event(kind: string, subject: string, message: string, uid?: string): Promise<void> {
    const e = {
      at: this.now(),
      kind,
      subject,
      message,
      uid: uid ?? currentUid(this, subject) ?? "",
    };
    if (this.store.addEvents === undefined) {
      await this.store.addEvent(e);
      return;
    }
    if (this.#pendingEvents.length >= MAX_PENDING_EVENTS) {
      this.#pendingEvents.shift();
      this.droppedEvents++;
    }
    this.#pendingEvents.push(e);
    this.#flushing ??= this.#flush();
  }

  /** Waits until every queued event is written (or its write failed). */
  async flushEvents(): Promise<void> {
    while (this.#flushing !== null) await this.#flushing;
  }

  async #flush(): Promise<void> {
    // One turn of the event loop first: the events of one pass go together.
    await new Promise((r) => setTimeout(r, 0));
    try {
      while (this.#pendingEvents.length > 0) {
        const batch = this.#pendingEvents.splice(0, EVENT_BATCH);
        try {
          await this.store.addEvents!(batch);
        } catch (e) {
          // A deposed leader's or an unreachable store's events are lost, never retried
          // forever; the next leader writes its own.
          this.droppedEvents += batch.length;
          this.warn("events not written", `${batch.length}: ${(e as Error).message}`);
        }
      }
    } finally {
      this.#flushing = null;
    }
  }

  /** A warning for the operator's log (log/log.ts): never a secret. */
  warn(msg: string, detail: string): void {
    log.warn(msg, { detail });
  }

  /** What the inventory holds for a stored node: the agent's facts under the operator's intent. */
  registration(n: StoredNode): NodeRegistration {
    const r = n.registration;
    return {
      id: n.id,
      hostname: r.hostname,
      mgmt_addr: r.mgmt_addr,
      mgmt_interface: r.mgmt_interface,
      labels: { ...r.labels, ...n.label_overrides },
      fabrics: overrideFabrics(r.fabrics, n.fabric_overrides ?? {}),
      gpus: r.gpus,
      agent_version: r.agent_version,
      engine_versions: r.engine_versions,
    };
  }

  /**
   * The spec a replica runs: its own revision's (design §6.3), so old and new
   * replicas of a rollout each keep theirs; undefined once its deployment is gone.
   */
  specOf(r: StoredReplica): Deployment | undefined {
    const d = this.deployments.get(r.deployment);
    if (d === undefined) return undefined;
    return revisionSpec(d, replicaRevision(r)) ?? d.spec;
  }

  /** The model commit a replica's revision serves; null when unknown (issue #25 item 1). */
  commitOf(r: StoredReplica): string | null {
    const d = this.deployments.get(r.deployment);
    return d === undefined ? null : revisionCommit(d, replicaRevision(r));
  }
}

/** A node's reported fabrics with the operator's overrides applied (renamed, or dropped for null). */
export function overrideFabrics<F extends { fabric: string }>(
  fabrics: readonly F[],
  overrides: Record<string, string | null>,
): F[] {
  const out: F[] = [];
  for (const f of fabrics) {
    const o = Object.hasOwn(overrides, f.fabric) ? overrides[f.fabric] : f.fabric;
    if (o !== null) out.push({ ...f, fabric: o });
  }
  return out;
}
