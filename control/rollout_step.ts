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
import { compareNatural } from "../text/natural_order.ts";
import { withSettingsOf } from "../deployment/canonical.ts";
import { place, type PlacementResult } from "../placement/mod.ts";
import type { Pass } from "./pass.ts";
import { type ReplicaBook, replicasOf } from "./replicas.ts";
import { planRollout, type RolloutReplica } from "./rollout.ts";
import {
  appendRevision,
  historyOf,
  nextRevision,
  progressDeadlineMs,
  revisionCommit,
  revisionSpec,
  sameRun,
  withOutcome,
} from "./rollout_revisions.ts";
import type { ControlState } from "./state.ts";
import { prepull } from "./rollout_prepull.ts";
import {
  deploymentRevision,
  replicaRevision,
  type StoredDeployment,
  type StoredReplica,
} from "./store/store.ts";
import { isReady } from "./views.ts";

/** Runs one decision for every deployment with a rollout under way. */
export async function rollOut(pass: Pass): Promise<void> {
  const { state } = pass;
  // One walk over the replicas, not one per deployment.
  const behind = new Set<string>();
  for (const r of state.replicas.values()) {
    const d = state.deployments.get(r.deployment);
    if (d !== undefined && replicaRevision(r) !== deploymentRevision(d)) behind.add(d.name);
  }
  for (const d of [...state.deployments.values()].sort((a, b) => compareNatural(a.name, b.name))) {
    if (behind.has(d.name)) await relabel(pass.book, state, d);
    if ((d.rollout ?? null) === null) continue;
    await rollOne(pass, d);
  }
}

/**
 * Replicas of an older revision that runs what the current one runs (an
 * undo or a revert back to their spec) join the current revision in place:
 * nothing restarts, since their launches do not change.
 */
async function relabel(book: ReplicaBook, state: ControlState, d: StoredDeployment): Promise<void> {
  const current = deploymentRevision(d);
  for (const r of replicasOf(state, d.name)) {
    const rev = replicaRevision(r);
    if (rev === current) continue;
    if (!sameRun(d, rev, current)) continue;
    await book.relabel(r, current);
  }
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

async function rollOne(pass: Pass, d: StoredDeployment): Promise<void> {
  const { state, book, now } = pass;
  // A new model revision is fetched onto the old replicas' nodes before any stops.
  if (await prepull(state, d, now) !== null) return;
  const rollout = d.rollout!;
  const target = deploymentRevision(d);
  // "Would one more fit" is a placement on the pass's index, kept for the surge it allows.
  const surge: { result: PlacementResult | null } = { result: null };
  const fits = (index: number): boolean => {
    const id = book.nextPlacementId({ id: book.freshId(d.name, index, target, true) });
    surge.result = place(book.index(), d.spec, id, { detail: "grouped" });
    return surge.result.status === "placed";
  };
  const decision = planRollout({
    desired: d.spec.replicas,
    replicas: replicasOf(state, d.name).map((r) => plannerReplica(state, d, r)),
    step: rollout.step,
    now,
    progressAt: rollout.progress_at,
    deadlineMs: progressDeadlineMs(d.spec),
    revertible: rollout.fallback !== null,
  }, fits);
  const subject = `deployment/${d.name}`;
  switch (decision.kind) {
    case "wait":
      return;
    case "retire": {
      const r = state.replicas.get(decision.id)!;
      if (!await book.retire(r)) return;
      await book.remove(
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
      const placed = surge.result;
      if (placed?.status !== "placed") return; // planRollout surges only when it fits
      const r = await book.addPending(d.name, decision.index, target, true);
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
      await book.place(r, placed);
      return;
    }
    case "replace": {
      const r = state.replicas.get(decision.id)!;
      const wasReady = isReady(state, r);
      const announced = (r.placement?.retiring_at ?? null) !== null;
      if (!await book.retire(r)) {
        if (announced) return;
        // Out of the endpoints now, rebuilt once the grace has passed: the step begins.
        rollout.step = { replaced: r.id, by: r.id, mode: "in_place", started_at: now };
        rollout.progress_at = now;
        await putDeployment(state, d);
        await state.event("rollout_step", subject, inPlaceMessage(target, r.id, true));
        return;
      }
      const changes = { revision: target, failure: null };
      if (r.phase === "placed") await book.rebuild(r, `rolling out revision ${target}`, changes);
      else await book.requeue(r, changes);
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
      await revert(book, state, d, decision.reason, now);
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
  book: ReplicaBook,
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
      commit: revisionCommit(d, fallback),
    }, keep),
    failed,
    "failed",
    reason,
  );
  d.model_commit = revisionCommit(d, fallback);
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
  await relabel(book, state, d);
}

function inPlaceMessage(target: number, id: string, wasReady: boolean): string {
  return wasReady
    ? `revision ${target}: replacing ${id} in place (no free capacity to start ` +
      `its replacement first; one replica down at a time)`
    : `revision ${target}: replacing ${id} in place (it was serving nothing)`;
}

async function putDeployment(state: ControlState, d: StoredDeployment): Promise<void> {
  await state.store.putDeployment(d);
}
