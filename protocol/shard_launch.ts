/**
 * The shard launch on the wire (design §8, §10): what the control plane
 * puts in a node's desired state and an engine plugin builds a command
 * from. {@link ShardLaunchSchema} checks its shape and bounds; whether the
 * launch makes sense (rank within the world, GPU count matching the profile,
 * a quantization the engine runs) stays the engine plugin's to judge
 * (engines/prepare.ts), so such a launch becomes a failed shard with the
 * reason rather than a refused desired state.
 *
 * `ShardLaunch` (engines/types.ts) stays a documented interface for plugin
 * authors; a compile-time check below fails `deno check` when it and the
 * schema differ.
 *
 * Fields that come from a node's registration (GPU class, compute
 * capability, addresses, fabric ports, engine version) take the same bounds
 * as protocol/agent_protocol.ts `RegisterRequestSchema`: whatever registers
 * can be launched.
 *
 * Extending: unknown fields are dropped, not refused, so an agent ignores
 * what a newer control plane adds. A new field goes into both the interface
 * and the schema, with `.optional()` or `.default(…)` while control planes
 * that do not send it may still run. The schemas' fields are in the order
 * engines/launch.ts builds them: a parsed launch serializes byte for byte
 * like the one sent, so its hash (supervisor/supervisor.ts `shardHash`)
 * does not change and adopted engines are not restarted.
 *
 * @module
 */
import { z } from "zod";
import type { DesiredLaunch, ShardLaunch } from "../engines/types.ts";
import {
  ComputeCapabilitySchema,
  FabricPortSchema,
  MAX_INTERFACE_CHARS,
  MAX_MGMT_ADDR_CHARS,
  NodeIdSchema,
  PortSchema,
} from "./fields.ts";
import type { Assert, Same } from "./same_type.ts";
import { COMMIT_PATTERN } from "../models/hub_protocol.ts";
import { MAX_REVISION_CHARS } from "../deployment/model_revision.ts";
import { parseWire } from "./wire_error.ts";

/** The most GPUs one shard (one node of a replica) runs on. */
export const MAX_GPUS_PER_SHARD = 64;

/** The most nodes (shards) one replica spans. */
export const MAX_REPLICA_NODES = 1024;

/** The most characters of one environment variable's value in a launch. */
export const MAX_ENV_VALUE_CHARS = 32_768;

/** The most environment variables a profile adds. */
export const MAX_ENV_VARS = 256;

/** The most engine-specific options a profile sets. */
export const MAX_ENGINE_OPTIONS = 64;

/** A record with at most `max` keys. */
function boundedRecord<K extends z.ZodString, V extends z.ZodType>(
  key: K,
  value: V,
  max: number,
) {
  return z.record(key, value).refine((r) => Object.keys(r).length <= max, {
    message: `must have at most ${max} entries`,
  });
}

/** The profile fields a plugin needs (engines/types.ts `LaunchProfile`). */
export const LaunchProfileSchema = z.object({
  name: z.string().min(1).max(63),
  tensor_parallel: z.number().int().min(1).max(1024),
  pipeline_parallel: z.number().int().min(1).max(256),
  nodes: z.number().int().min(1).max(MAX_REPLICA_NODES),
  gpus_per_node: z.number().int().min(1).max(MAX_GPUS_PER_SHARD),
  quantization: z.string().min(1).max(32),
  engine_args: z.array(z.string().max(4096)).max(256),
  engine_options: boundedRecord(
    z.string().min(1).max(63),
    z.union([z.string().max(4096), z.number(), z.boolean()]),
    MAX_ENGINE_OPTIONS,
  ),
  env: boundedRecord(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "must be an environment variable name"),
    z.string().max(MAX_ENV_VALUE_CHARS),
    MAX_ENV_VARS,
  ),
});

/** One GPU a shard runs on (engines/types.ts `LaunchGpu`). */
export const LaunchGpuSchema = z.object({
  index: z.number().int().min(0).max(1023),
  class: z.string().max(64),
  compute_capability: ComputeCapabilitySchema.nullable(),
});

/** How the replica's shards find each other (engines/types.ts `LaunchWorld`). */
export const LaunchWorldSchema = z.object({
  nodes: z.number().int().min(1).max(MAX_REPLICA_NODES),
  leader_addr: z.string().min(1).max(MAX_MGMT_ADDR_CHARS),
  rendezvous_port: PortSchema,
  leader_http_port: PortSchema,
});

/** The replica's fabric and this node's ports on it (engines/types.ts `LaunchFabric`). */
export const LaunchFabricSchema = z.object({
  name: z.string().min(1).max(64),
  ports: z.array(FabricPortSchema).max(128),
});

/** The node a shard runs on (engines/types.ts `LaunchNode`). */
export const LaunchNodeSchema = z.object({
  id: NodeIdSchema,
  mgmt_addr: z.string().min(1).max(MAX_MGMT_ADDR_CHARS),
  mgmt_interface: z.string().max(MAX_INTERFACE_CHARS).nullable(),
});

/** Everything a plugin receives to build one shard (engines/types.ts `ShardLaunch`). */
export const ShardLaunchSchema = z.object({
  api_version: z.number().int().min(1).max(1000),
  deployment: z.string().min(1).max(63),
  replica_id: z.string().min(1).max(256),
  shard_id: z.string().min(1).max(256),
  model: z.string().min(1).max(1024),
  model_commit: z.string().regex(COMMIT_PATTERN, "must be a commit of 40 hex digits").optional(),
  model_revision: z.string().min(1).max(MAX_REVISION_CHARS).optional(),
  served_model_name: z.string().min(1).max(256),
  profile: LaunchProfileSchema,
  rank: z.number().int().min(0).max(MAX_REPLICA_NODES - 1),
  world: LaunchWorldSchema,
  gpus: z.array(LaunchGpuSchema).min(1).max(MAX_GPUS_PER_SHARD),
  fabric: LaunchFabricSchema.nullable(),
  node: LaunchNodeSchema,
  port: PortSchema,
  engine_version: z.string().max(64).nullable(),
  /** Filled by the agent (engines/types.ts); a control plane never sends it. */
  model_path: z.string().min(1).max(4096).optional(),
});

// `deno check` fails here when the interface and the schema drift apart.
type _LaunchMatchesSchema = Assert<Same<z.output<typeof ShardLaunchSchema>, ShardLaunch>>;

/**
 * A launch as the desired state carries it. The ports are the agent's to
 * allocate (design §8): `port` is null, and so are rank 0's world ports,
 * which its agent allocates and reports; the other ranks get rank 0's
 * reported ports here, so every rank agrees on the rendezvous.
 */
export const DesiredLaunchSchema = ShardLaunchSchema.extend({
  port: PortSchema.nullable(),
  world: LaunchWorldSchema.extend({
    rendezvous_port: PortSchema.nullable(),
    leader_http_port: PortSchema.nullable(),
  }),
});

// `deno check` fails here when the interface and the schema drift apart.
type _DesiredLaunchMatchesSchema = Assert<
  Same<z.output<typeof DesiredLaunchSchema>, DesiredLaunch>
>;

/**
 * Parses a launch from the wire.
 *
 * @throws {WireFormatError} Naming each wrong field's path, e.g. `gpus[0].index`.
 */
export function parseShardLaunch(value: unknown): ShardLaunch {
  return parseWire(ShardLaunchSchema, value, "the shard launch");
}
