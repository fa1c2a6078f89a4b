/**
 * From a placement to each shard's launch description (design §7 → §8).
 *
 * @module
 */
import type { Deployment, Profile } from "../deployment/schema.ts";
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

/** The largest TCP port. */
const MAX_PORT = 65_535;

/** The ports of a placed replica's shards, decided once when it is placed and stored with it. */
export interface PlacementPorts {
  /** Each shard's HTTP port, by shard id. */
  http: Record<string, number>;
  /** The leader's rendezvous (distributed-init) port. */
  rendezvous: number;
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
 * Decides a placement's ports: today derived from GPU indices and each
 * node's HTTP port base. This is the one place ports are chosen; the control
 * plane stores the answer with the placement and every later reader (desired
 * state, views, gateway polls) reads the stored ports.
 *
 * @throws {RangeError} When the placement names a node the snapshot lacks.
 */
export function derivePorts(
  placed: Placed,
  nodes: ReadonlyMap<string, Pick<ClusterNode, "http_port_base">>,
  plan: PortPlan = DEFAULT_PORTS,
): PlacementPorts {
  const checked = (port: number, what: string): number => {
    if (port > MAX_PORT) {
      throw new RangeError(`Cannot choose ports: ${what} would be ${port}, past ${MAX_PORT}`);
    }
    return port;
  };
  const http: Record<string, number> = {};
  for (const s of placed.shards) {
    const node = nodes.get(s.node);
    if (node === undefined) throw new RangeError(`Cannot choose ports: no node ${s.node}`);
    http[s.shard_id] = checked(
      shardPort(node.http_port_base ?? plan.http_base, s.gpu_indices),
      `the HTTP port of ${s.shard_id} on ${s.node}`,
    );
  }
  return {
    http,
    rendezvous: checked(
      shardPort(plan.rendezvous_base, placed.shards[0]?.gpu_indices ?? [0]),
      "the rendezvous port",
    ),
  };
}

/**
 * Builds the launch of every shard of a placed replica, on the ports decided
 * for it. Each shard gets its node's installed version of the engine, when
 * reported.
 *
 * @param nodes The snapshot placement used, by id.
 * @param ports The placement's ports; derived when not given (dry runs).
 * @throws {RangeError} When the placement names a node, GPU or port the snapshot lacks.
 */
export function shardLaunches(
  placed: Placed,
  deployment: Deployment,
  nodes: ReadonlyMap<string, ClusterNode>,
  ports: PlacementPorts = derivePorts(placed, nodes),
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
  const portOf = (shardId: string): number => {
    const port = ports.http[shardId];
    if (port === undefined) throw new RangeError(`Cannot build launches: no port for ${shardId}`);
    return port;
  };
  const world = {
    nodes: placed.shards.length,
    leader_addr: leaderNode.mgmt_addr,
    rendezvous_port: ports.rendezvous,
    leader_http_port: portOf(leader.shard_id),
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
      profile: launchProfile(profile),
      rank: s.rank,
      world,
      gpus,
      fabric: s.fabric === null
        ? null
        : { name: s.fabric, ports: s.hca_ports.map((p) => ({ ...p })) },
      node: { id: node.id, mgmt_addr: node.mgmt_addr, mgmt_interface: node.mgmt_interface },
      port: portOf(s.shard_id),
      engine_version: node.engine_versions?.[placed.engine] ?? null,
    };
  });
}
