/**
 * Turning a plugin's answer into what runs: the checks every engine shares
 * (plan §6.2), then the environment merge in which llmgw's GPU and NCCL
 * variables (plan §5.3) always win.
 *
 * @module
 */
import { compareComputeCapability, FP8_MIN_COMPUTE_CAPABILITY } from "../deployment/validate.ts";
import { askPlugin, type PluginAnswer } from "./plugin_sdk.ts";
import { shardEnv, shardEnvProblems } from "./shard_env.ts";
import {
  ENGINE_API_VERSION,
  type EngineCommand,
  type EnginePlugin,
  type EngineProbes,
  type MetricNames,
  type ShardLaunch,
} from "./types.ts";

export { askPlugin, type PluginAnswer };

/** What a shard will run, or why it cannot. */
export interface ShardSpec {
  /** The engine's name. */
  engine: string;
  /** Why the shard cannot run; empty when `command` and `probes` are set. */
  problems: string[];
  /** argv and the full environment llmgw adds (profile, engine, then llmgw's own). */
  command: EngineCommand | null;
  /** Liveness and readiness (plan §9.3). */
  probes: EngineProbes | null;
  /** Metric names for the gateway's load signals. */
  metrics: MetricNames | null;
}

/** The checks every engine shares (plan §6.2), given the engine's quantizations. */
export function commonProblems(launch: ShardLaunch, quantizations: readonly string[]): string[] {
  const p = launch.profile;
  const name = `profile "${p.name}"`;
  const problems: string[] = [];
  if (launch.api_version !== ENGINE_API_VERSION) {
    problems.push(`launch format ${launch.api_version} is not ${ENGINE_API_VERSION}`);
  }
  if (p.nodes * p.gpus_per_node !== p.tensor_parallel * p.pipeline_parallel) {
    problems.push(
      `${name}: nodes × gpus_per_node (${p.nodes} × ${p.gpus_per_node}) must equal tensor_parallel × pipeline_parallel (${p.tensor_parallel} × ${p.pipeline_parallel})`,
    );
  }
  if (launch.gpus.length !== p.gpus_per_node) {
    problems.push(
      `${name}: shard ${launch.shard_id} has ${launch.gpus.length} GPUs, the profile needs ${p.gpus_per_node}`,
    );
  }
  if (launch.rank < 0 || launch.rank >= launch.world.nodes || launch.world.nodes !== p.nodes) {
    problems.push(
      `${name}: rank ${launch.rank} does not fit a world of ${launch.world.nodes} nodes`,
    );
  }
  const classes = [...new Set(launch.gpus.map((g) => g.class))];
  if (classes.length > 1) {
    problems.push(
      `${name}: a tensor-parallel group mixes GPU classes ${classes.join(", ")} (plan §1.1)`,
    );
  }
  if (/fp8/.test(p.quantization)) {
    const low = launch.gpus.filter((g) =>
      g.compute_capability === null ||
      compareComputeCapability(g.compute_capability, FP8_MIN_COMPUTE_CAPABILITY) < 0
    );
    if (low.length > 0) {
      problems.push(
        `${name}: ${p.quantization} needs compute capability ≥ ${FP8_MIN_COMPUTE_CAPABILITY}; GPU ${
          low[0].index
        } reports ${
          low[0].compute_capability ?? "unknown"
        } (refused rather than silently slower, plan §6.2)`,
      );
    }
  }
  if (!quantizations.includes(p.quantization)) {
    problems.push(
      `${name}: quantization "${p.quantization}" is not supported by this engine (supported: ${
        quantizations.join(", ")
      })`,
    );
  }
  return [...problems, ...shardEnvProblems(launch)];
}

/**
 * Combines llmgw's shared checks with a plugin's answer. The environment is
 * the profile's, then the engine's, then llmgw's GPU and NCCL variables,
 * which nothing can override.
 */
export function finishShard(
  engine: string,
  launch: ShardLaunch,
  quantizations: readonly string[],
  answer: PluginAnswer,
): ShardSpec {
  const problems = [...commonProblems(launch, quantizations), ...answer.problems];
  if (problems.length > 0 || answer.command === null || answer.probes === null) {
    return {
      engine,
      problems: problems.length > 0 ? problems : [`engine ${engine} returned no command`],
      command: null,
      probes: null,
      metrics: answer.metrics,
    };
  }
  return {
    engine,
    problems: [],
    command: {
      argv: answer.command.argv,
      env: { ...launch.profile.env, ...answer.command.env, ...shardEnv(launch) },
    },
    probes: answer.probes,
    metrics: answer.metrics,
  };
}

/** Prepares one shard with an in-process plugin. */
export function prepareShard(plugin: EnginePlugin, launch: ShardLaunch): ShardSpec {
  return finishShard(plugin.name, launch, plugin.quantizations, askPlugin(plugin, launch));
}
