/**
 * Giving up pulls (control/model_pulls.ts): an operator's `llmgw models
 * cancel PULL [--nodes …]` (a removed node's parts are the sweep's:
 * control/model_pull_sweep.ts). A cancelled
 * node's desired state drops the pull, so its agent stops fetching it
 * (what it holds stays until evicted). An operator's cancel sticks: a
 * rollout's pre-pull does not ask that node again, and stops waiting for it
 * (control/rollout_prepull.ts). As every change to a pull, the new record
 * is stored before memory and desired states follow.
 *
 * @module
 */
import { shortCommit } from "../deployment/model_revision.ts";
import type { CancelPullAnswer, CancelPullBody } from "../protocol/model_admin.ts";
import { ConflictError, NotFoundError } from "./errors.ts";
import type { ModelPull, PullNode } from "./model_pull_record.ts";
import {
  finish,
  OPERATOR_CANCEL_REASON,
  pullViews,
  storePull,
  waitingNodes,
} from "./model_pulls.ts";
import { sweepPulls } from "./model_pull_sweep.ts";
import type { ControlState } from "./state.ts";

/**
 * The pull `ref` names: its id, or `org/name@` a commit prefix that one
 * pull of the model starts with (`llmgw models pulls` shows 7 digits).
 *
 * @throws {NotFoundError} When none matches.
 * @throws {ConflictError} When the prefix matches more than one.
 */
export function findPull(state: ControlState, ref: string): ModelPull {
  const exact = state.modelPulls.get(ref);
  if (exact !== undefined) return exact;
  const at = ref.lastIndexOf("@");
  const [model, prefix] = [ref.slice(0, at), ref.slice(at + 1)];
  const found = [...state.modelPulls.values()].filter((p) =>
    p.model === model && p.commit.startsWith(prefix)
  );
  if (found.length === 0) throw new NotFoundError(`no pull ${ref} (see llmgw models pulls)`);
  if (found.length > 1) {
    throw new ConflictError(
      `pull ${ref} is ambiguous: it names ${
        found.map((p) => p.id).sort().join(", ")
      }; give more of the commit`,
      "pull",
    );
  }
  return found[0];
}

/** Why a node's part is not cancelled: it is no longer asked. */
function unchangedWhy(entry: PullNode): string {
  switch (entry.state) {
    case "done":
      return `${entry.node} holds it already`;
    case "failed":
      return `${entry.node} failed already (${entry.kind ?? "failed"})`;
    default:
      return `${entry.node} was cancelled already (${entry.reason ?? "cancelled"})`;
  }
}

/**
 * `POST /v1/models/pulls/cancel`: stops asking the nodes named (or every
 * node still asked) for a pull, and says which nodes named were no longer
 * asked and why.
 *
 * @throws {NotFoundError} For an unknown pull, or a node it never asked.
 * @throws {ConflictError} For an ambiguous commit prefix, or when no node named is still asked.
 */
export function cancelPull(state: ControlState, body: CancelPullBody): Promise<CancelPullAnswer> {
  return state.locked(async () => {
    const stored = findPull(state, body.pull);
    const nodes = body.nodes ?? waitingNodes(stored);
    for (const [i, node] of nodes.entries()) {
      if (!stored.nodes.some((n) => n.node === node)) {
        throw new NotFoundError(`node ${node} (nodes[${i}]) was never asked to pull ${stored.id}`);
      }
    }
    const named = stored.nodes.filter((n) => nodes.includes(n.node));
    const unchanged = named.filter((n) => n.state !== "requested").map(unchangedWhy);
    if (named.every((n) => n.state !== "requested")) {
      throw new ConflictError(
        `Cannot cancel pull ${stored.id}: ` +
          (unchanged.length === 0 ? "no node is asked for it any more" : unchanged.join("; ")),
      );
    }
    const now = state.now();
    const pull = structuredClone(stored);
    const cancelled: string[] = [];
    for (const entry of pull.nodes) {
      if (entry.state !== "requested" || !nodes.includes(entry.node)) continue;
      Object.assign(entry, {
        state: "cancelled",
        finished_at: now,
        reason: OPERATOR_CANCEL_REASON,
      });
      cancelled.push(entry.node);
    }
    finish(pull, now);
    await storePull(state, pull, cancelled);
    for (const node of cancelled) {
      await state.event(
        "model_pull_cancelled",
        `node/${node}`,
        `operator: stopped fetching ${pull.model}@${shortCommit(pull.commit)} here`,
      );
    }
    state.kick();
    const view = pullViews(state).find((p) => p.id === pull.id)!;
    await sweepPulls(state, now);
    return { ...view, cancelled, unchanged };
  });
}
