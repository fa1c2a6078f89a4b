/**
 * Replicas whose shard an agent gave up on (design §5.4, §9.1): the engine
 * refused its arguments, or the shard crash-looped past the supervisor's
 * limit. Retrying on that node cannot help, so the replica is rebuilt on
 * other nodes, a bounded number of times; when no other node fits, or the
 * bound is reached, it is marked failed with the reason, never left pending
 * or bouncing on the node that refused it. A model cache out of disk is no
 * refusal: that replica goes back to pending ({@link diskFullFailure}).
 *
 * @module
 */
import type { Deployment } from "../deployment/schema.ts";
import { type ClusterIndex, diskKey, diskName, modelDisk, place } from "../placement/mod.ts";
import { formatBytes, formatSeconds } from "../text/bytes.ts";
import { roomToRetry } from "./disk_full_backoff.ts";
import type { Placed, PlacementResult } from "../placement/types.ts";
import { INSUFFICIENT_DISK_FAILURE } from "../protocol/agent_protocol.ts";
import { failureTail, shardFailureMessage } from "./events.ts";
import type { Pass } from "./pass.ts";
import type { ReplicaFailure, StoredReplica } from "./store/store.ts";

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
 * Counts a failure the agent gave up on; moves the replica away from every
 * node that gave up on it (rebuilt, and placed at once on the pass's index),
 * or, when no other node fits or past the bound, marks it failed.
 */
export async function givenUpFailure(
  pass: Pass,
  r: StoredReplica,
  shardId: string,
  node: string,
  f: GivenUp,
): Promise<void> {
  const { state, book } = pass;
  const attempts = (r.failure?.attempts ?? 0) + 1;
  const nodes = [...new Set([...(r.failure?.nodes ?? []), node])];
  const failure: ReplicaFailure = {
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
  book.vacate(r);
  const d = state.specOf(r);
  const elsewhere = d === undefined
    ? null
    : placeElsewhere(book.index(), failure, d, book.nextPlacementId(r));
  const refused = [...nodes].sort().join(", ");
  if (attempts < MAX_PERMANENT_FAILURES && elsewhere?.status === "placed") {
    await book.rebuild(
      r,
      `shard ${shardId} on ${node} failed for a reason retrying there cannot change ` +
        `(placement ${attempts} of at most ${MAX_PERMANENT_FAILURES}); ` +
        `placing it on another node than ${refused}`,
      { failure },
    );
    await book.place(r, avoidingSummary(elsewhere, failure));
    return;
  }
  const why = attempts >= MAX_PERMANENT_FAILURES
    ? `gave up after ${attempts} placements`
    : `no node other than ${refused} fits${
      elsewhere === null ? "" : `: ${elsewhere.explanation.summary}`
    }`;
  await book.fail(
    r,
    failure,
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
  await pass.book.rebuild(
    r,
    `shard ${shardId} failed: ${reason} (failure ${n} in a row; ` +
      `given up on ${node} at ${MAX_REBUILDS_IN_A_ROW})`,
  );
}

/** Whether a shard's failure is its model cache running out of disk (the agent's `last_failure.kind`). */
export function isDiskFull(f: { kind?: string } | null | undefined): boolean {
  return f?.kind === INSUFFICIENT_DISK_FAILURE;
}

/**
 * A shard whose model fetch ran out of disk: the node's disk, not the
 * replica, is at fault, and room may come (an eviction, a bigger disk). The
 * placement is released and the replica goes back to pending with the
 * reason; placement then weighs every node's reported cache room
 * (`insufficient_disk`), so it waits pending while none has room and is
 * placed once one does. The node is held back from the revision for a
 * while (control/disk_full_backoff.ts, `disk_full_backoff`), so one whose
 * report keeps claiming room is not chosen again every pass. Never failed,
 * never counted towards {@link MAX_PERMANENT_FAILURES} or
 * {@link MAX_REBUILDS_IN_A_ROW}.
 */
export async function diskFullFailure(
  pass: Pass,
  r: StoredReplica,
  shardId: string,
  node: string,
  f: GivenUp,
): Promise<void> {
  const held = recordDiskFull(pass, r, node, f.reason);
  await pass.book.rebuild(
    r,
    `shard ${shardId} on ${node} ran out of disk fetching the model: ${f.reason}; ` +
      `back to pending until a node reports room for it` + (held ?? ""),
  );
}

/** Records the disk-full of `node` for `r`'s model revision; says for how long it is held back. */
function recordDiskFull(
  pass: Pass,
  r: StoredReplica,
  node: string,
  reason: string,
): string | null {
  const { state, now } = pass;
  const spec = state.specOf(r);
  if (spec === undefined) return null;
  const commit = state.commitOf(r);
  const disk = modelDisk(
    spec.model,
    state.modelFacts.known(spec.model, spec.revision, commit),
    commit,
  );
  if (disk === null) return null;
  const d = state.diskFull.record({
    node,
    revision: diskKey(disk),
    name: diskName(disk),
    at: now,
    needed: disk.bytes,
    room: state.modelCaches.get(node)?.room_bytes ?? null,
    reason,
  });
  // The pass's index may predate the record: the placement that follows must see it.
  pass.book.rebuildIndex();
  const enough = roomToRetry(d);
  return `; not placed on ${node} for it again for ${formatSeconds((d.until - now) / 1000)}` +
    (enough === null ? "" : ` unless its reported room reaches ${formatBytes(enough)}`);
}

/** A placement of `d` on `index` without the nodes `failure` names; null when it names none. */
function placeElsewhere(
  index: ClusterIndex,
  failure: ReplicaFailure | null | undefined,
  d: Deployment,
  id: string,
): PlacementResult | null {
  const avoid = new Set(failure?.nodes ?? []);
  if (avoid.size === 0) return null;
  return place(index, d, id, { detail: "grouped", avoid });
}

/** A placement that left nodes out says so in its summary. */
function avoidingSummary(placed: Placed, failure: ReplicaFailure): Placed {
  const left = [...new Set(failure.nodes ?? [])].sort().join(", ");
  return {
    ...placed,
    explanation: {
      ...placed.explanation,
      summary: `${placed.explanation.summary} (left out, refused there before: ${left})`,
    },
  };
}

/**
 * A replica refused for good on some nodes is placed elsewhere first, on
 * `index` (the pass's, earlier placements included) as placement `id`;
 * null when it fits nowhere else, and it is then placed as any other (a
 * later failure there counts towards {@link MAX_PERMANENT_FAILURES}).
 */
export function placeAvoiding(
  index: ClusterIndex,
  r: StoredReplica,
  d: Deployment,
  id: string,
): Placed | null {
  const result = placeElsewhere(index, r.failure, d, id);
  if (result === null || result.status !== "placed") return null;
  return avoidingSummary(result, r.failure!);
}
