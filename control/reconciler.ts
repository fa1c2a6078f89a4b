/**
 * The reconciler: one pass brings placements in line with the deployments
 * and the inventory. A pass is the list of named steps below, run in order
 * under the state's lock; each step is a small function of the pass, so
 * reading one teaches all (the shape of Nomad's scheduler stack).
 *
 * @module
 */
import { noPorts } from "../engines/launch.ts";
import { applyPlacement, type ClusterIndex, indexCluster, place } from "../placement/mod.ts";
import type { DesiredStates } from "./desired.ts";
import { errorMessage } from "./errors.ts";
import { failedAgain, givenUpFailure, placeAvoiding } from "./replica_failures.ts";
import { recordLastSeen } from "./last_seen.ts";
import { transitionEvent } from "./nodes.ts";
import { progressDeadlineMs } from "./rollout_revisions.ts";
import { afterGrace, removeReplica, rollOut } from "./rollout_step.ts";
import type { ControlState } from "./state.ts";
import { deploymentRevision, replicaRevision, type StoredReplica } from "./store/store.ts";
import { isReady } from "./views.ts";

export { MAX_PERMANENT_FAILURES } from "./replica_failures.ts";

/** Placement outcomes since start, for /metrics. */
export interface PlacementCounters {
  /** Replicas placed. */
  placements: number;
  /** Placement attempts that found no fit (new explanations only). */
  unschedulable: number;
}

/** What a step of a pass works on. */
export interface Pass {
  /** The books. */
  state: ControlState;
  /** Desired states, published at the end of the pass. */
  desired: DesiredStates;
  /** Placement counters. */
  counters: PlacementCounters;
  /** Attempt numbers by replica id: a new placement gets a new shard id. */
  attempts: Map<string, number>;
  /** Rebuilds in a row after a shard failure, by replica id, until it is ready (crash loops). */
  rebuilds: Map<string, number>;
  /** Draining nodes already announced as drained. */
  drained: Set<string>;
  /** The time of this pass. */
  now: number;
}

/** One named step of a pass. */
export interface ReconcileStep {
  /** The step's name, for logs. */
  name: string;
  /** Runs the step. */
  run(pass: Pass): Promise<void>;
}

/** Nodes whose heartbeats stopped become unreachable, then lost. */
async function refreshLiveness(pass: Pass): Promise<void> {
  for (const t of pass.state.inventory.refresh(pass.now)) {
    await transitionEvent(pass.state, t.from, t.to, t.node);
  }
}

/**
 * Replicas are rebuilt whole: a shard on a lost or draining node, or a shard
 * reported failed. A failure the agent marks permanent (the engine refused
 * the shard, or it crash-looped) moves the replica to other nodes a few
 * times, then, or at once when no other node fits, the replica is `failed`
 * until its deployment changes (replica_failures.ts). A replica whose shards
 * are all ready forgets its failures.
 */
async function rebuildBroken(pass: Pass): Promise<void> {
  const { state } = pass;
  for (const r of [...state.replicas.values()]) {
    if (r.phase !== "placed" || r.placement === null) continue;
    // A permanent failure of any shard counts, even when another shard's
    // transient failure comes first: else a multi-node replica is rebuilt forever.
    const permanent = r.placement.shards.map((s) => ({
      s,
      f: state.reports.get(s.node)?.get(s.shard_id),
    })).find(({ f }) => f?.state === "failed" && f.last_failure?.permanent === true);
    let allReady = true;
    for (const s of r.placement.shards) {
      const node = state.inventory.stateOf(s.node);
      const report = state.reports.get(s.node)?.get(s.shard_id);
      if (report?.state !== "ready") allReady = false;
      if (node === undefined || node === "lost") {
        await state.rebuild(r, `node ${s.node} is ${node ?? "gone"}`);
        break;
      }
      if (node === "draining") {
        await drainReplica(pass, r, s.node);
        break;
      }
      if (report?.state !== "failed") continue;
      const f = report.last_failure;
      if (permanent !== undefined) {
        await givenUpFailure(
          pass,
          r,
          permanent.s.shard_id,
          permanent.s.node,
          permanent.f!.last_failure!,
        );
      } else {
        await failedAgain(pass, r, s.shard_id, s.node, f);
      }
      break;
    }
    if (allReady) pass.rebuilds.delete(r.id);
    if (
      allReady && state.replicas.has(r.id) && r.phase === "placed" && (r.failure ?? null) !== null
    ) {
      r.failure = null;
      r.updated_at = pass.now;
      await state.store.putReplica(r);
    }
  }
}

/**
 * A replica on a draining node moves with no gap when capacity allows: its
 * replacement (same index, current revision) starts elsewhere first, and it
 * stops once the replacement is ready, or once the replacement cannot be
 * placed, failed, or missed the progress deadline (a drain always ends).
 * Without free capacity it is rebuilt at once, as on a lost node.
 */
async function drainReplica(pass: Pass, r: StoredReplica, node: string): Promise<void> {
  const { state, now } = pass;
  const d = state.deployments.get(r.deployment);
  if (d === undefined) return;
  const replacement = [...state.replicas.values()].find((x) =>
    x.deployment === r.deployment && x.index === r.index && x.id !== r.id &&
    !(x.placement?.shards ?? []).some((s) => state.inventory.stateOf(s.node) === "draining")
  );
  if (replacement === undefined) {
    const index = indexCluster(state.inventory.snapshot());
    if (place(index, d.spec, `${r.id}-drain`).status !== "placed") {
      await state.rebuild(
        r,
        `node ${node} is draining (no free capacity to start a replacement first)`,
      );
      return;
    }
    const y = await state.addPending(d.name, r.index, deploymentRevision(d), true);
    const id = y.id;
    await state.event(
      "replica_rebuilding",
      `replica/${r.id}`,
      `node ${node} is draining: starting ${id} elsewhere first; ${r.id} stops once it is ready`,
    );
    await placeReplica(pass, y, index);
    return;
  }
  const late = now - replacement.created_at > progressDeadlineMs(d.spec);
  if (isReady(state, replacement)) {
    if (!await afterGrace(pass, r)) return;
    await removeReplica(pass, r, `node ${node} is draining; replaced by ${replacement.id}`);
  } else if (replacement.phase !== "placed" || late) {
    await removeReplica(
      pass,
      r,
      `node ${node} is draining; its replacement ${replacement.id} is ` +
        (replacement.phase === "failed"
          ? "failed"
          : replacement.phase === "pending"
          ? "not placed"
          : "not ready within the progress deadline"),
    );
  }
}

/** Replica records follow each deployment's replica count. */
async function followReplicaCounts(pass: Pass): Promise<void> {
  const { state } = pass;
  for (const r of [...state.replicas.values()]) {
    const d = state.deployments.get(r.deployment);
    if (d !== undefined && r.index < d.spec.replicas) continue;
    await removeReplica(pass, r, d === undefined ? "deployment deleted" : "scaled down");
  }
  const held = new Set([...state.replicas.values()].map((r) => `${r.deployment}/${r.index}`));
  for (const d of state.deployments.values()) {
    // Indices, not ids: during a rollout an index may be held by a replacement's own id.
    for (let i = 0; i < d.spec.replicas; i++) {
      if (held.has(`${d.name}/${i}`)) continue;
      await state.addPending(d.name, i, deploymentRevision(d), false);
    }
  }
}

/**
 * Pending replicas are placed on the live inventory one after another, each
 * seeing the GPUs the ones before it took. Its ports come later, from the
 * agents that allocate them.
 */
async function placePending(pass: Pass): Promise<void> {
  const { state } = pass;
  const pending = [...state.replicas.values()].filter((r) => r.phase === "pending");
  if (pending.length === 0) return;
  const index = indexCluster(state.inventory.snapshot());
  for (const r of pending) await placeReplica(pass, r, index);
}

/**
 * Places one pending replica on `index` (the live inventory, with this
 * pass's earlier placements applied), on its own revision's spec; true
 * when it was placed.
 */
async function placeReplica(
  pass: Pass,
  r: StoredReplica,
  index: ClusterIndex = indexCluster(pass.state.inventory.snapshot()),
): Promise<boolean> {
  const { state, now } = pass;
  const d = state.specOf(r);
  if (d === undefined) return false;
  const attempt = (pass.attempts.get(r.id) ?? 0) + 1;
  // Grouped reasons: what `llmgw explain` shows, cheap at any cluster size.
  const result = placeAvoiding(state, r, d, attempt) ??
    place(index, d, `${r.id}.${attempt}`, { detail: "grouped" });
  if (result.status === "placed") {
    applyPlacement(index, d.name, result.shards);
    for (const s of result.shards) {
      state.inventory.allocate({
        node: s.node,
        replica_id: r.id,
        shard_id: s.shard_id,
        deployment: d.name,
        gpu_indices: s.gpu_indices,
      });
    }
    pass.attempts.set(r.id, attempt);
    r.phase = "placed";
    // Ports are the agents' to allocate: known once they report them.
    r.placement = { ...result, ports: noPorts() };
    r.explanation = result.explanation;
    r.updated_at = now;
    state.touch(r);
    await state.store.putReplica(r);
    pass.counters.placements++;
    await state.event("replica_placed", `replica/${r.id}`, result.explanation.summary);
    return true;
  } else if (r.explanation?.summary !== result.explanation.summary) {
    r.explanation = result.explanation;
    r.updated_at = now;
    await state.store.putReplica(r);
    pass.counters.unschedulable++;
    await state.event("replica_unschedulable", `replica/${r.id}`, result.explanation.summary);
  }
  return false;
}

/**
 * A placed replica whose shards all report ready for the first time since
 * its placement is announced once (`replica_ready`); the time is stored
 * with the placement, so a restart does not announce it again.
 */
async function announceReady(pass: Pass): Promise<void> {
  const { state, now } = pass;
  for (const r of state.replicas.values()) {
    if (r.placement === null || (r.placement.ready_at ?? null) !== null) continue;
    if (!isReady(state, r)) continue;
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
}

/** A draining node whose replicas have all moved off is drained: said once. */
async function announceDrained(pass: Pass): Promise<void> {
  const { state, drained } = pass;
  for (const n of state.nodes.values()) {
    if (n.intent !== "draining") {
      drained.delete(n.id);
      continue;
    }
    const held = state.inventory.getNode(n.id)?.allocations.length ?? 0;
    if (held === 0 && !drained.has(n.id)) {
      drained.add(n.id);
      await state.event(
        "node_drained",
        `node/${n.id}`,
        "all replicas moved off; the node can be serviced",
      );
    }
  }
}

/** Only nodes whose shards changed get a new desired state. */
function publishDesired(pass: Pass): Promise<void> {
  return pass.desired.publishDirty();
}

/** A pass, in order. */
export const RECONCILE_STEPS: readonly ReconcileStep[] = [
  { name: "refresh_liveness", run: refreshLiveness },
  { name: "announce_ready", run: announceReady },
  { name: "rebuild_broken", run: rebuildBroken },
  { name: "follow_replica_counts", run: followReplicaCounts },
  { name: "roll_out", run: (pass) => rollOut(pass, (r) => placeReplica(pass, r)) },
  { name: "place_pending", run: placePending },
  { name: "announce_drained", run: announceDrained },
  { name: "publish_desired", run: publishDesired },
  { name: "record_last_seen", run: async (pass) => void await recordLastSeen(pass.state) },
];

/** Debounce of a kick: changes made together get one pass. */
const KICK_DELAY_MS = 20;

/** Runs passes: on a period, and soon after a change asks for one. */
export class Reconciler {
  /** Placement outcomes since start. */
  readonly counters: PlacementCounters = { placements: 0, unschedulable: 0 };
  readonly #state: ControlState;
  readonly #desired: DesiredStates;
  readonly #periodMs: number;
  readonly #attempts = new Map<string, number>();
  readonly #rebuilds = new Map<string, number>();
  readonly #drained = new Set<string>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #kickTimer: ReturnType<typeof setTimeout> | null = null;
  #running = false;

  /** Creates the reconciler; `periodMs` between passes nobody asked for. */
  constructor(state: ControlState, desired: DesiredStates, periodMs: number) {
    this.#state = state;
    this.#desired = desired;
    this.#periodMs = periodMs;
    state.kick = () => this.#kick();
  }

  /** Remembers a restored placement's attempt number, so the next one gets a new shard id. */
  restoreAttempt(replicaId: string, attempt: number): void {
    this.#attempts.set(replicaId, attempt);
  }

  /** One pass, alone under the lock. */
  reconcile(): Promise<void> {
    return this.#state.locked(async () => {
      // A control plane whose leadership lapsed acts on nothing (its writes would be refused).
      if (!this.#state.leading()) return;
      const pass: Pass = {
        state: this.#state,
        desired: this.#desired,
        counters: this.counters,
        attempts: this.#attempts,
        rebuilds: this.#rebuilds,
        drained: this.#drained,
        now: this.#state.now(),
      };
      for (const step of RECONCILE_STEPS) await step.run(pass);
    });
  }

  /** Starts the periodic passes. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const loop = async () => {
      if (!this.#running) return;
      await this.#pass();
      if (this.#running) this.#timer = setTimeout(loop, this.#periodMs);
    };
    this.#timer = setTimeout(loop, 0);
  }

  /** Stops the passes; resolves once a pass that is running has finished. */
  stop(): Promise<void> {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    if (this.#kickTimer !== null) clearTimeout(this.#kickTimer);
    this.#timer = null;
    this.#kickTimer = null;
    return this.#state.locked(() => Promise.resolve());
  }

  #pass(): Promise<void> {
    return this.reconcile().catch((e) => this.#state.warn("reconcile failed", errorMessage(e)));
  }

  /** Asks for a pass soon (debounced), only while running. */
  #kick(): void {
    if (!this.#running || this.#kickTimer !== null) return;
    this.#kickTimer = setTimeout(() => {
      this.#kickTimer = null;
      this.#pass();
    }, KICK_DELAY_MS);
  }
}
