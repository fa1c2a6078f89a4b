/**
 * The shard's state machine, table-driven with a fake clock: each case is a
 * run of events, each some milliseconds after the one before, and what the
 * last one leaves (state fields) and asks for (actions, in order). No
 * process and no real time: the timing cases that needed sleeping shells in
 * tests/supervisor_test.ts are here.
 */
import { assertEquals } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import {
  initialShard,
  type ShardAction,
  type ShardEvent,
  type ShardMachineState,
  type ShardRules,
  step,
} from "./shard_machine.ts";

const RULES: ShardRules = {
  fetchesModel: false,
  startTimeoutMs: 400,
  loadTimeoutMs: 500,
  settleMs: 300,
  stableAfterMs: 1_000,
  livenessFailures: 3,
  crashLoopLimit: 3,
  backoff: { initialMs: 100, maxMs: 400, factor: 2 },
  multiNode: false,
};

const SPAWNED: ShardEvent = { type: "spawned", pid: 42 };
const ALIVE: ShardEvent = { type: "tick", alive: true };
const DEAD: ShardEvent = { type: "tick", alive: false };
const EXIT_3: ShardEvent = {
  type: "failed",
  reason: "exited with code 3",
  kind: "restartable",
  exit: { code: 3, signal: null },
  logTail: ["RuntimeError: CUDA error: an illegal memory access"],
};
const REFUSED: ShardEvent = {
  type: "failed",
  reason: "exited with code 2: the engine refused its arguments: unrecognized arguments: --x",
  kind: "permanent",
  exit: { code: 2, signal: null },
  logTail: [],
};
const READY_OK: ShardEvent = {
  type: "probed",
  result: { kind: "readiness", ok: true, answered: true, detail: "GET /health: 200", port: 8000 },
};
const NOT_READY: ShardEvent = {
  type: "probed",
  result: { kind: "readiness", ok: false, answered: true, detail: "GET /health: 503", port: 8000 },
};
const REFUSING: ShardEvent = {
  type: "probed",
  result: { kind: "readiness", ok: false, answered: false, detail: "refused", port: 8000 },
};
const NO_READINESS: ShardEvent = { type: "probed", result: { kind: "no_readiness" } };
const LIVE_BAD: ShardEvent = {
  type: "probed",
  result: { kind: "liveness", ok: false, detail: "GET /health: no answer within 2000 ms" },
};
const LIVE_OK: ShardEvent = { type: "probed", result: { kind: "liveness", ok: true, detail: "" } };
const progress = (percent: number): ShardEvent => ({
  type: "progress",
  progress: { percent, done: null, total: null },
});
const said = (message: string): ShardAction => ({ type: "state_changed", message });
const READINESS: ShardAction = { type: "probe", mode: "readiness" };
const LIVENESS: ShardAction = { type: "probe", mode: "liveness" };
const T0 = 1_700_000_000_000;

/** One case: events with the ms before each, and what the last leaves and asks for. */
interface Case {
  name: string;
  rules?: Partial<ShardRules>;
  events: [number, ShardEvent][];
  state?: Partial<ShardMachineState>;
  actions?: ShardAction[];
}

/** A run that became ready 50 ms after its spawn at T0. */
const READY_RUN: [number, ShardEvent][] = [[0, SPAWNED], [50, READY_OK]];

const CASES: Case[] = [
  {
    name: "start asks for a launch and wants the shard",
    events: [[0, { type: "start" }]],
    state: { state: "pending", wanted: true },
    actions: [{ type: "launch" }],
  },
  {
    name: "a spawn starts the run and its clock",
    events: [[0, SPAWNED]],
    state: { state: "starting", since: T0, spawnedAt: T0, adopted: false },
    actions: [said("pending → starting: spawned pid 42")],
  },
  {
    name: "an adopted run was never spawned here",
    events: [[0, { type: "adopted", pid: 7 }]],
    state: { state: "starting", adopted: true, spawnedAt: null },
    actions: [said("pending → starting: adopted pid 7")],
  },
  {
    name: "a live starting run is probed",
    events: [[0, SPAWNED], [400, ALIVE]],
    state: { state: "starting" },
    actions: [READINESS],
  },
  {
    name: "a start that shows no sign of life past its timeout is halted",
    events: [[0, SPAWNED], [401, ALIVE]],
    actions: [{ type: "halt", reason: "showed no sign of life within 400 ms" }],
  },
  {
    name: "the timeout names what the port check last said",
    events: [[0, SPAWNED], [10, { type: "port_checked", hint: "nothing on 8000" }], [391, ALIVE]],
    actions: [{
      type: "halt",
      reason: "showed no sign of life within 400 ms; nothing on 8000",
    }],
  },
  {
    name: "a dead run is reaped, its exit before any timeout",
    events: [[0, SPAWNED], [10_000, DEAD]],
    actions: [{ type: "reap" }],
  },
  {
    name: "a log line with progress moves starting to loading",
    events: [[0, SPAWNED], [10, progress(20)]],
    state: { state: "loading", since: T0 + 10, progress: { percent: 20, done: null, total: null } },
    actions: [said("starting → loading: log shows loading (20%)")],
  },
  {
    name: "more progress keeps loading's start",
    events: [[0, SPAWNED], [10, progress(10)], [10, progress(20)]],
    state: { state: "loading", since: T0 + 10 },
    actions: [],
  },
  {
    name: "a load that never finishes is halted after the load timeout, counted from loading",
    events: [[0, SPAWNED], [300, progress(10)], [501, ALIVE]],
    actions: [{ type: "halt", reason: "did not become ready within 500 ms of loading" }],
  },
  {
    name: "a load within its timeout is probed",
    events: [[0, SPAWNED], [300, progress(10)], [500, ALIVE]],
    actions: [READINESS],
  },
  {
    name: "a port that answers but is not ready yet means loading",
    events: [[0, SPAWNED], [20, NOT_READY]],
    state: { state: "loading" },
    actions: [said("starting → loading: port 8000 answers, not ready yet")],
  },
  {
    name: "a port that refuses leaves the run starting",
    events: [[0, SPAWNED], [20, REFUSING]],
    state: { state: "starting" },
    actions: [],
  },
  {
    name: "readiness passing makes a spawned run ready and says how long it took",
    events: READY_RUN,
    state: { state: "ready", since: T0 + 50, spawnedAt: null, lastReadyAfterMs: 50 },
    actions: [said("starting → ready: GET /health: 200"), { type: "ready_after", ms: 50 }],
  },
  {
    name: "an adopted run that becomes ready reports no time to ready",
    events: [[0, { type: "adopted", pid: 7 }], [50, READY_OK]],
    state: { state: "ready", lastReadyAfterMs: null },
    actions: [said("starting → ready: GET /health: 200")],
  },
  {
    name: "a rank without readiness checks is not ready before the settle time",
    events: [[0, SPAWNED], [300, NO_READINESS]],
    state: { state: "starting" },
    actions: [],
  },
  {
    name: "a rank without readiness checks is ready after the settle time",
    events: [[0, SPAWNED], [301, NO_READINESS]],
    state: { state: "ready", lastReadyAfterMs: 301 },
    actions: [said("starting → ready: running; readiness is the replica leader's"), {
      type: "ready_after",
      ms: 301,
    }],
  },
  {
    name: "a rank without readiness checks whose log says 100% is ready at once",
    events: [[0, SPAWNED], [10, progress(100)], [1, NO_READINESS]],
    state: { state: "ready" },
  },
  {
    name: "an adopted rank without readiness checks is ready at the first probe",
    events: [[0, { type: "adopted", pid: 7 }], [0, NO_READINESS]],
    state: { state: "ready" },
    actions: [said("starting → ready: running; readiness is the replica leader's")],
  },
  {
    name: "a ready run is checked for liveness",
    events: [...READY_RUN, [500, ALIVE]],
    actions: [LIVENESS],
  },
  {
    name: "liveness failing fewer times than the bound is counted",
    events: [...READY_RUN, [1, LIVE_BAD], [1, LIVE_BAD]],
    state: { state: "ready", livenessFailures: 2 },
    actions: [],
  },
  {
    name: "liveness failing the bound in a row halts the run",
    events: [...READY_RUN, [1, LIVE_BAD], [1, LIVE_BAD], [1, LIVE_BAD]],
    actions: [{
      type: "halt",
      reason: "liveness failed 3 times: GET /health: no answer within 2000 ms",
    }],
  },
  {
    name: "a passing liveness check starts the count over",
    events: [...READY_RUN, [1, LIVE_BAD], [1, LIVE_BAD], [1, LIVE_OK], [1, LIVE_BAD]],
    state: { livenessFailures: 1 },
    actions: [],
  },
  {
    name: "a crash backs off, keeps its reason and tail, and gives the ports back",
    events: [[0, SPAWNED], [300, EXIT_3]],
    state: {
      state: "backoff",
      restarts: 1,
      restartsTotal: 1,
      failures: 1,
      nextStartAt: T0 + 400,
      lastFailure: {
        at: T0 + 300,
        reason: "exited with code 3",
        exit_code: 3,
        signal: null,
        log_tail: ["RuntimeError: CUDA error: an illegal memory access"],
        permanent: false,
      },
    },
    actions: [
      { type: "release" },
      said("starting → backoff: exited with code 3; restart 1 in 100 ms"),
    ],
  },
  {
    name: "a kill -9 is kept by its signal, with no exit code",
    events: [[0, SPAWNED], [10, {
      type: "failed",
      reason: "killed by signal 9 (SIGKILL)",
      kind: "restartable",
      exit: { code: 137, signal: "SIGKILL" },
      logTail: [],
    }]],
    state: { state: "backoff" },
  },
  {
    name: "backoff waits until the restart is due",
    events: [[0, SPAWNED], [0, EXIT_3], [99, ALIVE]],
    state: { state: "backoff" },
    actions: [],
  },
  {
    name: "a due restart launches again",
    events: [[0, SPAWNED], [0, EXIT_3], [100, DEAD]],
    actions: [{ type: "launch" }],
  },
  {
    name: "the second crash in a row is shown as a crash loop, and backs off longer",
    events: [[0, SPAWNED], [0, EXIT_3], [100, SPAWNED], [10, EXIT_3]],
    state: { state: "backoff", restarts: 2, failures: 2, nextStartAt: T0 + 110 + 200 },
    actions: [
      { type: "release" },
      said(
        "starting → backoff: exited with code 3; crash loop (2 of 3 failures in a row); " +
          "restart 2 in 200 ms",
      ),
    ],
  },
  {
    name: "the crash-loop limit gives up on this node: failed, permanent",
    events: [[0, SPAWNED], [0, EXIT_3], [100, SPAWNED], [0, EXIT_3], [200, SPAWNED], [0, EXIT_3]],
    state: { state: "failed", failures: 3, restarts: 2 },
    actions: [
      { type: "release" },
      said(
        "starting → failed: crash loop: failed 3 times in a row without staying ready; " +
          "not restarted on this node again; last: exited with code 3; " +
          "the replica must be placed on another node",
      ),
    ],
  },
  {
    name: "a failed shard is not started again",
    events: [[0, SPAWNED], [0, REFUSED], [60_000, DEAD]],
    state: { state: "failed" },
    actions: [],
  },
  {
    name: "a refused launch fails for good at once and is no crash loop",
    events: [[0, SPAWNED], [0, REFUSED]],
    state: { state: "failed", failures: 0, restarts: 0 },
  },
  {
    name: "a shard of a multi-node replica is not restarted locally: it fails for a rebuild",
    rules: { multiNode: true },
    events: [[0, SPAWNED], [0, EXIT_3]],
    state: { state: "failed", restarts: 0, failures: 0 },
    actions: [
      { type: "release" },
      said("starting → failed: exited with code 3; the replica must be rebuilt whole"),
    ],
  },
  {
    name: "staying ready past the stable time starts the restart count over",
    events: [[0, SPAWNED], [0, EXIT_3], [100, SPAWNED], [0, READY_OK], [1_001, ALIVE]],
    state: { state: "ready", restarts: 0, failures: 0, restartsTotal: 1 },
    actions: [LIVENESS],
  },
  {
    name: "a crash soon after ready keeps backing off",
    events: [[0, SPAWNED], [0, EXIT_3], [100, SPAWNED], [0, READY_OK], [1_000, ALIVE], [0, EXIT_3]],
    state: { state: "backoff", restarts: 2, failures: 2 },
  },
  {
    name: "stop marks a running shard stopping and unwanted",
    events: [[0, SPAWNED], [10, { type: "stopping", reason: "no longer desired", running: true }]],
    state: { state: "stopping", wanted: false },
    actions: [said("starting → stopping: no longer desired")],
  },
  {
    name: "stopped gives the ports back and exits",
    events: [[0, SPAWNED], [0, { type: "stopping", reason: "r", running: true }], [5, {
      type: "stopped",
      reason: "r",
    }]],
    state: { state: "exited", since: T0 + 5 },
    actions: [{ type: "release" }, said("stopping → exited: r")],
  },
  {
    name: "a stop in backoff cancels the restart",
    events: [[0, SPAWNED], [0, EXIT_3], [0, { type: "stopping", reason: "r", running: false }], [
      1_000,
      ALIVE,
    ]],
    state: { state: "backoff", wanted: false },
    actions: [],
  },
  {
    name: "a run that fails while being stopped is not restarted nor counted",
    events: [[0, SPAWNED], [0, { type: "stopping", reason: "r", running: true }], [0, EXIT_3]],
    state: { state: "failed", failures: 0, restarts: 0 },
  },
  {
    name: "a probe answer after the run was stopped judges nothing",
    events: [[0, SPAWNED], [0, { type: "stopping", reason: "r", running: true }], [0, READY_OK]],
    state: { state: "stopping" },
    actions: [],
  },
  {
    name: "a detached shard is not restarted",
    events: [[0, SPAWNED], [0, { type: "detached" }], [0, EXIT_3]],
    state: { state: "failed", wanted: false },
  },
];

for (const c of CASES) {
  Deno.test(`shard machine: ${c.name}`, () => {
    const clock = new FakeClock(T0);
    const rules = { ...RULES, ...c.rules };
    let s = initialShard(clock.now());
    let actions: ShardAction[] = [];
    for (const [ms, event] of c.events) {
      clock.advance(ms);
      ({ state: s, actions } = step(s, event, clock.now(), rules));
    }
    if (c.state !== undefined) {
      const got = Object.fromEntries(Object.keys(c.state).map((k) => [k, s[k as keyof typeof s]]));
      assertEquals(got, c.state);
    }
    if (c.actions !== undefined) assertEquals(actions, c.actions);
  });
}

Deno.test("shard machine: a step changes neither the state nor the event it was given", () => {
  const before = initialShard(T0);
  const frozen = structuredClone(before);
  const tail = ["one"];
  const { state } = step(before, SPAWNED, T0 + 5, RULES);
  const after = step(state, { ...EXIT_3, logTail: tail } as ShardEvent, T0 + 10, RULES).state;
  tail.push("two");
  assertEquals(before, frozen);
  assertEquals(state.state, "starting");
  assertEquals(after.lastFailure?.log_tail, ["one"]);
});
