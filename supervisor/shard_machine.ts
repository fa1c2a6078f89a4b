/**
 * One shard's life as a pure state machine (design §9.3):
 * `(state, event, now) → {state, actions}`. It reads no clock and touches no
 * process: the runner (shard_runner.ts) feeds it what happened with the time
 * it happened, and carries out the actions it returns, in order, with the
 * process (shard_process.ts) and probe (shard_probe.ts) effects.
 *
 * `pending → starting → loading → ready`; a failed run goes to `backoff`
 * (restart at a time) or `failed` (crash_loop.ts decides which); `stop` goes
 * through `stopping` to `exited`. When the agent keeps a model cache
 * ({@link ShardRules.fetchesModel}), a shard first goes `downloading` until
 * its model's files are on this host: a download that may succeed later is
 * tried again after a backoff, staying `downloading` with its last error; one
 * that cannot (unknown repo or revision, gated, no room on the disk) fails
 * the shard for good. A restart after a crash reuses the files fetched.
 *
 * @module
 */
import { backoffDelay } from "./backoff.ts";
import { afterFailure } from "./crash_loop.ts";
import type { ShardState } from "./types.ts";
import type {
  ProbeResult,
  ShardAction,
  ShardEvent,
  ShardMachineState,
  ShardRules,
  Step,
} from "./shard_machine_types.ts";

// Callers import the machine's shapes from here too.
export type {
  ExitStatus,
  ProbeResult,
  ShardAction,
  ShardEvent,
  ShardMachineState,
  ShardRules,
  Step,
} from "./shard_machine_types.ts";

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
    modelPath: null,
    fetching: false,
    fetchFailures: 0,
    nextFetchAt: 0,
    fetchError: null,
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
      if (rules.fetchesModel && s.modelPath === null) {
        to("downloading", "fetching the model");
        fetchModel(s, actions);
      } else {
        actions.push({ type: "launch" });
      }
      break;
    case "model_ready":
      s.fetching = false;
      s.fetchError = null;
      s.modelPath = event.path;
      if (s.state === "downloading" && s.wanted) actions.push({ type: "launch" });
      break;
    case "model_failed":
      modelFailed(s, event, now, rules, actions, to);
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
      // A restart of an adopted run starts from the files it was launched from.
      s.modelPath = event.path ?? s.modelPath;
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
      if (s.fetching) fetchStop(s, actions);
      if (event.running) to("stopping", event.reason);
      break;
    case "stopped":
      release(s, actions);
      to("exited", event.reason);
      break;
    case "detached":
      s.wanted = false;
      // Its part files stay: the next agent resumes the download.
      if (s.fetching) fetchStop(s, actions);
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
  // Not once the files are here: the launch is under way (its spawn makes it `starting`).
  const due = !s.fetching && s.modelPath === null && now >= s.nextFetchAt;
  if (s.state === "downloading" && due && s.wanted) {
    fetchModel(s, actions);
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

function fetchModel(s: ShardMachineState, actions: ShardAction[]): void {
  s.fetching = true;
  actions.push({ type: "fetch_model" });
}

function fetchStop(s: ShardMachineState, actions: ShardAction[]): void {
  s.fetching = false;
  actions.push({ type: "fetch_stop" });
}

/**
 * A failed fetch: tried again after the restart backoff, staying
 * `downloading` with its error, when a later try may succeed (the hub
 * unreachable, a source gone); else the shard fails for good with the
 * source's answer (crash_loop.ts: permanent), and the control plane acts on it.
 */
function modelFailed(
  s: ShardMachineState,
  event: Extract<ShardEvent, { type: "model_failed" }>,
  now: number,
  rules: ShardRules,
  actions: ShardAction[],
  to: (state: ShardState, message: string) => void,
): void {
  s.fetching = false;
  // A fetch that ended because the shard is being stopped judges nothing.
  if (s.state !== "downloading" || !s.wanted) return;
  if (!event.retryable) {
    s.fetchError = null;
    failed(
      s,
      { type: "failed", reason: event.reason, kind: "permanent", exit: null, logTail: [] },
      now,
      rules,
      actions,
      to,
    );
    // The control plane answers a kind (a full disk: back to pending) apart from `permanent`.
    if (event.kind !== undefined && s.lastFailure !== null) s.lastFailure.kind = event.kind;
    return;
  }
  s.fetchFailures++;
  s.fetchError = event.reason;
  const delay = backoffDelay(s.fetchFailures, rules.backoff);
  s.nextFetchAt = now + delay;
  actions.push({
    type: "fetch_retry",
    message: `model fetch ${s.fetchFailures} failed: ${event.reason}; trying again in ${delay} ms`,
  });
}

function release(s: ShardMachineState, actions: ShardAction[]): void {
  s.ownership = null;
  actions.push({ type: "release" });
}
