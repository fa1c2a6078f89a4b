/**
 * The reconciler: one pass brings placements in line with the deployments
 * and the inventory. A pass is the list of named steps below, run in order
 * under the state's lock; each step is a small function of the pass, so
 * reading one teaches all (the shape of Nomad's scheduler stack).
 *
 * @module
 */
import { place } from "../placement/mod.ts";
import type { DesiredStates } from "./desired.ts";
import { errorMessage } from "./errors.ts";
import { deploymentFacts } from "./model_facts_book.ts";
import { recordLastSeen } from "./last_seen.ts";
import { transitionEvent } from "./nodes.ts";
import type { Pass, ReconcileStep } from "./pass.ts";
import {
  diskFullFailure,
  failedAgain,
  givenUpFailure,
  isDiskFull,
  placeAvoiding,
} from "./replica_failures.ts";
import type { PlacementCounters, ReplicaBook } from "./replicas.ts";
import { sweepPullsIfDue } from "./model_pull_sweep.ts";
import { progressDeadlineMs } from "./rollout_revisions.ts";
import { rollOut } from "./rollout_step.ts";
import type { ControlState } from "./state.ts";
import { deploymentRevision, type StoredReplica } from "./store/store.ts";
import { isReady } from "./views.ts";
import type { Wake } from "./wake.ts";

export { MAX_PERMANENT_FAILURES } from "./replica_failures.ts";
export type { Pass, ReconcileStep } from "./pass.ts";
export type { PlacementCounters } from "./replicas.ts";

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
 * until its deployment changes (replica_failures.ts); a model cache out of
 * disk puts it back to pending instead. A replica whose shards
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
    })).find(({ f }) =>
      f?.state === "failed" && f.last_failure?.permanent === true && !isDiskFull(f.last_failure)
    );
    let allReady = true;
    for (const s of r.placement.shards) {
      const node = state.inventory.stateOf(s.node);
      const report = state.reports.get(s.node)?.get(s.shard_id);
      if (report?.state !== "ready") allReady = false;
      if (node === undefined || node === "lost") {
        await pass.book.rebuild(r, `node ${s.node} is ${node ?? "gone"}`);
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
      } else if (f !== null && isDiskFull(f)) {
        await diskFullFailure(pass, r, s.shard_id, s.node, f);
      } else {
        await failedAgain(pass, r, s.shard_id, s.node, f);
      }
      break;
    }
    if (allReady) pass.rebuilds.delete(r.id);
    if (allReady && state.replicas.has(r.id) && r.phase === "placed") {
      await pass.book.clearFailure(r);
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
  const { state, book, now } = pass;
  const d = state.deployments.get(r.deployment);
  if (d === undefined) return;
  const replacement = [...state.replicas.values()].find((x) =>
    x.deployment === r.deployment && x.index === r.index && x.id !== r.id &&
    !(x.placement?.shards ?? []).some((s) => state.inventory.stateOf(s.node) === "draining")
  );
  if (replacement === undefined) {
    // Placed once, on the pass's index: where it goes, or that it fits nowhere now.
    const revision = deploymentRevision(d);
    const id = book.freshId(d.name, r.index, revision, true);
    const result = place(book.index(), d.spec, book.nextPlacementId({ id }), {
      detail: "grouped",
    });
    if (result.status !== "placed") {
      await book.rebuild(
        r,
        `node ${node} is draining (no free capacity to start a replacement first)`,
      );
      return;
    }
    const y = await book.addPending(d.name, r.index, revision, true);
    await state.event(
      "replica_rebuilding",
      `replica/${r.id}`,
      `node ${node} is draining: starting ${y.id} elsewhere first; ${r.id} stops once it is ready`,
    );
    await book.place(y, result);
    return;
  }
  const late = now - replacement.created_at > progressDeadlineMs(d.spec);
  if (isReady(state, replacement)) {
    if (!await book.retire(r)) return;
    await book.remove(r, `node ${node} is draining; replaced by ${replacement.id}`);
  } else if (replacement.phase !== "placed" || late) {
    await book.remove(
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
    await pass.book.remove(r, d === undefined ? "deployment deleted" : "scaled down");
  }
  const held = new Set([...state.replicas.values()].map((r) => `${r.deployment}/${r.index}`));
  for (const d of state.deployments.values()) {
    // Indices, not ids: during a rollout an index may be held by a replacement's own id.
    for (let i = 0; i < d.spec.replicas; i++) {
      if (held.has(`${d.name}/${i}`)) continue;
      await pass.book.addPending(d.name, i, deploymentRevision(d), false);
    }
  }
}

/**
 * Pending replicas are placed on the pass's index one after another, each
 * seeing the GPUs the ones before it took. Its ports come later, from the
 * agents that allocate them.
 */
async function placePending(pass: Pass): Promise<void> {
  for (const r of [...pass.state.replicas.values()]) {
    if (r.phase === "pending") await placeOrExplain(pass, r);
  }
}

/**
 * Places one pending replica on its own revision's spec, away from nodes
 * that refused it for good when it fits elsewhere, or records why it fits
 * nowhere (grouped reasons: what `llmgw explain` shows, cheap at any size).
 */
async function placeOrExplain(pass: Pass, r: StoredReplica): Promise<void> {
  const { state, book } = pass;
  const d = state.specOf(r);
  if (d === undefined) return;
  const index = book.index();
  const id = book.nextPlacementId(r);
  const result = placeAvoiding(index, r, d, id) ?? place(index, d, id, { detail: "grouped" });
  if (result.status === "placed") await book.place(r, result);
  else await book.unschedulable(r, result);
}

/**
 * A placed replica whose shards all report ready for the first time since
 * its placement is announced once (`replica_ready`); the time is stored
 * with the placement, so a restart does not announce it again.
 */
async function announceReady(pass: Pass): Promise<void> {
  const { state } = pass;
  for (const r of state.replicas.values()) {
    if (r.placement === null || (r.placement.ready_at ?? null) !== null) continue;
    if (isReady(state, r)) await pass.book.markReady(r);
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

/**
 * Starts resolving unresolved model revisions and learning the facts of
 * each deployment's model at its commit, both in the background.
 */
function resolveModels(pass: Pass): Promise<void> {
  const state = pass.state;
  state.modelCommits.start(state);
  state.modelFacts.learnMissing(deploymentFacts(state.deployments.values()), () => state.kick());
  return Promise.resolve();
}

/** Only nodes whose shards changed get a new desired state. */
function publishDesired(pass: Pass): Promise<void> {
  return pass.desired.publishDirty();
}

/** A pass, in order. */
export const RECONCILE_STEPS: readonly ReconcileStep[] = [
  // Tries in the background; a pass never waits on the hub (control/model_commits.ts).
  // Then the facts of each deployment's commit, once resolved (control/model_facts_book.ts).
  { name: "resolve_models", run: resolveModels },
  { name: "refresh_liveness", run: refreshLiveness },
  { name: "announce_ready", run: announceReady },
  { name: "rebuild_broken", run: rebuildBroken },
  { name: "follow_replica_counts", run: followReplicaCounts },
  { name: "roll_out", run: rollOut },
  { name: "place_pending", run: placePending },
  { name: "announce_drained", run: announceDrained },
  // At most once a minute: removed nodes' pull parts, old finished pulls (control/model_pull_sweep.ts).
  { name: "sweep_pulls", run: (pass) => sweepPullsIfDue(pass.state, pass.now) },
  { name: "publish_desired", run: publishDesired },
  { name: "record_last_seen", run: async (pass) => void await recordLastSeen(pass.state) },
];

/** Debounce of a kick: changes made together get one pass. */
const KICK_DELAY_MS = 20;

/** What a reconciler works on, handed in by the control plane (control_plane.ts). */
export interface ReconcilerParts {
  /** The books. */
  state: ControlState;
  /** The replica book. */
  book: ReplicaBook;
  /** Desired states, published at the end of each pass. */
  desired: DesiredStates;
  /** What services kick after a change: the reconciler answers it with a pass soon. */
  wake: Wake;
}

/** Runs passes: on a period, and soon after a change asks for one. */
export class Reconciler {
  readonly #state: ControlState;
  readonly #book: ReplicaBook;
  readonly #desired: DesiredStates;
  readonly #periodMs: number;
  readonly #rebuilds = new Map<string, number>();
  readonly #drained = new Set<string>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #kickTimer: ReturnType<typeof setTimeout> | null = null;
  #running = false;

  /** Creates the reconciler; `periodMs` between passes nobody asked for. */
  constructor(parts: ReconcilerParts, periodMs: number) {
    this.#state = parts.state;
    this.#book = parts.book;
    this.#desired = parts.desired;
    this.#periodMs = periodMs;
    parts.wake.answerWith(() => this.#kick());
  }

  /** Placement outcomes since start. */
  get counters(): PlacementCounters {
    return this.#book.counters;
  }

  /** One pass, alone under the lock. */
  reconcile(): Promise<void> {
    return this.#state.locked(async () => {
      // A control plane whose leadership lapsed acts on nothing (its writes would be refused).
      if (!this.#state.leading()) return;
      const pass: Pass = {
        state: this.#state,
        book: this.#book,
        desired: this.#desired,
        rebuilds: this.#rebuilds,
        drained: this.#drained,
        now: this.#state.now(),
      };
      this.#book.beginPass();
      try {
        for (const step of RECONCILE_STEPS) await step.run(pass);
      } finally {
        this.#book.endPass();
      }
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
