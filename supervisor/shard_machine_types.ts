/**
 * The shapes of one shard's state machine (shard_machine.ts): the rules it
 * is held to, what it remembers, the events it is fed and the actions it
 * returns. Declared apart from the steps so each file stays one concept.
 *
 * @module
 */
import type { BackoffPolicy } from "./backoff.ts";
import type { FailureKind } from "./crash_loop.ts";
import type { LoadingProgress } from "./progress.ts";
import type { ShardFailure, ShardState } from "./types.ts";

/** How a process ended: its exit code, or the signal that ended it. */
export interface ExitStatus {
  /** Exit code (meaningless when a signal ended it). */
  code: number;
  /** The signal's name, or null. */
  signal: string | null;
}

/** The timing and restart rules one shard is held to (every time in ms). */
export interface ShardRules {
  /** A run that shows no sign of life this long after spawning fails. */
  startTimeoutMs: number;
  /** A run that loads this long without becoming ready fails. */
  loadTimeoutMs: number;
  /** A spawned shard without readiness checks is ready after running this long. */
  settleMs: number;
  /** Ready this long, the restart count and the crash loop start over. */
  stableAfterMs: number;
  /** Failed liveness checks in a row before a ready shard's run is ended. */
  livenessFailures: number;
  /** Failures in a row without staying ready before the supervisor gives up on this node. */
  crashLoopLimit: number;
  /** Restart delays. */
  backoff: BackoffPolicy;
  /** One of a multi-node replica: never restarted alone, rebuilt whole (design §5.4). */
  multiNode: boolean;
  /** The agent fetches the shard's model into its cache before the first spawn. */
  fetchesModel: boolean;
}

/** What the machine remembers of one shard. */
export interface ShardMachineState {
  /** The state reported. */
  state: ShardState;
  /** When it entered the state. */
  since: number;
  /** False once stopped or detached: a failure then is not restarted. */
  wanted: boolean;
  /** Taken over from a previous agent rather than spawned by this one. */
  adopted: boolean;
  /** Restarts since the shard last stayed ready. */
  restarts: number;
  /** Failures in a row since the shard last stayed ready (crash_loop.ts). */
  failures: number;
  /** Restarts since this runner took the shard on; never reset. */
  restartsTotal: number;
  /** When the current run was spawned, until it is ready; null for an adopted one. */
  spawnedAt: number | null;
  /** Spawn to ready of the last run that became ready. */
  lastReadyAfterMs: number | null;
  /** When a shard in backoff starts again. */
  nextStartAt: number;
  /** Failed liveness checks in a row. */
  livenessFailures: number;
  /** The last failure, kept after restarts. */
  lastFailure: ShardFailure | null;
  /** Loading progress the log showed in this run. */
  progress: LoadingProgress | null;
  /** Why the last ownership check did not find the run's socket; null when it did. */
  ownership: string | null;
  /** The model's directory on this host once fetched; runs start from it. */
  modelPath: string | null;
  /** A fetch of the model is under way. */
  fetching: boolean;
  /** Fetches of the model that failed and may succeed later, in a row. */
  fetchFailures: number;
  /** When a `downloading` shard tries its fetch again. */
  nextFetchAt: number;
  /** Why the last fetch failed, while another is due; null otherwise. */
  fetchError: string | null;
}

/** What a probe of the run found (shard_probe.ts). */
export type ProbeResult =
  /** Nothing to judge: no probes, the socket not the run's yet, or the run ended meanwhile. */
  | { kind: "skipped" }
  /** The shard serves no readiness checks: its readiness is the replica leader's. */
  | { kind: "no_readiness" }
  /** The readiness checks: all passed, or whether any answered at all. */
  | { kind: "readiness"; ok: boolean; answered: boolean; detail: string; port: number }
  /** The liveness checks of a ready shard. */
  | { kind: "liveness"; ok: boolean; detail: string };

/** Something that happened to the shard. */
export type ShardEvent =
  /** The shard is wanted running (again). */
  | { type: "start" }
  /** A run was spawned. */
  | { type: "spawned"; pid: number }
  /** A run a previous agent spawned was taken over. */
  | {
    type: "adopted";
    pid: number;
    /** The model's directory it was launched from (its `model_path`): a restart reuses it. */
    path?: string;
  }
  /** The model's files are on this host, at `path`. */
  | { type: "model_ready"; path: string }
  /**
   * Fetching the model failed; `retryable`: a later try may succeed; `kind`:
   * the report's `last_failure.kind` (e.g. `insufficient_disk`), when one applies.
   */
  | { type: "model_failed"; reason: string; retryable: boolean; kind?: string }
  /** The log showed loading progress. */
  | { type: "progress"; progress: LoadingProgress }
  /** A look at the shard; `alive`: whether its run's process is. */
  | { type: "tick"; alive: boolean }
  /** What the port's ownership check said: why the socket is not the run's, or null. */
  | { type: "port_checked"; hint: string | null }
  /** A probe's result. */
  | { type: "probed"; result: ProbeResult }
  /** The run failed (its process group is already gone). */
  | {
    type: "failed";
    reason: string;
    kind: FailureKind;
    exit: ExitStatus | null;
    logTail: string[];
  }
  /** Stopping for good; `running`: whether there is a run to stop. */
  | { type: "stopping"; reason: string; running: boolean }
  /** Stopped: no process of the shard is left. */
  | { type: "stopped"; reason: string }
  /** The agent goes away and leaves the run alone. */
  | { type: "detached" };

/** What the runner must do, in order. */
export type ShardAction =
  /** Fetch the model into the cache (a `model_ready` or `model_failed` event follows, later). */
  | { type: "fetch_model" }
  /** A fetch failed and is tried again later: tell the operator. */
  | { type: "fetch_retry"; message: string }
  /** Stop the fetch under way (its outcome is never fed; what it fetched stays). */
  | { type: "fetch_stop" }
  /** Allocate ports, prepare the command and spawn a run (a `spawned` or `failed` event follows). */
  | { type: "launch" }
  /** The run's process is gone: stop what is left of its group, read its exit (`failed` follows). */
  | { type: "reap" }
  /** End the run: its group with the grace period (`failed` follows, with this reason). */
  | { type: "halt"; reason: string }
  /** Probe the run (a `probed` event follows). */
  | { type: "probe"; mode: "readiness" | "liveness" }
  /** Forget the run's process and give its ports back. */
  | { type: "release" }
  /** Tell the operator of a state change. */
  | { type: "state_changed"; message: string }
  /** A spawned run became ready this long after spawning. */
  | { type: "ready_after"; ms: number };

/** What a step returns: the new state (a fresh object) and what to do. */
export interface Step {
  /** The machine after the event. */
  state: ShardMachineState;
  /** The effects, in order. */
  actions: ShardAction[];
}
