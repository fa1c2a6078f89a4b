/**
 * From a placement to each shard's launch description (design §7 → §8).
 *
 * Ports are the agent's (design §8): the control plane sends each launch
 * with its own ports left open (null), the agent allocates a block of
 * {@link PORT_BLOCK} ports from its range, checks they are free, and reports
 * them. The control plane keeps what its agents reported with the placement
 * ({@link PlacementPorts}) and passes rank 0's ports to the other ranks, so a
 * multi-node replica agrees on one rendezvous.
 *
 * @module
 */
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Placed } from "../placement/types.ts";
import { type DesiredLaunch, ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";

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

/** What a launch carries of its profile: a copy, so no launch shares arrays with the deployment. */
export function launchProfile(profile: Profile): ShardLaunch["profile"] {
  return {
    name: profile.name,
    tensor_parallel: profile.tensor_parallel,
    pipeline_parallel: profile.pipeline_parallel,
    nodes: profile.nodes,
    gpus_per_node: profile.gpus_per_node,
    quantization: profile.quantization,
    engine_args: [...profile.engine_args],
    engine_options: { ...profile.engine_options },
    env: { ...profile.env },
  };
}

/**
 * Builds the launch of every shard of a placed replica, its own ports open
 * for its agent. Rank 0's world ports are open too; the other ranks get rank
 * 0's reported ports from `ports`, or `null` until rank 0 has reported (a
 * caller holds those ranks back until then). Each shard gets its node's
 * installed version of the engine, when reported.
 *
 * @param nodes The snapshot placement used, by id.
 * @throws {RangeError} When the placement names a node or GPU the snapshot lacks.
 */
export function shardLaunches(
  placed: Placed,
  deployment: Deployment,
  nodes: ReadonlyMap<string, ClusterNode>,
  ports: PlacementPorts = noPorts(),
): DesiredLaunch[] {
  const profile = deployment.profiles.find((p) => p.name === placed.profile);
  if (profile === undefined) {
    throw new RangeError(
      `Cannot build launches: profile ${placed.profile} is not in ${deployment.name}`,
    );
  }
  const leader = placed.shards[0];
  const leaderNode = nodes.get(leader.node);
  if (leaderNode === undefined) {
    throw new RangeError(`Cannot build launches: no node ${leader.node}`);
  }
  return placed.shards.map((s) => {
    const node = nodes.get(s.node);
    if (node === undefined) throw new RangeError(`Cannot build launches: no node ${s.node}`);
    const gpus = s.gpu_indices.map((i) => {
      const g = node.gpus.find((x) => x.index === i);
      if (g === undefined) {
        throw new RangeError(`Cannot build launches: node ${s.node} has no GPU ${i}`);
      }
      return { index: i, class: g.class ?? "unknown", compute_capability: g.compute_capability };
    });
    const isLeader = s.rank === 0;
    return {
      api_version: ENGINE_API_VERSION,
      deployment: deployment.name,
      replica_id: placed.replica_id,
      shard_id: s.shard_id,
      model: deployment.model,
      served_model_name: deployment.served_model_name,
      profile: launchProfile(profile),
      rank: s.rank,
      world: {
        nodes: placed.shards.length,
        leader_addr: leaderNode.mgmt_addr,
        rendezvous_port: isLeader ? null : ports.rendezvous,
        leader_http_port: isLeader ? null : ports.http[leader.shard_id] ?? null,
      },
      gpus,
      fabric: s.fabric === null
        ? null
        : { name: s.fabric, ports: s.hca_ports.map((p) => ({ ...p })) },
      node: { id: node.id, mgmt_addr: node.mgmt_addr, mgmt_interface: node.mgmt_interface },
      port: null,
      engine_version: node.engine_versions?.[placed.engine] ?? null,
    };
  });
}

/** True when every port a launch needs from elsewhere is known (rank 0's, for other ranks). */
export function launchReady(launch: DesiredLaunch): boolean {
  return launch.rank === 0 ||
    (launch.world.rendezvous_port !== null && launch.world.leader_http_port !== null);
}

/**
 * Fills a launch's open ports from the block its agent allocated: the HTTP
 * port, and for rank 0 the world's ports (the rendezvous is the block's last
 * port when the replica spans nodes; a one-node replica has none to meet at,
 * and its HTTP port stands in).
 *
 * @throws {RangeError} When a rank other than 0 lacks rank 0's ports.
 */
export function withPorts(launch: DesiredLaunch, first: number): ShardLaunch {
  const own = blockPorts(first);
  const leader = launch.rank === 0;
  const rendezvous = leader
    ? (launch.world.nodes > 1 ? own.rendezvous : own.http)
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
 * Every rank's launch with ports filled, for a dry run (`llmgw plan`): rank 0
 * first, from `allocate(node)`, then the others with rank 0's world ports, as
 * the agents and the control plane would arrange it.
 */
export function concreteLaunches(
  desired: readonly DesiredLaunch[],
  allocate: (nodeId: string) => number,
): ShardLaunch[] {
  const leaderDesired = desired.find((l) => l.rank === 0);
  if (leaderDesired === undefined) return [];
  const leader = withPorts(leaderDesired, allocate(leaderDesired.node.id));
  return desired.map((l) =>
    l.rank === 0 ? leader : withPorts({
      ...l,
      world: {
        ...l.world,
        rendezvous_port: leader.world.rendezvous_port,
        leader_http_port: leader.port,
      },
    }, allocate(l.node.id))
  );
}
