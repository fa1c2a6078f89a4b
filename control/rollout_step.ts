/**
 * The reconciler's `roll_out` step (design §6.3): for each deployment with a
 * rollout under way, reads its replicas into the planner's view
 * (control/rollout.ts), acts on the one decision, and records the events:
 * `rollout_step` when a step begins, `rollout_complete`, and on failure
 * `rollout_failed` then `rollout_reverted`, the previous revision's spec
 * coming back as a new revision that is rolled out the same way.
 *
 * @module
 */
import { withSettingsOf } from "../deployment/canonical.ts";
import { indexCluster, place } from "../placement/mod.ts";
import type { Pass } from "./reconciler.ts";
import { planRollout, type RolloutReplica } from "./rollout.ts";
import {
  appendRevision,
  historyOf,
  nextRevision,
  progressDeadlineMs,
  revisionSpec,
  sameWorkload,
  withOutcome,
} from "./rollout_revisions.ts";
import type { ControlState } from "./state.ts";
import {
  deploymentRevision,
  replicaRevision,
  type StoredDeployment,
  type StoredReplica,
} from "./store/store.ts";
import { isReady } from "./views.ts";

/** Places one pending replica now, on the live inventory; true when it was placed. */
export type PlaceNow = (r: StoredReplica) => Promise<boolean>;

/** Runs one decision for every deployment with a rollout under way. */
export async function rollOut(pass: Pass, placeNow: PlaceNow): Promise<void> {
  const { state } = pass;
  // One walk over the replicas, not one per deployment.
  const behind = new Set<string>();
  for (const r of state.replicas.values()) {
    const d = state.deployments.get(r.deployment);
    if (d !== undefined && replicaRevision(r) !== deploymentRevision(d)) behind.add(d.name);
  }
  for (const d of [...state.deployments.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    if (behind.has(d.name)) await relabel(state, d);
    if ((d.rollout ?? null) === null) continue;
    await rollOne(pass, d, placeNow);
  }
}

/**
 * Replicas of an older revision that runs what the current one runs (an
 * undo or a revert back to their spec) join the current revision in place:
 * nothing restarts, since their launches do not change.
 */
async function relabel(state: ControlState, d: StoredDeployment): Promise<void> {
  const current = deploymentRevision(d);
  for (const r of replicasOf(state, d.name)) {
    const rev = replicaRevision(r);
    if (rev === current) continue;
    const spec = revisionSpec(d, rev);
    if (spec === undefined || !sameWorkload(spec, d.spec)) continue;
    r.revision = current;
    // A revert keeps it: back in the endpoints if it was on its way out.
    if (r.placement !== null) r.placement.retiring_at = null;
    r.updated_at = state.now();
    await state.store.putReplica(r);
  }
}

/** A deployment's replicas, by index then id. */
export function replicasOf(state: ControlState, deployment: string): StoredReplica[] {
  return [...state.replicas.values()].filter((r) => r.deployment === deployment)
    .sort((a, b) => a.index - b.index || a.id.localeCompare(b.id));
}

/** The planner's view of one replica. */
export function plannerReplica(
  state: ControlState,
  d: StoredDeployment,
  r: StoredReplica,
): RolloutReplica {
  return {
    id: r.id,
    index: r.index,
    current: replicaRevision(r) === deploymentRevision(d),
    ready: isReady(state, r),
    failed: r.phase === "failed" ? (r.failure?.reason ?? "failed") : null,
  };
}

async function rollOne(pass: Pass, d: StoredDeployment, placeNow: PlaceNow): Promise<void> {
  const { state, now } = pass;
  const rollout = d.rollout!;
  const target = deploymentRevision(d);
  const decision = planRollout({
    desired: d.spec.replicas,
    replicas: replicasOf(state, d.name).map((r) => plannerReplica(state, d, r)),
    step: rollout.step,
    now,
    progressAt: rollout.progress_at,
    deadlineMs: progressDeadlineMs(d.spec),
    revertible: rollout.fallback !== null,
  }, () => fits(state, d));
  const subject = `deployment/${d.name}`;
  switch (decision.kind) {
    case "wait":
      return;
    case "retire": {
      const r = state.replicas.get(decision.id)!;
      if (!await afterGrace(pass, r)) return;
      await removeReplica(
        pass,
        r,
        decision.by === null
          ? `serving nothing; index ${r.index} runs revision ${target}`
          : `replaced by ${decision.by} (revision ${target})`,
      );
      if (decision.by !== null) {
        rollout.steps++;
        rollout.progress_at = now;
        if (rollout.step?.replaced === decision.id) rollout.step = null;
      }
      await putDeployment(state, d);
      state.kick();
      return;
    }
    case "step_done":
      rollout.steps++;
      rollout.progress_at = now;
      rollout.step = null;
      await putDeployment(state, d);
      state.kick();
      return;
    case "surge": {
      const r = await state.addPending(d.name, decision.index, target, true);
      const id = r.id;
      rollout.step = { replaced: decision.replaces, by: id, mode: "surge", started_at: now };
      rollout.progress_at = now;
      await putDeployment(state, d);
      await state.event(
        "rollout_step",
        subject,
        `revision ${target}: replacing ${decision.replaces} by ${id}, started first ` +
          `(free capacity); ${decision.replaces} stops once ${id} is ready`,
      );
      await placeNow(r);
      return;
    }
    case "replace": {
      const r = state.replicas.get(decision.id)!;
      const wasReady = isReady(state, r);
      const announced = (r.placement?.retiring_at ?? null) !== null;
      if (!await afterGrace(pass, r)) {
        if (announced) return;
        // Out of the endpoints now, rebuilt once the grace has passed: the step begins.
        rollout.step = { replaced: r.id, by: r.id, mode: "in_place", started_at: now };
        rollout.progress_at = now;
        await putDeployment(state, d);
        await state.event("rollout_step", subject, inPlaceMessage(target, r.id, true));
        return;
      }
      r.revision = target;
      r.failure = null;
      if (r.phase === "placed") {
        await state.rebuild(r, `rolling out revision ${target}`);
      } else {
        r.phase = "pending";
        r.placement = null;
        r.updated_at = now;
        await state.store.putReplica(r);
      }
      if (announced) return;
      rollout.step = { replaced: r.id, by: r.id, mode: "in_place", started_at: now };
      rollout.progress_at = now;
      await putDeployment(state, d);
      await state.event("rollout_step", subject, inPlaceMessage(target, r.id, wasReady));
      return;
    }
    case "complete": {
      d.history = withOutcome(historyOf(d), target, "complete");
      d.rollout = null;
      await putDeployment(state, d);
      await state.event(
        "rollout_complete",
        subject,
        `revision ${target}: all ${d.spec.replicas} replicas run it (${rollout.steps} ` +
          `${rollout.steps === 1 ? "step" : "steps"}, ${
            Math.round((now - rollout.started_at) / 1000)
          } s)`,
      );
      return;
    }
    case "fail":
      await revert(state, d, decision.reason, now);
      state.kick();
      return;
  }
}

/**
 * A failed rollout: the failed revision is marked so, and its fallback's
 * spec comes back as a new revision (at today's replica count), rolled out
 * as a revert: replicas still on the fallback's spec join it in place and
 * the new ones are replaced.
 */
async function revert(
  state: ControlState,
  d: StoredDeployment,
  reason: string,
  now: number,
): Promise<void> {
  const failed = deploymentRevision(d);
  const fallback = d.rollout!.fallback!;
  const spec = revisionSpec(d, fallback);
  const subject = `deployment/${d.name}`;
  await state.event("rollout_failed", subject, `revision ${failed}: ${reason}`);
  if (spec === undefined) {
    // Only a damaged history lacks it (replicas' revisions are never pruned).
    d.history = withOutcome(historyOf(d), failed, "failed", reason);
    d.rollout = null;
    await putDeployment(state, d);
    return;
  }
  const revision = nextRevision(d);
  const keep = new Set(replicasOf(state, d.name).map(replicaRevision));
  d.history = withOutcome(
    appendRevision(d, {
      revision,
      spec: withSettingsOf(spec, d.spec),
      at: now,
      cause: "revert",
      from: fallback,
    }, keep),
    failed,
    "failed",
    reason,
  );
  d.spec = withSettingsOf(spec, d.spec);
  d.revision = revision;
  d.updated_at = now;
  d.rollout = {
    target: revision,
    fallback: null,
    started_at: now,
    progress_at: now,
    steps: 0,
    step: null,
  };
  await putDeployment(state, d);
  await state.event(
    "rollout_reverted",
    subject,
    `revision ${failed} stopped; revision ${fallback}'s spec is back as revision ${revision}`,
  );
  await relabel(state, d);
}

function inPlaceMessage(target: number, id: string, wasReady: boolean): string {
  return wasReady
    ? `revision ${target}: replacing ${id} in place (no free capacity to start ` +
      `its replacement first; one replica down at a time)`
    : `revision ${target}: replacing ${id} in place (it was serving nothing)`;
}

/**
 * Whether a replica may be stopped now. A ready one first leaves the
 * gateways' endpoints and is stopped only after the state's grace, so no
 * gateway still sends it requests (gateways poll the feed); one that serves
 * nothing may go at once. False means: not yet (it is marked, ask again).
 */
export async function afterGrace(pass: Pass, r: StoredReplica): Promise<boolean> {
  const { state, now } = pass;
  const grace = state.retireGraceMs;
  if (grace <= 0 || r.placement === null || !isReady(state, r)) return true;
  const since = r.placement.retiring_at ?? null;
  if (since === null) {
    r.placement.retiring_at = now;
    r.updated_at = now;
    await state.store.putReplica(r);
    return false;
  }
  return now - since >= grace;
}

/** Whether one more replica of `d`'s current spec would be placed now. */
function fits(state: ControlState, d: StoredDeployment): boolean {
  const index = indexCluster(state.inventory.snapshot());
  return place(index, d.spec, `${d.name}-surge`).status === "placed";
}

/** Removes a replica: its GPUs are freed and its shards leave their nodes' desired states. */
export async function removeReplica(pass: Pass, r: StoredReplica, why: string): Promise<void> {
  const { state } = pass;
  state.touch(r);
  state.inventory.releaseReplica(r.id);
  state.replicas.delete(r.id);
  pass.attempts.delete(r.id);
  await state.store.deleteReplica(r.id);
  await state.event("replica_removed", `replica/${r.id}`, why, r.uid ?? "");
}

async function putDeployment(state: ControlState, d: StoredDeployment): Promise<void> {
  await state.store.putDeployment(d);
}
