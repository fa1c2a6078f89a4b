/**
 * The supervisor's states and settings (design §9).
 *
 * @module
 */
import type { ShardLaunch } from "../engines/types.ts";
import type { DesiredShard, ShardReport } from "../protocol/agent_protocol.ts";
import type { PortAllocator } from "./port_allocator.ts";
import type { BackoffPolicy } from "./backoff.ts";
import type { LogTailLimits } from "./log_tail.ts";
import type { Clock } from "../time/clock.ts";
import type { ColdStartReceipt } from "../protocol/cold_start_receipt.ts";
import type { ModelFetcher } from "./model_fetcher.ts";
import type { Chmod } from "../http/secret_file.ts";

/**
 * A shard's state (design §9.3): `pending → starting → loading → ready`, plus
 * `stopping`, `exited`, `failed` and `backoff`. Starting (spawned, nothing
 * heard yet) is separate from loading (the engine is loading weights),
 * because a 70B model legitimately takes minutes to load. The list is the
 * wire's (protocol/agent_protocol.ts), so a state cannot exist on one side only.
 */
export type ShardState = ShardReport["state"];

/** A shard the agent should run: what the control plane asks for (design §10), as it sent it. */
export type { DesiredShard };

/**
 * What the supervisor reports of one shard: the heartbeat's report, with its
 * engine (agent/reports.ts clips it to the wire's bounds and leaves the
 * engine out).
 */
export type { ShardReport };

/** A shard with its ports allocated: what its engine plugin builds the command from. */
export type LaunchedShard = DesiredShard<ShardLaunch>;

/**
 * Why a run of a shard ended badly: the report's `last_failure`
 * (protocol/agent_protocol.ts), in which `permanent` is always set here
 * (only older agents' reports lack it).
 */
export interface ShardFailure extends Omit<NonNullable<ShardReport["last_failure"]>, "permanent"> {
  /** True when retrying cannot change it: the engine or its plugin refused the shard. */
  permanent: boolean;
}

/** What the agent's metrics need of one shard beyond its status. */
export interface ShardMetrics {
  /** Shard id. */
  id: string;
  /** The GPUs its launch is given (indices). */
  gpu_indices: number[];
  /** Restarts after crashes since this supervisor took the shard on; never reset. */
  restarts_total: number;
  /** Milliseconds from its last spawn to ready; null when not ready since spawned, or adopted. */
  last_ready_after_ms: number | null;
}

/** Something worth telling the operator. */
export interface SupervisorEvent {
  /** When (ms since epoch). */
  at: number;
  /** The shard, or null for the supervisor itself. */
  shard: string | null;
  /** What kind: a state change, an adoption, a refusal, … */
  kind:
    | "state"
    | "adopted"
    | "adoption_refused"
    | "spawned"
    | "stopped"
    | "log_rotated"
    | "port_held"
    | "file_mode"
    | "download";
  /** In words. */
  message: string;
}

/** Settings of a {@link Supervisor}; every time is in milliseconds. */
export interface SupervisorOptions {
  /** Pid files and logs live under `<stateDir>/shards/`. */
  stateDir: string;
  /** Host the probes connect to. Default 127.0.0.1. */
  probeHost?: string;
  /** How often the supervisor looks at every shard. Default 500. */
  tickMs?: number;
  /** One HTTP check's deadline. Default 2,000. */
  probeTimeoutMs?: number;
  /** A shard that shows no sign of life this long after spawning fails. Default 120,000. */
  startTimeoutMs?: number;
  /** A shard that loads this long without becoming ready fails. Default 1,800,000. */
  loadTimeoutMs?: number;
  /** SIGTERM to SIGKILL. Default 30,000. */
  stopGraceMs?: number;
  /** Restart delays. */
  backoff?: BackoffPolicy;
  /** The in-memory log tail's bounds. */
  tailLimits?: LogTailLimits;
  /** Rotate a shard's log file beyond this size. Default 64 MiB. */
  logMaxBytes?: number;
  /** Rotated log files kept. Default 3. */
  logKeep?: number;
  /** A shard without readiness checks is ready after running this long. Default 2,000. */
  settleMs?: number;
  /** Ready this long, a shard's restart count (and backoff) starts over. Default 60,000. */
  stableAfterMs?: number;
  /**
   * Failures in a row without staying ready `stableAfterMs` after which a
   * shard is not restarted but reported failed for good. Default 5.
   */
  crashLoopLimit?: number;
  /** Consecutive failed liveness checks of a ready shard before it is restarted. Default 3. */
  livenessFailures?: number;
  /** Extra environment for engine processes (below the engine's own). */
  env?: Record<string, string>;
  /** Where shards' ports come from: the agent's range. Default: the default range. */
  ports?: PortAllocator;
  /** Whether a port is free to take; default: it binds on every address family. */
  isPortFree?: (port: number) => boolean | Promise<boolean>;
  /** Where /proc is, for port ownership (tests give a fake tree). */
  procRoot?: string;
  /** Receives every event (the agent forwards them); default: JSON lines on stderr. */
  onEvent?: (event: SupervisorEvent) => void;
  /** The time every timer of the supervisor reads; default: the system clock. */
  clock?: Clock;
  /** Told once per spawn that becomes ready, with the time it took (not for adopted shards). */
  onReady?: (shard: string, afterMs: number) => void;
  /** Told once per spawn that becomes ready, with its settled cold-start receipt (not for adopted shards). */
  onColdStart?: (shard: string, engine: string, receipt: ColdStartReceipt) => void;
  /**
   * Puts each shard's model on this host before its first spawn (the shard
   * is `downloading` meanwhile; the launch gets its `model_path`); null or
   * absent: shards start at once from the launch's `model`.
   */
  models?: ModelFetcher | null;
  /** Changes a path's mode (the shards' directories); tests make it fail. Default Deno.chmodSync. */
  chmod?: Chmod;
}

/** Options with every default filled in. */
export type ResolvedOptions = Required<SupervisorOptions>;
