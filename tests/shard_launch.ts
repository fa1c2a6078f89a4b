/**
 * One-GPU shard launches for tests, as the control plane builds them: the
 * L40S of the recorded machines, one node, with the fields a test varies
 * given as overrides.
 *
 * @module
 */
import {
  type DesiredLaunch,
  ENGINE_API_VERSION,
  type LaunchCommon,
  type ShardLaunch,
} from "../engines/types.ts";

/** What desired and filled-in launches share; `shard_id` and `replica_id` are `id`. */
function common(id: string): LaunchCommon {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "demo",
    replica_id: id,
    shard_id: id,
    model: "org/demo-model",
    served_model_name: "demo",
    profile: {
      name: "p",
      tensor_parallel: 1,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: 1,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env: {},
    },
    rank: 0,
    gpus: [{ index: 0, class: "l40s-45g", compute_capability: "8.9" }],
    fabric: null,
    node: { id: "node-a", mgmt_addr: "127.0.0.1", mgmt_interface: "lo" },
    engine_version: null,
  };
}

/** A launch as a desired state carries it: its ports still the agent's to allocate. */
export function desiredLaunch(id: string, over: Partial<DesiredLaunch> = {}): DesiredLaunch {
  return {
    ...common(id),
    world: { nodes: 1, leader_addr: "127.0.0.1", rendezvous_port: null, leader_http_port: null },
    port: null,
    ...over,
  };
}

/** A launch with its ports filled in, serving HTTP on `port`. */
export function shardLaunch(
  id: string,
  port: number,
  over: Partial<ShardLaunch> = {},
): ShardLaunch {
  return {
    ...common(id),
    world: { nodes: 1, leader_addr: "127.0.0.1", rendezvous_port: 29500, leader_http_port: port },
    port,
    ...over,
  };
}
