/**
 * Housekeeping of model pulls (control/model_pulls.ts): the parts still
 * `requested` of nodes that no longer exist are cancelled (`node removed`),
 * and finished pulls past {@link FINISHED_PULL_TTL_MS} or beyond the newest
 * {@link FINISHED_PULLS_KEPT} are deleted.
 *
 * A sweep runs when a node is removed, when an operator cancels, when a
 * heartbeat settles a pull, and otherwise at most once a minute, from
 * heartbeats and reconcile passes. Like every pull change it writes to the
 * store first; a write the store refuses (PostgreSQL lost, leadership gone,
 * a record it will not take) is skipped, the others go on, the refusals are
 * one warning, and each is left to the next sweep, never failing the
 * removal, cancel or heartbeat that set it off. So a removed node's part that the store
 * would not cancel at the removal is cancelled by the next sweep instead of
 * staying `requested` until an operator cancels it.
 *
 * @module
 */
import { errorMessage } from "../text/error_message.ts";
import { finish, pullList, storePull } from "./model_pulls.ts";
import type { ControlState } from "./state.ts";

/** Finished pulls kept for listing, newest first; older ones are deleted. */
export const FINISHED_PULLS_KEPT = 100;

/** How long a finished pull stays listed. */
export const FINISHED_PULL_TTL_MS = 24 * 3_600_000;

/** The reason of the part of a node that was removed (`llmgw delete node`). */
export const NODE_REMOVED_REASON = "node removed";

/** The least time between two sweeps that nothing asked for. */
const SWEEP_EVERY_MS = 60_000;

/** When each control state last swept. */
const lastSweep = new WeakMap<ControlState, number>();

/**
 * Sweeps when `due` (something just finished) or a minute after the last
 * sweep: heartbeats and passes come often.
 */
export async function sweepPullsIfDue(state: ControlState, now: number, due = false) {
  if (due || now - (lastSweep.get(state) ?? -Infinity) >= SWEEP_EVERY_MS) {
    await sweepPulls(state, now);
  }
}

/** Writes named in a sweep's warning; the rest are counted. */
const REFUSALS_NAMED = 10;

/** A write of the sweep that the store refused. */
interface Refusal {
  /** `cancel model pull … on removed node …` or `delete finished model pull …`. */
  what: string;
  error: string;
}

/**
 * Cancels the parts of removed nodes, then deletes old finished pulls;
 * never throws for the store. A write the store refuses is skipped, not the
 * rest: a record it refuses for good (a constraint, a size) must not hold
 * back every other pull's sweep. The refusals make one warning per sweep.
 */
export async function sweepPulls(state: ControlState, now: number): Promise<void> {
  lastSweep.set(state, now);
  const refused: Refusal[] = [];
  await cancelRemovedNodes(state, now, refused);
  await prunePulls(state, now, refused);
  if (refused.length === 0) return;
  const named = refused.slice(0, REFUSALS_NAMED).map((r) => r.what);
  const more = refused.length - named.length;
  state.warn(
    `the store refused ${refused.length} model pull write${refused.length === 1 ? "" : "s"} ` +
      `of the sweep: ${named.join("; ")}${more > 0 ? `; and ${more} more` : ""}; ` +
      "the next sweep tries again",
    [...new Set(refused.map((r) => r.error))].slice(0, REFUSALS_NAMED).join("; "),
  );
}

/** Cancels every part still `requested` of a node the control plane no longer knows. */
async function cancelRemovedNodes(
  state: ControlState,
  now: number,
  refused: Refusal[],
): Promise<void> {
  for (const stored of [...state.modelPulls.values()]) {
    const gone = (node: string) => !state.nodes.has(node);
    if (!stored.nodes.some((n) => n.state === "requested" && gone(n.node))) continue;
    const pull = structuredClone(stored);
    const cancelled: string[] = [];
    for (const entry of pull.nodes) {
      if (entry.state !== "requested" || !gone(entry.node)) continue;
      Object.assign(entry, { state: "cancelled", finished_at: now, reason: NODE_REMOVED_REASON });
      cancelled.push(entry.node);
    }
    finish(pull, now);
    try {
      // No desired state to mark: the nodes are gone.
      await storePull(state, pull, []);
    } catch (e) {
      refused.push({
        what: `cancel model pull ${pull.id} on removed node ${cancelled.join(", ")}`,
        error: errorMessage(e),
      });
    }
  }
}

/** Deletes finished pulls past {@link FINISHED_PULL_TTL_MS} or {@link FINISHED_PULLS_KEPT}. */
async function prunePulls(state: ControlState, now: number, refused: Refusal[]): Promise<void> {
  const finished = pullList(state).filter((p) => p.finished_at !== null);
  for (const [i, p] of finished.entries()) {
    if (i < FINISHED_PULLS_KEPT && now - p.finished_at! < FINISHED_PULL_TTL_MS) continue;
    try {
      await state.store.deleteModelPull(p.id);
    } catch (e) {
      refused.push({ what: `delete finished model pull ${p.id}`, error: errorMessage(e) });
      continue;
    }
    state.modelPulls.delete(p.id);
  }
}
