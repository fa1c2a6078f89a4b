/**
 * A rollout's pre-pull (issue #25 item 5): a rollout to a new model or
 * model revision first fetches the new revision onto the nodes its old
 * replicas run on, before any replica stops, so the replaced replicas load
 * from the local cache instead of downloading while the deployment runs a
 * replica short. The `roll_out` step (control/rollout_step.ts) asks
 * {@link prepull} before each decision of a rollout that has taken no step
 * yet; while it answers a status, the rollout waits.
 *
 * - The nodes: those of the replicas on an older revision whose model or
 *   commit differs from the target's; only those whose agents report a
 *   model cache and heartbeat (an older agent, an unreachable node, is not
 *   waited for).
 * - The wait ends when every one of them reports the revision held or its
 *   pull failed for good since the rollout began (control/model_pulls.ts
 *   `failPulls`: this rollout does not ask that node again; its replica
 *   fetches the revision as it starts), or an operator cancelled it since
 *   (`llmgw models cancel`: the cancel sticks, this rollout does not ask
 *   that node again either), or once
 *   the deployment's progress deadline has passed since the rollout began
 *   (design §6.3: `rollout.progress_deadline_seconds`, 600 s by default);
 *   the rollout then goes on, its deadline counted from then, and the pulls
 *   not finished go on too. Events: `rollout_prepull` when it starts,
 *   `rollout_prepulled` when it ends, saying which.
 * - The pulls it asks for are stored as any pull (control/model_pulls.ts),
 *   so agents keep fetching across a restart; the wait itself is not: after
 *   a restart the rollout asks again, and nodes that hold the revision
 *   answer at once.
 *
 * @module
 */
import { isLocalModel, shortCommit } from "../deployment/model_revision.ts";
import { givenUp, nodeHolds, requestPull } from "./model_pulls.ts";
import { revisionName } from "../protocol/model_cache_report.ts";
import { replicasOf } from "./replicas.ts";
import { progressDeadlineMs } from "./rollout_revisions.ts";
import type { ControlState } from "./state.ts";
import { deploymentRevision, replicaRevision, type StoredDeployment } from "./store/store.ts";
import { compareNatural } from "../text/natural_order.ts";

/** What a rollout waits on before its first step. */
export interface PrepullStatus {
  /** The hub id. */
  model: string;
  /** The commit. */
  commit: string;
  /** Nodes it is fetched onto. */
  nodes: string[];
  /** Of them, those that hold it. */
  held: string[];
  /** Of them, those whose pull failed for good since the rollout began: not waited for. */
  failed: string[];
  /** Of them, those whose pull an operator cancelled since the rollout began: not waited for. */
  cancelled: string[];
  /** When the rollout goes on without the rest (ms since epoch). */
  until: number;
}

/** Node states whose agents heartbeat: the only ones waited for. */
const HEARD = new Set(["ready", "cordoned", "draining"]);

/** Rollouts whose pre-pull was announced / ended in this process, by `name@revision`. */
const announced = new WeakMap<ControlState, Map<string, "waiting" | "ended">>();

/** The pre-pull `d`'s rollout needs now, without side effects; null when none. */
export function prepullStatus(state: ControlState, d: StoredDeployment): PrepullStatus | null {
  const rollout = d.rollout ?? null;
  const commit = d.model_commit ?? null;
  if (rollout === null || rollout.steps > 0 || rollout.step !== null) return null;
  if (commit === null || isLocalModel(d.spec.model)) return null;
  const model = d.spec.model;
  const target = deploymentRevision(d);
  const nodes = new Set<string>();
  for (const r of replicasOf(state, d.name)) {
    if (replicaRevision(r) === target || r.placement === null) continue;
    if (state.specOf(r)?.model === model && state.commitOf(r) === commit) continue;
    for (const s of r.placement.shards) {
      if (!state.modelCaches.has(s.node)) continue;
      if (!HEARD.has(state.inventory.stateOf(s.node) ?? "lost")) continue;
      nodes.add(s.node);
    }
  }
  if (nodes.size === 0) return null;
  const list = [...nodes].sort(compareNatural);
  const held = list.filter((n) => nodeHolds(state, n, model, commit));
  const parts = state.modelPulls.get(revisionName(model, commit))?.nodes ?? [];
  const gaveUp = parts.filter((e) =>
    nodes.has(e.node) && !held.includes(e.node) && givenUp(e, rollout.started_at)
  );
  return {
    model,
    commit,
    nodes: list,
    held,
    failed: gaveUp.filter((e) => e.state === "failed").map((e) => e.node),
    cancelled: gaveUp.filter((e) => e.state === "cancelled").map((e) => e.node),
    until: rollout.started_at + progressDeadlineMs(d.spec),
  };
}

/** The pre-pull `d`'s rollout waits on at `now`; null when it does not wait. */
export function prepullWaiting(
  state: ControlState,
  d: StoredDeployment,
  now: number,
): PrepullStatus | null {
  const s = prepullStatus(state, d);
  return s !== null && waitedFor(s).length > 0 && now < s.until ? s : null;
}

/** The nodes of `s` neither holding the revision nor given up on. */
function waitedFor(s: PrepullStatus): string[] {
  return s.nodes.filter((n) =>
    !s.held.includes(n) && !s.failed.includes(n) && !s.cancelled.includes(n)
  );
}

/**
 * The pre-pull of `d`'s rollout: asks its nodes for the revision and
 * answers the status while the rollout must wait; null when it may go on.
 * When a wait ends, the rollout's progress is counted from `now`.
 */
export async function prepull(
  state: ControlState,
  d: StoredDeployment,
  now: number,
): Promise<PrepullStatus | null> {
  const status = prepullStatus(state, d);
  if (status === null) return null;
  let seen = announced.get(state);
  if (seen === undefined) announced.set(state, seen = new Map());
  const key = `${d.name}@${deploymentRevision(d)}`;
  const name = `${status.model}@${shortCommit(status.commit)}`;
  const subject = `deployment/${d.name}`;
  const missing = status.nodes.filter((n) => !status.held.includes(n));
  if (prepullWaiting(state, d, now) !== null) {
    await requestPull(state, status.model, status.commit, waitedFor(status), d.rollout!.started_at);
    if (seen.get(key) === undefined) {
      seen.set(key, "waiting");
      await state.event(
        "rollout_prepull",
        subject,
        `revision ${deploymentRevision(d)}: fetching ${name} onto ${
          missing.join(", ")
        } before any replica stops (at most until ${new Date(status.until).toISOString()})`,
      );
      state.kick();
    }
    return status;
  }
  if (seen.get(key) !== "ended") {
    seen.set(key, "ended");
    await state.event(
      "rollout_prepulled",
      subject,
      missing.length === 0
        ? `revision ${deploymentRevision(d)}: ${
          status.nodes.join(", ")
        } hold ${name}; replacing replicas`
        : waitedFor(status).length === 0
        ? `revision ${deploymentRevision(d)}: ${
          givenUpText(status, name)
        }; replacing replicas anyway`
        : `revision ${deploymentRevision(d)}: ${missing.join(", ")} still without ${name} at the ` +
          "progress deadline; replacing replicas anyway (they fetch it as they start)",
    );
    // The wait took no step: the rollout's progress deadline counts from here.
    d.rollout!.progress_at = Math.max(d.rollout!.progress_at, now);
    await state.store.putDeployment(d);
  }
  return null;
}

/** "n1 failed to pull X (llmgw models pulls says why); n2's pull of it was cancelled by an operator". */
function givenUpText(s: PrepullStatus, name: string): string {
  const parts: string[] = [];
  if (s.failed.length > 0) {
    parts.push(`${s.failed.join(", ")} failed to pull ${name} (llmgw models pulls says why)`);
  }
  if (s.cancelled.length > 0) {
    parts.push(
      `${
        s.cancelled.join(", ")
      }: the pull of ${name} was cancelled by an operator (llmgw models cancel)`,
    );
  }
  return parts.join("; ");
}
