/**
 * The grammar of replica, placement and shard ids, built and parsed here
 * only. A replica is `NAME-rI` (`NAME-rI-vREV`, `NAME-rI-vREV-K` for a
 * replacement started beside the one it replaces); each placement of it is
 * `REPLICA.ATTEMPT`; each rank of a placement is `PLACEMENT/RANK`:
 * `llama-r0.3/1` is rank 1 of the third placement of `llama-r0`. A new
 * attempt gives every shard a new id, so an agent never mistakes a rebuilt
 * replica's shard for the one it replaces.
 *
 * @module
 */

/** The parts of a shard id. */
export interface ShardIdParts {
  /** The replica, e.g. `llama-r0`. */
  replica: string;
  /** Which placement of it, from 1. */
  attempt: number;
  /** The rank within the placement, from 0. */
  rank: number;
}

/** The parts of a placement id. */
export interface PlacementIdParts {
  /** The replica, e.g. `llama-r0`. */
  replica: string;
  /** Which placement of it, from 1. */
  attempt: number;
}

/** The id of the replica at `index` of a deployment: `NAME-rI`. */
export function replicaId(deployment: string, index: number): string {
  return `${deployment}-r${index}`;
}

/**
 * The id of a replacement replica started beside the one it replaces:
 * `BASE-vREV`, then `BASE-vREV-K` for the K-th one at that revision.
 */
export function surgeReplicaId(base: string, revision: number, k = 1): string {
  return k <= 1 ? `${base}-v${revision}` : `${base}-v${revision}-${k}`;
}

/** The id of a replica's placement number `attempt`: `REPLICA.ATTEMPT`. */
export function placementId(replica: string, attempt: number): string {
  return `${replica}.${attempt}`;
}

/** The id of rank `rank` of a placement: `PLACEMENT/RANK`. */
export function shardId(placement: string, rank: number): string {
  return `${placement}/${rank}`;
}

/**
 * The placement id of the representative launch a deployment check builds
 * (engines/check_deployment.ts): `NAME-r0.check`, which no real placement
 * takes, so nothing mistakes it for one.
 */
export function checkPlacementId(deployment: string): string {
  return `${replicaId(deployment, 0)}.check`;
}

const PLACEMENT_ID = /^(.+)\.(\d+)$/;
const SHARD_ID = /^(.+)\.(\d+)\/(\d+)$/;

/** The parts of a placement id, or null when `id` is not one. */
export function parsePlacementId(id: string): PlacementIdParts | null {
  const m = PLACEMENT_ID.exec(id);
  return m === null ? null : { replica: m[1], attempt: Number(m[2]) };
}

/** The parts of a shard id, or null when `id` is not one. */
export function parseShardId(id: string): ShardIdParts | null {
  const m = SHARD_ID.exec(id);
  return m === null ? null : { replica: m[1], attempt: Number(m[2]), rank: Number(m[3]) };
}

/**
 * The replica a shard id belongs to; an id that is not a shard id is
 * returned as it is (an event about something else keeps its subject).
 */
export function replicaOfShard(id: string): string {
  return parseShardId(id)?.replica ?? id;
}
