/**
 * The port rule, in one place (design §8): each shard gets a block of
 * {@link PORT_BLOCK} consecutive ports from its agent's range, its HTTP
 * port first. Rank 0 of a replica that spans nodes rendezvouses on its
 * block's last port; the other ranks are told rank 0's ports; a one-node
 * replica has nobody to meet, and its HTTP port stands in.
 *
 * Who reads it: engines/launch.ts builds launches with the ports open and
 * {@link withPorts} fills them on the agent; the supervisor reports
 * {@link reportedRendezvous} and, adopting a running shard, opens the ports
 * again with {@link reopenPorts}; the control plane keeps what was reported
 * as {@link PlacementPorts} ({@link learnsRendezvous}).
 *
 * @module
 */
import type { DesiredLaunch, ShardLaunch } from "./types.ts";

/**
 * Ports an agent allocates to one shard, consecutive: the HTTP port first,
 * the rendezvous (distributed init) port of a multi-node leader last, and
 * room between them for the ports engines open next to the one they are
 * given (SGLang up to +6).
 */
export const PORT_BLOCK = 10;

/** A shard's ports within its block: HTTP first, a leader's rendezvous last. */
export function blockPorts(first: number): { http: number; rendezvous: number } {
  return { http: first, rendezvous: first + PORT_BLOCK - 1 };
}

/** The ports agents reported for a placed replica's shards, kept with the placement. */
export interface PlacementPorts {
  /** Each shard's HTTP port, by shard id, once its agent reported it. */
  http: Record<string, number>;
  /** Rank 0's rendezvous port, once reported; null before (and for one-node replicas). */
  rendezvous: number | null;
}

/** No ports known yet: a fresh placement. */
export function noPorts(): PlacementPorts {
  return { http: {}, rendezvous: null };
}

/** Whether rank `rank` of a replica over `nodes` nodes holds the rendezvous port others meet at. */
export function learnsRendezvous(rank: number, nodes: number): boolean {
  return rank === 0 && nodes > 1;
}

/**
 * Fills a launch's open ports from the block its agent allocated: the HTTP
 * port, and for rank 0 the world's ports.
 *
 * @throws {RangeError} When a rank other than 0 lacks rank 0's ports.
 */
export function withPorts(launch: DesiredLaunch, first: number): ShardLaunch {
  const own = blockPorts(first);
  const leader = launch.rank === 0;
  const rendezvous = leader
    ? (learnsRendezvous(launch.rank, launch.world.nodes) ? own.rendezvous : own.http)
    : launch.world.rendezvous_port;
  const leaderHttp = leader ? own.http : launch.world.leader_http_port;
  if (rendezvous === null || leaderHttp === null) {
    throw new RangeError(
      `Cannot launch ${launch.shard_id}: rank ${launch.rank} needs rank 0's ports, not known yet`,
    );
  }
  return {
    ...launch,
    world: { ...launch.world, rendezvous_port: rendezvous, leader_http_port: leaderHttp },
    port: own.http,
  };
}

/**
 * The inverse of {@link withPorts}: the launch as the control plane sent
 * it, its own ports open again (rank 0's world ports too). An adopted
 * shard's recorded launch compares with the desired one this way, and a
 * restart allocates anew instead of reusing a port that may be anyone's by
 * then.
 */
export function reopenPorts(launch: ShardLaunch): DesiredLaunch {
  const leader = launch.rank === 0;
  return {
    ...launch,
    port: null,
    world: {
      ...launch.world,
      rendezvous_port: leader ? null : launch.world.rendezvous_port,
      leader_http_port: leader ? null : launch.world.leader_http_port,
    },
  };
}

/**
 * The rendezvous port a shard reports: rank 0's of a multi-node replica,
 * once its ports are filled; null otherwise (a one-node replica's stand-in
 * is its HTTP port, reported as such).
 */
export function reportedRendezvous(launch: ShardLaunch | null): number | null {
  return launch !== null && learnsRendezvous(launch.rank, launch.world.nodes)
    ? launch.world.rendezvous_port
    : null;
}
