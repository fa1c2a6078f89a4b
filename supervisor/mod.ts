/**
 * The agent's supervisor (design §9): engine processes in their own sessions,
 * readiness from the plugins' probes, orphan adoption, bounded logs.
 *
 * @module
 */
export * from "./types.ts";
export {
  type PrepareShard,
  resolveOptions,
  shardDirName,
  shardHash,
  Supervisor,
} from "./supervisor.ts";
export type { ShardPaths } from "./shard_process.ts";
export { ShardRunner } from "./shard_runner.ts";
export type { Clock } from "../time/clock.ts";
export { engineBaseEnv } from "./engine_env.ts";
export { backoffDelay, type BackoffPolicy, DEFAULT_BACKOFF } from "./backoff.ts";
export { DEFAULT_TAIL_LIMITS, LogTail, type LogTailLimits } from "./log_tail.ts";
export { LogFollower, rotateIfLarge } from "./log_file.ts";
export {
  checkFingerprint,
  fingerprint,
  type PidRecord,
  readPidFile,
  writePidFile,
} from "./pid_file.ts";
export {
  groupMembers,
  isRunning,
  parseProcStat,
  type ProcStat,
  readCmdline,
  readProcStat,
  signalGroup,
} from "./proc.ts";
export {
  DEFAULT_SCAN_LIMIT,
  describeHolders,
  listenersOn,
  type ListeningSocket,
  parseProcNetTcp,
  parseSocketLink,
  type PortHolder,
  portHolders,
  type PortOwnership,
  portOwnership,
  ProcNetError,
  socketInodesOf,
} from "./listen_owner.ts";
export { type CheckResult, runHttpCheck } from "./probes.ts";
export {
  DEFAULT_PORT_RANGE,
  isPortFree,
  parsePortRange,
  PortAllocator,
  type PortCheck,
  type PortRange,
  PortRangeError,
  PortRangeExhaustedError,
  validatePortRange,
} from "./port_allocator.ts";
export { compilePatterns, type LoadingProgress, matchProgress } from "./progress.ts";
export {
  type CompiledPhasePattern,
  compilePhasePatterns,
  newReceipt,
  receiptDownload,
  receiptLine,
  receiptReady,
  ReceiptRecorder,
} from "./cold_start_receipt.ts";
export { phaseSeconds } from "../protocol/cold_start_receipt.ts";
export type {
  ColdStartReceipt,
  DownloadReceipt,
  DownloadSource,
  PhaseReceipt,
} from "../protocol/cold_start_receipt.ts";
export type * from "../engines/types.ts";
export type { FabricPort, LinkLayer } from "../discovery/types.ts";
export type { Chmod } from "../http/secret_file.ts";
export type { DesiredShard, LoadMetricNames, ShardReport } from "../protocol/agent_protocol.ts";
export {
  type DownloadProgress,
  type FetchedModel,
  type ModelFetcher,
  ModelFetchError,
} from "./model_fetcher.ts";
export type { ShardDownload } from "../protocol/shard_download.ts";
