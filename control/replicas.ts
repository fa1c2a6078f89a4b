/**
 * The replica book: the one writer of replica transitions (design §5.4,
 * §6.3). Each transition (add pending, place, mark unschedulable, rebuild,
 * requeue, fail, retire, remove) does what it needs of touch (the nodes'
 * desired states change), release (GPUs in the inventory and in the pass's
 * cluster index), persist and event, once, here; the reconciler's steps,
 * the rollout step and the deployment service decide, and call these.
 *
 * During a reconcile pass the book keeps one cluster index (placement
 * design §16), built on first use and kept in step with every placement and
 * release of the pass, so "would it fit" is asked of the same index the
 * placement then goes to.
 *
 * @module
 */
import { placementIndexOptions } from "./model_caches.ts";
import { compareNatural } from "../text/natural_order.ts";
import { noPorts } from "../engines/port_block.ts";
import {
  applyPlacement,
  type ClusterIndex,
  type Explanation,
  indexCluster,
  type Placed,
  releasePlacement,
  type Unschedulable,
} from "../placement/mod.ts";
import { placementId } from "../protocol/ids.ts";
import { newUid } from "./identity.ts";
import { freshReplicaId } from "./rollout.ts";
import type { ControlState } from "./state.ts";
import { type ReplicaFailure, replicaRevision, type StoredReplica } from "./store/store.ts";
import { isReady } from "./views.ts";

/** Placement outcomes since start, for /metrics. */
export interface PlacementCounters {
  /** Replicas placed. */
  placements: number;
  /** Placement attempts that found no fit (new explanations only). */
  unschedulable: number;
}

/** What a rebuild changes besides the placement. */
export interface RebuildChanges {
  /** The revision it is rebuilt on (a rollout's in-place step). */
  revision?: number;
  /** Its failure record: null forgets it, a record keeps it for the next placement. */
  failure?: ReplicaFailure | null;
  /** A new identity (a deployment created again under its name). */
  uid?: string;
}

/** The book over the state's replicas. */
export class ReplicaBook {
  /** Placement outcomes since start. */
  readonly counters: PlacementCounters = { placements: 0, unschedulable: 0 };
  readonly #state: ControlState;
  /** Placement numbers by replica id: a new placement gets new shard ids. */
  readonly #attempts = new Map<string, number>();
  /** The pass's cluster index; null outside a pass or before its first use. */
  #index: ClusterIndex | null = null;
  #inPass = false;

  /** A book over `state`'s replicas. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /** Starts a pass: its index is built from the live inventory on first use. */
  beginPass(): void {
    this.#inPass = true;
    this.#index = null;
  }

  /** Ends a pass: the index goes (heartbeats change the inventory between passes). */
  endPass(): void {
    this.#inPass = false;
    this.#index = null;
  }

  /**
   * Drops the pass's index; the next use builds it again from the inventory,
   * which holds this pass's placements and releases. For a change the index
   * cannot apply to itself: a node held back from a model revision after
   * running out of disk (control/disk_full_backoff.ts).
   */
  rebuildIndex(): void {
    this.#index = null;
  }

  /**
   * The pass's one cluster index: the live inventory with this pass's
   * placements and releases applied. Outside a pass, a fresh one each call.
   */
  index(): ClusterIndex {
    if (this.#index !== null) return this.#index;
    const index = indexCluster(
      this.#state.inventory.snapshot(),
      placementIndexOptions(this.#state),
    );
    if (this.#inPass) this.#index = index;
    return index;
  }

  /** Marks the nodes of a replica's shards for a new desired state. */
  #touch(r: StoredReplica): void {
    for (const s of r.placement?.shards ?? []) this.#state.dirty.add(s.node);
  }

  /** Remembers a restored placement's number, so the next one gets new shard ids. */
  restoreAttempt(replicaId: string, attempt: number): void {
    this.#attempts.set(replicaId, attempt);
  }

  /** The id the next placement of `r` takes: `REPLICA.ATTEMPT`. */
  nextPlacementId(r: Pick<StoredReplica, "id">): string {
    return placementId(r.id, (this.#attempts.get(r.id) ?? 0) + 1);
  }

  /**
   * The id a new replica of `deployment` at `index` would get now (a
   * `replacement` starts beside the one it replaces: control/rollout.ts).
   */
  freshId(deployment: string, index: number, revision: number, replacement: boolean): string {
    const replicas = this.#state.replicas;
    return freshReplicaId(deployment, index, revision, (x) => replicas.has(x), replacement);
  }

  /** Adds a pending replica, stored; the reconciler places it. No event: nothing runs yet. */
  async addPending(
    deployment: string,
    index: number,
    revision: number,
    replacement: boolean,
  ): Promise<StoredReplica> {
    const state = this.#state;
    const now = state.now();
    const r: StoredReplica = {
      id: this.freshId(deployment, index, revision, replacement),
      deployment,
      index,
      phase: "pending",
      placement: null,
      explanation: null,
      failure: null,
      revision,
      uid: newUid(),
      created_at: now,
      updated_at: now,
    };
    state.replicas.set(r.id, r);
    await state.store.putReplica(r);
    return r;
  }

  /**
   * Places a pending replica where `placed` says (made for
   * {@link nextPlacementId}): GPUs allocated in the inventory and the pass's
   * index, its nodes' desired states marked, stored, `replica_placed`.
   * Ports are the agents' to allocate: known once they report them.
   */
  async place(r: StoredReplica, placed: Placed): Promise<void> {
    const state = this.#state;
    for (const s of placed.shards) {
      state.inventory.allocate({
        node: s.node,
        replica_id: r.id,
        shard_id: s.shard_id,
        deployment: placed.deployment,
        gpu_indices: s.gpu_indices,
      });
    }
    if (this.#index !== null) applyPlacement(this.#index, placed.deployment, placed.shards);
    const attempt = (this.#attempts.get(r.id) ?? 0) + 1;
    this.#attempts.set(r.id, attempt);
    r.phase = "placed";
    r.placement = { ...placed, attempt, ports: noPorts() };
    r.explanation = placed.explanation;
    r.updated_at = state.now();
    this.#touch(r);
    await state.store.putReplica(r);
    this.counters.placements++;
    await state.event("replica_placed", `replica/${r.id}`, placed.explanation.summary);
  }

  /**
   * Records why a pending replica fits nowhere: stored and told
   * (`replica_unschedulable`) only when the reasons changed (which reasons,
   * how many nodes each), not when only their wording did.
   */
  async unschedulable(r: StoredReplica, result: Unschedulable): Promise<void> {
    if (r.explanation !== null && sameReasons(r.explanation, result.explanation)) return;
    const state = this.#state;
    r.explanation = result.explanation;
    r.updated_at = state.now();
    await state.store.putReplica(r);
    this.counters.unschedulable++;
    await state.event("replica_unschedulable", `replica/${r.id}`, result.explanation.summary);
  }

  /**
   * Frees a replica's GPUs (inventory and the pass's index) and marks its
   * nodes for new desired states; the record is unchanged. Transitions call
   * it; a caller that must count a replica's own GPUs as free before
   * deciding (replica_failures.ts) calls it first, and the transition then
   * finds nothing left to free.
   */
  vacate(r: StoredReplica): void {
    const state = this.#state;
    this.#touch(r);
    const released = state.inventory.releaseReplica(r.id);
    if (this.#index !== null && released.length > 0) {
      releasePlacement(this.#index, released[0].deployment ?? r.deployment, released);
    }
  }

  /**
   * Takes a replica back to pending, its shards stopped (`replica_rebuilding`
   * with `why`); the reconciler places it again.
   */
  async rebuild(r: StoredReplica, why: string, changes: RebuildChanges = {}): Promise<void> {
    const state = this.#state;
    this.vacate(r);
    applyChanges(r, changes);
    r.phase = "pending";
    r.placement = null;
    r.updated_at = state.now();
    await state.store.putReplica(r);
    await state.event("replica_rebuilding", `replica/${r.id}`, why);
  }

  /**
   * A replica that runs nothing (pending, or failed) goes back to pending
   * with `changes`: stored, no event (nothing stopped).
   */
  async requeue(r: StoredReplica, changes: RebuildChanges = {}): Promise<void> {
    const state = this.#state;
    this.vacate(r);
    applyChanges(r, changes);
    r.phase = "pending";
    r.placement = null;
    r.updated_at = state.now();
    await state.store.putReplica(r);
  }

  /**
   * Gives up on a replica (design §5.4): its shards stop, it is `failed`
   * with `failure` until its deployment changes, and `replica_failed` says `why`.
   */
  async fail(r: StoredReplica, failure: ReplicaFailure, why: string): Promise<void> {
    const state = this.#state;
    this.vacate(r);
    r.failure = failure;
    r.phase = "failed";
    r.placement = null;
    r.updated_at = state.now();
    await state.store.putReplica(r);
    await state.event("replica_failed", `replica/${r.id}`, why);
  }

  /**
   * Whether a replica may be stopped now (design §6.3). A ready one first
   * leaves the gateways' endpoints (`retiring_at`, stored) and may stop
   * only after the state's grace, so no gateway still sends it requests;
   * one that serves nothing may go at once. False: not yet (ask again).
   */
  async retire(r: StoredReplica): Promise<boolean> {
    const state = this.#state;
    const now = state.now();
    if (state.retireGraceMs <= 0 || r.placement === null || !isReady(state, r)) return true;
    const since = r.placement.retiring_at ?? null;
    if (since === null) {
      r.placement.retiring_at = now;
      r.updated_at = now;
      await state.store.putReplica(r);
      return false;
    }
    return now - since >= state.retireGraceMs;
  }

  /** Removes a replica: shards stopped, GPUs freed, record deleted, `replica_removed`. */
  async remove(r: StoredReplica, why: string): Promise<void> {
    const state = this.#state;
    this.vacate(r);
    state.replicas.delete(r.id);
    this.#attempts.delete(r.id);
    await state.store.deleteReplica(r.id);
    await state.event("replica_removed", `replica/${r.id}`, why, r.uid ?? "");
  }

  /** Stores the ports its agents allocated (control/ports.ts learned them): no event. */
  async savePorts(r: StoredReplica): Promise<void> {
    r.updated_at = this.#state.now();
    await this.#state.store.putReplica(r);
  }

  /**
   * An older revision's replica that runs what `revision` runs joins it in
   * place (nothing restarts); a revert keeps it in the endpoints.
   */
  async relabel(r: StoredReplica, revision: number): Promise<void> {
    r.revision = revision;
    if (r.placement !== null) r.placement.retiring_at = null;
    r.updated_at = this.#state.now();
    await this.#state.store.putReplica(r);
  }

  /** A placed replica whose shards all report ready for the first time: `replica_ready`, once. */
  async markReady(r: StoredReplica): Promise<void> {
    const state = this.#state;
    if (r.placement === null) return;
    const now = state.now();
    r.placement.ready_at = now;
    r.updated_at = now;
    await state.store.putReplica(r);
    const nodes = [...new Set(r.placement.shards.map((s) => s.node))].join(", ");
    const n = r.placement.shards.length;
    await state.event(
      "replica_ready",
      `replica/${r.id}`,
      `${n === 1 ? "its shard is" : `all ${n} shards are`} ready on ${nodes} ` +
        `(revision ${replicaRevision(r)})`,
    );
  }

  /** A replica serving again forgets its failures (stored; no event: `replica_ready` told it). */
  async clearFailure(r: StoredReplica): Promise<void> {
    if ((r.failure ?? null) === null) return;
    r.failure = null;
    r.updated_at = this.#state.now();
    await this.#state.store.putReplica(r);
  }

  /**
   * Takes a stored replica back into the books on open: its placement's
   * GPUs allocated again. A placement that no longer fits the inventory (a
   * node or GPU gone) is rebuilt, unless `readOnly` (a follower leaves it to
   * the leader).
   */
  async restore(r: StoredReplica, readOnly: boolean, why: (e: unknown) => string): Promise<void> {
    const state = this.#state;
    state.replicas.set(r.id, r);
    if (r.phase !== "placed" || r.placement === null) return;
    try {
      for (const s of r.placement.shards) {
        state.inventory.allocate({
          node: s.node,
          replica_id: r.id,
          shard_id: s.shard_id,
          deployment: r.deployment,
          gpu_indices: s.gpu_indices,
        });
      }
    } catch (e) {
      state.inventory.releaseReplica(r.id);
      if (!readOnly) await this.rebuild(r, `restored placement is no longer valid: ${why(e)}`);
    }
  }
}

/** A deployment's replicas, by index then id. */
export function replicasOf(state: ControlState, deployment: string): StoredReplica[] {
  return [...state.replicas.values()].filter((r) => r.deployment === deployment)
    .sort((a, b) => a.index - b.index || compareNatural(a.id, b.id));
}

/**
 * Whether two explanations give the same reasons: per profile, whether it
 * fit and how many nodes each reason code turned away. Rewording a summary
 * never makes a replica look newly unschedulable.
 */
export function sameReasons(a: Explanation, b: Explanation): boolean {
  return reasonKey(a) === reasonKey(b);
}

function reasonKey(e: Explanation): string {
  return JSON.stringify(
    e.profiles.map((p) => [
      p.profile,
      p.fits,
      Object.entries(p.counts ?? {}).sort(([x], [y]) => x < y ? -1 : x > y ? 1 : 0),
    ]),
  );
}

function applyChanges(r: StoredReplica, changes: RebuildChanges): void {
  if (changes.revision !== undefined) r.revision = changes.revision;
  if (changes.failure !== undefined) r.failure = changes.failure;
  if (changes.uid !== undefined) r.uid = changes.uid;
}
