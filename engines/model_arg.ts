/**
 * What an engine is told to load: this host's copy of the model when the
 * agent has put one here (`model_path`: a snapshot in its model cache, or a
 * local path it checked), else the launch's `model` as the deployment names
 * it (an agent without a model cache). With `model_path` the engine also
 * runs with the hub switched off (agent/prepare_shard.ts), so it never
 * fetches anything itself (issue #25 item 4). One rule for every built-in
 * plugin; an exec plugin reads the same two fields (docs/plugins.md).
 *
 * @module
 */
import type { ShardLaunch } from "./types.ts";

/** The model argument of the engine's command line (see the module). */
export function modelArgument(launch: ShardLaunch): string {
  return launch.model_path ?? launch.model;
}
