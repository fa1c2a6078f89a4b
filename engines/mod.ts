/**
 * Engine plugins (design §8): the interface, the shared GPU/NCCL environment
 * (design §5.3), the built-in vLLM and SGLang plugins, executable plugins and
 * the SDK for writing one (docs/plugins.md).
 *
 * @module
 */
export * from "./types.ts";
export {
  COLD_START_PHASES,
  type ColdStartPhase,
  isLogPhase,
  LOG_PHASES,
  type LogPhase,
  PHASE_MARKS,
  type PhaseMark,
  type PhasePattern,
} from "./cold_start_phases.ts";
export { SGLANG_COLD_START_PHASES, VLLM_COLD_START_PHASES } from "./cold_start_patterns.ts";
export {
  compileCacheDir,
  compileCacheEnv,
  compileCacheKey,
  type CompileCacheKeyInput,
  compileCacheKeyInput,
} from "./compile_cache.ts";
export {
  askPlugin,
  type PluginDescription,
  type PluginIo,
  serveEnginePlugin,
} from "./plugin_sdk.ts";
export { OWNED_ENV, shardEnv, shardEnvProblems } from "./shard_env.ts";
export { commonProblems, finishShard, prepareShard } from "./prepare.ts";
export { compareVersions, ownedFlagProblems } from "./args.ts";
export {
  type ApiKeyCheck,
  apiKeyProblems,
  EngineApiKeyError,
  type EngineKeyFile,
  type KeyedCommand,
  withApiKey,
} from "./api_key.ts";
export { concreteLaunches, launchProfile, launchReady, shardLaunches } from "./launch.ts";
export {
  blockPorts,
  learnsRendezvous,
  noPorts,
  type PlacementPorts,
  PORT_BLOCK,
  reopenPorts,
  reportedRendezvous,
  withPorts,
} from "./port_block.ts";
export {
  checkEngines,
  engineIssues,
  type EngineLookup,
  problemField,
  representativeLaunch,
} from "./check_deployment.ts";
export {
  type EngineDriver,
  EnginePluginError,
  EXEC_PLUGIN_PREFIX,
  loadExecPlugin,
  loadExecPlugins,
  PLUGIN_TIMEOUT_MS,
} from "./exec_plugin.ts";
export { BUILTIN_PLUGINS, EngineRegistry, inProcessDriver, pluginDirsFromEnv } from "./registry.ts";
export { vllmPlugin } from "./vllm.ts";
export { sglangPlugin } from "./sglang.ts";
export type { EngineMemorySettings } from "./memory_settings.ts";
