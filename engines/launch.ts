/**
 * From a placement to each shard's launch description (design §7 → §8).
 *
 * Ports are the agent's (design §8): the control plane sends each launch
 * with its own ports left open (null), the agent allocates a block from its
 * range, checks it is free, and reports it. The control plane keeps what its
 * agents reported with the placement and passes rank 0's ports to the other
 * ranks, so a multi-node replica agrees on one rendezvous. The block and
 * rendezvous rule is engines/port_block.ts's.
 *
 * @module
 */
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Placed } from "../placement/types.ts";
import { DEFAULT_REVISION } from "../models/hub_protocol.ts";
import { noPorts, type PlacementPorts, withPorts } from "./port_block.ts";
import { type DesiredLaunch, ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";

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
 * The model revision a launch names (`model_revision`): the deployment's,
 * unless it is `main`, which an agent fetches when a launch names none.
 * Leaving `main` out keeps the launches of most deployments, and their
 * hashes, as before, so upgrading the control plane restarts no engine.
 */
export function launchedRevision(deployment: Deployment): string | undefined {
  const revision = deployment.revision;
  return revision === undefined || revision === DEFAULT_REVISION ? undefined : revision;
}

/**
 * Builds the launch of every shard of a placed replica, its own ports open
 * for its agent. Rank 0's world ports are open too; the other ranks get rank
 * 0's reported ports from `ports`, or `null` until rank 0 has reported (a
 * caller holds those ranks back until then). Each shard gets its node's
 * installed version of the engine, when reported, and the model's resolved
 * commit when known.
 *
 * @param nodes The snapshot placement used, by id.
 * @throws {RangeError} When the placement names a node or GPU the snapshot lacks.
 */
export function shardLaunches(
  placed: Placed,
  deployment: Deployment,
  nodes: ReadonlyMap<string, ClusterNode>,
  ports: PlacementPorts = noPorts(),
  modelCommit: string | null = null,
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
  const revision = launchedRevision(deployment);
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
      // Only when known: a launch without it hashes as before, so engines keep running.
      ...(modelCommit === null ? {} : { model_commit: modelCommit }),
      ...(revision === undefined ? {} : { model_revision: revision }),
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
