/**
 * Turning a plugin's answer into what runs: the checks every engine shares
 * (design §6.2), then the environment merge in which llmgw's GPU and NCCL
 * variables (design §5.3) always win.
 *
 * @module
 */
import { parallelismProblems } from "../deployment/parallelism.ts";
import { fp8Capable, fp8Requirement, needsFp8Hardware } from "../deployment/quantization.ts";
import { askPlugin } from "./plugin_sdk.ts";
import { shardEnv, shardEnvProblems } from "./shard_env.ts";
import {
  ENGINE_API_VERSION,
  type EnginePlugin,
  type ShardLaunch,
  type ShardSpec,
} from "./types.ts";

export { askPlugin };

/** The checks every engine shares (design §6.2), given the engine's quantizations. */
export function commonProblems(launch: ShardLaunch, quantizations: readonly string[]): string[] {
  const p = launch.profile;
  const name = `profile "${p.name}"`;
  const problems: string[] = [];
  if (launch.api_version !== ENGINE_API_VERSION) {
    problems.push(`launch format ${launch.api_version} is not ${ENGINE_API_VERSION}`);
  }
  // The deployment rule again (design §6.2): a launch built from a profile
  // that skipped validation must not start a mis-sized engine.
  for (const e of parallelismProblems(p)) {
    problems.push(`${name}: cannot launch: ${e.message}`);
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
      `${name}: a tensor-parallel group mixes GPU classes ${classes.join(", ")} (design §1.1)`,
    );
  }
  if (needsFp8Hardware(p.quantization)) {
    const low = launch.gpus.find((g) => !fp8Capable(g.compute_capability));
    if (low !== undefined) {
      problems.push(
        `${name}: ${fp8Requirement(p.quantization)}; GPU ${low.index} reports ${
          low.compute_capability ?? "unknown"
        } (refused rather than silently slower, design §6.2)`,
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
  answer: ShardSpec,
): ShardSpec {
  const problems = [...commonProblems(launch, quantizations), ...answer.problems];
  if (problems.length > 0 || answer.command === null || answer.probes === null) {
    return {
      problems: problems.length > 0 ? problems : [`engine ${engine} returned no command`],
      command: null,
      probes: null,
      metrics: answer.metrics,
    };
  }
  return {
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
