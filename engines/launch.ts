/**
 * From a placement to each shard's launch description (plan §7 → §8).
 *
 * @module
 */
import type { Deployment } from "../deployment/schema.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Placed } from "../placement/types.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";

/** Port bases. A shard's ports are the base plus 10 × its lowest GPU index. */
export interface PortPlan {
  /** HTTP port base (default 8000). */
  http_base: number;
  /** Rendezvous port base on the leader (default 29500). */
  rendezvous_base: number;
}

/** The default port plan. */
export const DEFAULT_PORTS: PortPlan = { http_base: 8000, rendezvous_base: 29500 };

/** Ports between two shards' ports: engines bind a few beyond the one given (SGLang up to +6). */
export const PORT_STRIDE = 10;

/**
 * Ports are derived, not allocated: shards on one node never share a GPU, so
 * "base + 10 × lowest GPU index" never collides on a node and needs no state.
 * The stride leaves room for the extra ports engines bind next to the one
 * they are given.
 */
export function shardPort(base: number, gpuIndices: readonly number[]): number {
  return base + PORT_STRIDE * Math.min(...gpuIndices);
}

/**
 * Builds the launch of every shard of a placed replica. Each shard gets its
 * node's installed version of the engine (plan §14), when reported.
 *
 * @param nodes The snapshot placement used, by id.
 * @throws {RangeError} When the placement names a node or GPU the snapshot lacks.
 */
export function shardLaunches(
  placed: Placed,
  deployment: Deployment,
  nodes: ReadonlyMap<string, ClusterNode>,
  ports: PortPlan = DEFAULT_PORTS,
): ShardLaunch[] {
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
  const httpBase = (n: ClusterNode) => n.http_port_base ?? ports.http_base;
  const world = {
    nodes: placed.shards.length,
    leader_addr: leaderNode.mgmt_addr,
    rendezvous_port: shardPort(ports.rendezvous_base, leader.gpu_indices),
    leader_http_port: shardPort(httpBase(leaderNode), leader.gpu_indices),
  };
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
    return {
      api_version: ENGINE_API_VERSION,
      deployment: deployment.name,
      replica_id: placed.replica_id,
      shard_id: s.shard_id,
      model: deployment.model,
      served_model_name: deployment.served_model_name,
      profile: {
        name: profile.name,
        tensor_parallel: profile.tensor_parallel,
        pipeline_parallel: profile.pipeline_parallel,
        nodes: profile.nodes,
        gpus_per_node: profile.gpus_per_node,
        quantization: profile.quantization,
        engine_args: [...profile.engine_args],
        engine_options: { ...profile.engine_options },
        env: { ...profile.env },
      },
      rank: s.rank,
      world,
      gpus,
      fabric: s.fabric === null
        ? null
        : { name: s.fabric, ports: s.hca_ports.map((p) => ({ ...p })) },
      node: { id: node.id, mgmt_addr: node.mgmt_addr, mgmt_interface: node.mgmt_interface },
      port: shardPort(httpBase(node), s.gpu_indices),
      engine_version: node.engine_versions?.[placed.engine] ?? null,
    };
  });
}
