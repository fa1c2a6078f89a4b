/**
 * Replicas whose shard an agent gave up on (design §5.4, §9.1): the engine
 * refused its arguments, or the shard crash-looped past the supervisor's
 * limit. Retrying on that node cannot help, so the replica is rebuilt on
 * other nodes, a bounded number of times; when no other node fits, or the
 * bound is reached, it is marked failed with the reason, never left pending
 * or bouncing on the node that refused it.
 *
 * @module
 */
import type { Deployment } from "../deployment/schema.ts";
import { indexCluster, place } from "../placement/mod.ts";
import type { Placed, PlacementResult } from "../placement/types.ts";
import { failureTail, shardFailureMessage } from "./events.ts";
import type { Pass } from "./reconciler.ts";
import type { ControlState } from "./state.ts";
import type { StoredReplica } from "./store/store.ts";

/** Placements in a row whose shard an agent gave up on, before the replica is failed. */
export const MAX_PERMANENT_FAILURES = 3;

/**
 * Rebuilds in a row, without becoming ready, after which a shard failure
 * that the agent could not restart itself (a shard of a multi-node replica)
 * counts as a crash loop and is given up like a permanent one: the agent's
 * own bound for one-node shards (supervisor/crash_loop.ts) does not see these.
 */
export const MAX_REBUILDS_IN_A_ROW = 5;

/** A shard's failure as the agent reported it. */
export interface GivenUp {
  /** Why, in words (a crash loop's count included). */
  reason: string;
  /** The end of its log. */
  log_tail: string[];
  /** When (ms since epoch). */
  at: number;
}

/**
 * Counts a failure the agent gave up on; rebuilds the replica away from
 * every node that gave up on it, or, when no other node fits or past the
 * bound, marks it failed.
 */
export async function givenUpFailure(
  pass: Pass,
  r: StoredReplica,
  shardId: string,
  node: string,
  f: GivenUp,
): Promise<void> {
  const { state } = pass;
  const attempts = (r.failure?.attempts ?? 0) + 1;
  const nodes = [...new Set([...(r.failure?.nodes ?? []), node])];
  r.failure = {
    reason: f.reason,
    shard_id: shardId,
    node,
    log_tail: failureTail(f.log_tail),
    at: f.at,
    attempts,
    // The next placement leaves these nodes out: the refusal may be theirs.
    nodes,
  };
  // Its own GPUs count as free: a multi-node replica may keep its other nodes.
  state.touch(r);
  state.inventory.releaseReplica(r.id);
  const d = state.specOf(r);
  const elsewhere = d === undefined ? null : placeElsewhere(state, r, d, `${r.id}-elsewhere`);
  const refused = nodes.sort().join(", ");
  if (attempts < MAX_PERMANENT_FAILURES && elsewhere?.status === "placed") {
    await state.rebuild(
      r,
      `shard ${shardId} on ${node} failed for a reason retrying there cannot change ` +
        `(placement ${attempts} of at most ${MAX_PERMANENT_FAILURES}); ` +
        `placing it on another node than ${refused}`,
    );
    return;
  }
  r.phase = "failed";
  r.placement = null;
  r.updated_at = pass.now;
  await state.store.putReplica(r);
  const why = attempts >= MAX_PERMANENT_FAILURES
    ? `gave up after ${attempts} placements`
    : `no node other than ${refused} fits${
      elsewhere === null ? "" : `: ${elsewhere.explanation.summary}`
    }`;
  await state.event(
    "replica_failed",
    `replica/${r.id}`,
    `${shardFailureMessage(shardId, node, f)}\n${why}; apply a changed deployment to try again`,
  );
}

/**
 * A shard failure retrying might cure: the replica is rebuilt whole (design
 * §5.4), counted; the {@link MAX_REBUILDS_IN_A_ROW}th in a row without the
 * replica becoming ready is a crash loop, and the failing shard's node is
 * given up ({@link givenUpFailure}).
 */
export async function failedAgain(
  pass: Pass,
  r: StoredReplica,
  shardId: string,
  node: string,
  f: GivenUp | null,
): Promise<void> {
  const n = (pass.rebuilds.get(r.id) ?? 0) + 1;
  const reason = f?.reason ?? "unknown";
  if (n >= MAX_REBUILDS_IN_A_ROW && f !== null) {
    pass.rebuilds.delete(r.id);
    await givenUpFailure(pass, r, shardId, node, {
      ...f,
      reason: `crash loop: the replica failed ${n} times in a row without becoming ready; ` +
        `last: ${reason}`,
    });
    return;
  }
  pass.rebuilds.set(r.id, n);
  await pass.state.rebuild(
    r,
    `shard ${shardId} failed: ${reason} (failure ${n} in a row; ` +
      `given up on ${node} at ${MAX_REBUILDS_IN_A_ROW})`,
  );
}

/** A placement of `d` on the live inventory without the nodes `r` was refused on; null when none. */
function placeElsewhere(
  state: ControlState,
  r: StoredReplica,
  d: Deployment,
  id: string,
): PlacementResult | null {
  const avoid = new Set(r.failure?.nodes ?? []);
  if (avoid.size === 0) return null;
  const others = indexCluster(state.inventory.snapshot().filter((n) => !avoid.has(n.id)));
  return place(others, d, id, { detail: "grouped" });
}

/**
 * A replica refused for good on some nodes is placed elsewhere first, on
 * the inventory as it stands (earlier placements of this pass included);
 * null when it fits nowhere else, and it is then placed as any other (a
 * later failure there counts towards {@link MAX_PERMANENT_FAILURES}).
 */
export function placeAvoiding(
  state: ControlState,
  r: StoredReplica,
  d: Deployment,
  attempt: number,
): Placed | null {
  const result = placeElsewhere(state, r, d, `${r.id}.${attempt}`);
  if (result === null || result.status !== "placed") return null;
  const left = [...new Set(r.failure?.nodes ?? [])].sort().join(", ");
  return {
    ...result,
    explanation: {
      ...result.explanation,
      summary: `${result.explanation.summary} (left out, refused there before: ${left})`,
    },
  };
}
