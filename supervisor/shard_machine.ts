/**
 * One shard's life as a pure state machine (design §9.3):
 * `(state, event, now) → {state, actions}`. It reads no clock and touches no
 * process: the runner (shard_runner.ts) feeds it what happened with the time
 * it happened, and carries out the actions it returns, in order, with the
 * process (shard_process.ts) and probe (shard_probe.ts) effects.
 *
 * `pending → starting → loading → ready`; a failed run goes to `backoff`
 * (restart at a time) or `failed` (crash_loop.ts decides which); `stop` goes
 * through `stopping` to `exited`.
 *
 * @module
 */
import type { BackoffPolicy } from "./backoff.ts";
import { afterFailure, type FailureKind } from "./crash_loop.ts";
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
  | { type: "adopted"; pid: number }
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

/** States in which a run exists and is watched. */
const RUNNING: readonly ShardState[] = ["starting", "loading", "ready"];

/** Whether a shard in `state` has a run that is watched (looked at, probed, timed). */
export function watched(state: ShardState): boolean {
  return RUNNING.includes(state);
}

/** A new shard's machine: `pending` since `now`. */
export function initialShard(now: number): ShardMachineState {
  return {
    state: "pending",
    since: now,
    wanted: true,
    adopted: false,
    restarts: 0,
    failures: 0,
    restartsTotal: 0,
    spawnedAt: null,
    lastReadyAfterMs: null,
    nextStartAt: 0,
    livenessFailures: 0,
    lastFailure: null,
    progress: null,
    ownership: null,
  };
}

/** Applies one event at `now`. Never mutates `prev`. */
export function step(
  prev: ShardMachineState,
  event: ShardEvent,
  now: number,
  rules: ShardRules,
): Step {
  const s: ShardMachineState = { ...prev };
  const actions: ShardAction[] = [];
  const to = (state: ShardState, message: string) => {
    if (state === s.state) return;
    const from = s.state;
    s.state = state;
    s.since = now;
    actions.push({ type: "state_changed", message: `${from} → ${state}: ${message}` });
  };
  const ready = (message: string) => {
    if (s.state !== "starting" && s.state !== "loading") return;
    to("ready", message);
    if (s.spawnedAt !== null) {
      s.lastReadyAfterMs = s.since - s.spawnedAt;
      s.spawnedAt = null;
      actions.push({ type: "ready_after", ms: s.lastReadyAfterMs });
    }
  };

  switch (event.type) {
    case "start":
      s.wanted = true;
      actions.push({ type: "launch" });
      break;
    case "spawned":
      s.progress = null;
      s.livenessFailures = 0;
      s.spawnedAt = now;
      to("starting", `spawned pid ${event.pid}`);
      break;
    case "adopted":
      s.adopted = true;
      s.spawnedAt = null;
      to("starting", `adopted pid ${event.pid}`);
      break;
    case "progress":
      s.progress = event.progress;
      if (s.state === "starting") {
        to("loading", `log shows loading (${event.progress.percent ?? "?"}%)`);
      }
      break;
    case "tick":
      tick(s, event.alive, now, rules, actions);
      break;
    case "port_checked":
      s.ownership = event.hint;
      break;
    case "probed":
      probed(s, event.result, now, rules, actions, to, ready);
      break;
    case "failed":
      failed(s, event, now, rules, actions, to);
      break;
    case "stopping":
      s.wanted = false;
      if (event.running) to("stopping", event.reason);
      break;
    case "stopped":
      release(s, actions);
      to("exited", event.reason);
      break;
    case "detached":
      s.wanted = false;
      break;
  }
  return { state: s, actions };
}

/** A look: a due restart, a dead run, a start or load that took too long, else a probe. */
function tick(
  s: ShardMachineState,
  alive: boolean,
  now: number,
  rules: ShardRules,
  actions: ShardAction[],
): void {
  if (s.state === "backoff" && now >= s.nextStartAt && s.wanted) {
    actions.push({ type: "launch" });
    return;
  }
  if (!RUNNING.includes(s.state)) return;
  // A dead run's exit is its cause, whatever timer would also have run out.
  if (!alive) {
    actions.push({ type: "reap" });
    return;
  }
  const elapsed = now - s.since;
  const hint = s.ownership === null ? "" : `; ${s.ownership}`;
  if (s.state === "starting" && elapsed > rules.startTimeoutMs) {
    actions.push({
      type: "halt",
      reason: `showed no sign of life within ${rules.startTimeoutMs} ms${hint}`,
    });
    return;
  }
  if (s.state === "loading" && elapsed > rules.loadTimeoutMs) {
    actions.push({
      type: "halt",
      reason: `did not become ready within ${rules.loadTimeoutMs} ms of loading${hint}`,
    });
    return;
  }
  if (s.state === "ready" && elapsed > rules.stableAfterMs) {
    // Backoff starts over only after the shard has stayed ready a while: a
    // shard that crashes a moment after becoming ready keeps backing off.
    s.restarts = 0;
    s.failures = 0;
  }
  actions.push({ type: "probe", mode: s.state === "ready" ? "liveness" : "readiness" });
}

function probed(
  s: ShardMachineState,
  result: ProbeResult,
  now: number,
  rules: ShardRules,
  actions: ShardAction[],
  to: (state: ShardState, message: string) => void,
  ready: (message: string) => void,
): void {
  // A result that comes back after the run ended (stopped meanwhile) judges nothing.
  if (!RUNNING.includes(s.state)) return;
  switch (result.kind) {
    case "skipped":
      return;
    case "no_readiness": {
      // Adopted ranks (never spawned here) have settled long ago.
      const settled = s.spawnedAt === null || now - s.since > rules.settleMs ||
        s.progress?.percent === 100;
      if (settled) ready("running; readiness is the replica leader's");
      return;
    }
    case "readiness":
      if (result.ok) ready(result.detail);
      else if (s.state === "starting" && result.answered) {
        to("loading", `port ${result.port} answers, not ready yet`);
      }
      return;
    case "liveness":
      if (s.state !== "ready") return;
      s.livenessFailures = result.ok ? 0 : s.livenessFailures + 1;
      if (!result.ok && s.livenessFailures >= rules.livenessFailures) {
        actions.push({
          type: "halt",
          reason: `liveness failed ${s.livenessFailures} times: ${result.detail}`,
        });
      }
      return;
  }
}

/**
 * Records a failure and what it leads to (crash_loop.ts): a restart after a
 * backoff, or `failed`, which the control plane acts on.
 */
function failed(
  s: ShardMachineState,
  event: Extract<ShardEvent, { type: "failed" }>,
  now: number,
  rules: ShardRules,
  actions: ShardAction[],
  to: (state: ShardState, message: string) => void,
): void {
  // Only failures that a restart here answers count towards the crash loop.
  if (event.kind === "restartable" && !rules.multiNode && s.wanted) s.failures++;
  const decision = afterFailure({
    failures: s.failures,
    kind: event.kind,
    multiNode: rules.multiNode,
    wanted: s.wanted,
  }, { limit: rules.crashLoopLimit, backoff: rules.backoff });
  const said = decision.action === "fail" && decision.note !== null
    ? `${decision.note}; last: ${event.reason}`
    : event.reason;
  const exit = event.exit;
  s.lastFailure = {
    at: now,
    reason: said,
    exit_code: exit !== null && exit.signal === null ? exit.code : null,
    signal: exit?.signal ?? null,
    log_tail: [...event.logTail],
    permanent: decision.action === "fail" && decision.permanent,
  };
  // The next run allocates afresh: a port the engine held may be anyone's now.
  release(s, actions);
  if (decision.action === "restart") {
    s.restarts++;
    s.restartsTotal++;
    s.nextStartAt = now + decision.delayMs;
    const loop = decision.crashLoop
      ? `crash loop (${s.failures} of ${rules.crashLoopLimit} failures in a row); `
      : "";
    to("backoff", `${event.reason}; ${loop}restart ${s.restarts} in ${decision.delayMs} ms`);
  } else {
    to("failed", decision.next === null ? said : `${said}; ${decision.next}`);
  }
}

function release(s: ShardMachineState, actions: ShardAction[]): void {
  s.ownership = null;
  actions.push({ type: "release" });
}
