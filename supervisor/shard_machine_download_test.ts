/**
 * The shard machine's `downloading` state (issue #25 items 2, 5), table
 * driven as shard_machine_test.ts is: the model is fetched before the first
 * spawn; a retryable failure waits the backoff and tries again, staying
 * `downloading` with its error; a final one fails the shard for good; a stop
 * or a detach stops the fetch; a restart after a crash does not fetch again.
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
  fetchesModel: true,
  startTimeoutMs: 400,
  loadTimeoutMs: 500,
  settleMs: 300,
  stableAfterMs: 1_000,
  livenessFailures: 3,
  crashLoopLimit: 3,
  backoff: { initialMs: 100, maxMs: 400, factor: 2 },
  multiNode: false,
};

const START: ShardEvent = { type: "start" };
const READY_MODEL: ShardEvent = { type: "model_ready", path: "/cache/models--o--m/snapshots/c1" };
const UNREACHABLE: ShardEvent = {
  type: "model_failed",
  reason: "hub http://127.0.0.1:9 unreachable: connection refused",
  retryable: true,
};
const GATED: ShardEvent = {
  type: "model_failed",
  reason: "model o/m is gated: set HF_TOKEN to a token that was granted access",
  retryable: false,
};
const DISK_FULL_REASON = "Cannot fetch o/m@c1 into /cache: needs 14.2 GiB, 1.0 GiB free " +
  "(insufficient_disk)";
const DISK_FULL: ShardEvent = {
  type: "model_failed",
  reason: DISK_FULL_REASON,
  retryable: false,
  kind: "insufficient_disk",
};
const TICK: ShardEvent = { type: "tick", alive: false };
const EXIT_1: ShardEvent = {
  type: "failed",
  reason: "exited with code 1",
  kind: "restartable",
  exit: { code: 1, signal: null },
  logTail: [],
};
const said = (message: string): ShardAction => ({ type: "state_changed", message });
const FETCH: ShardAction = { type: "fetch_model" };
const T0 = 1_700_000_000_000;

interface Case {
  name: string;
  rules?: Partial<ShardRules>;
  events: [number, ShardEvent][];
  state?: Partial<ShardMachineState>;
  actions?: ShardAction[];
  /** Where the last failure, if any, says it is permanent. */
  permanent?: boolean;
}

const CASES: Case[] = [
  {
    name: "without a model cache a start launches at once (no downloading state)",
    rules: { fetchesModel: false },
    events: [[0, START]],
    state: { state: "pending", fetching: false },
    actions: [{ type: "launch" }],
  },
  {
    name: "with a model cache a start goes downloading and fetches",
    events: [[0, START]],
    state: { state: "downloading", since: T0, fetching: true, modelPath: null },
    actions: [said("pending → downloading: fetching the model"), FETCH],
  },
  {
    name: "the fetched model launches the run, still downloading until it is spawned",
    events: [[0, START], [50, READY_MODEL]],
    state: {
      state: "downloading",
      fetching: false,
      modelPath: "/cache/models--o--m/snapshots/c1",
    },
    actions: [{ type: "launch" }],
  },
  {
    name: "a tick while the launch after the download runs fetches nothing again",
    events: [[0, START], [50, READY_MODEL], [10, TICK]],
    state: { state: "downloading", fetching: false },
    actions: [],
  },
  {
    name: "the spawn after the download is starting",
    events: [[0, START], [50, READY_MODEL], [1, { type: "spawned", pid: 9 }]],
    state: { state: "starting", spawnedAt: T0 + 51 },
    actions: [said("downloading → starting: spawned pid 9")],
  },
  {
    name: "a tick during a fetch asks for nothing (no timeout of a download)",
    events: [[0, START], [3_600_000, TICK]],
    state: { state: "downloading", fetching: true },
    actions: [],
  },
  {
    name: "a retryable failure stays downloading with its error and a backoff",
    events: [[0, START], [10, UNREACHABLE]],
    state: {
      state: "downloading",
      fetching: false,
      fetchFailures: 1,
      nextFetchAt: T0 + 110,
      fetchError: "hub http://127.0.0.1:9 unreachable: connection refused",
      lastFailure: null,
    },
    actions: [{
      type: "fetch_retry",
      message:
        "model fetch 1 failed: hub http://127.0.0.1:9 unreachable: connection refused; trying again in 100 ms",
    }],
  },
  {
    name: "no new try before the backoff ends",
    events: [[0, START], [10, UNREACHABLE], [99, TICK]],
    state: { state: "downloading", fetching: false },
    actions: [],
  },
  {
    name: "the try after the backoff",
    events: [[0, START], [10, UNREACHABLE], [100, TICK]],
    state: { state: "downloading", fetching: true },
    actions: [FETCH],
  },
  {
    name: "backoff doubles between failed tries",
    events: [[0, START], [10, UNREACHABLE], [100, TICK], [5, UNREACHABLE]],
    state: { fetchFailures: 2, nextFetchAt: T0 + 115 + 200 },
  },
  {
    name: "a success after failures clears the error",
    events: [[0, START], [10, UNREACHABLE], [100, TICK], [5, READY_MODEL]],
    state: { state: "downloading", fetchError: null },
    actions: [{ type: "launch" }],
  },
  {
    name: "a final failure (gated, unknown repo or revision, no room) fails the shard for good",
    events: [[0, START], [10, GATED]],
    state: { state: "failed", fetching: false, fetchError: null },
    permanent: true,
    actions: [
      { type: "release" },
      said(
        "downloading → failed: model o/m is gated: set HF_TOKEN to a token that was granted access",
      ),
    ],
  },
  {
    name: "a disk full fails the shard with its kind, counted as no crash and no restart",
    events: [[0, START], [10, DISK_FULL]],
    state: {
      state: "failed",
      failures: 0,
      restarts: 0,
      lastFailure: {
        at: T0 + 10,
        reason: DISK_FULL_REASON,
        exit_code: null,
        signal: null,
        log_tail: [],
        permanent: true,
        kind: "insufficient_disk",
      },
    },
    permanent: true,
  },
  {
    name: "a stop during a fetch stops it and the shard exits",
    events: [[0, START], [10, { type: "stopping", reason: "no longer desired", running: false }], [
      0,
      { type: "stopped", reason: "no longer desired" },
    ]],
    state: { state: "exited", fetching: false, wanted: false },
  },
  {
    name: "the stop's actions: the fetch is stopped",
    events: [[0, START], [10, { type: "stopping", reason: "removed", running: false }]],
    actions: [{ type: "fetch_stop" }],
  },
  {
    name: "a detached agent stops its fetch (the next agent resumes it)",
    events: [[0, START], [10, { type: "detached" }]],
    state: { wanted: false, fetching: false },
    actions: [{ type: "fetch_stop" }],
  },
  {
    name: "an outcome after the stop judges nothing",
    events: [[0, START], [10, { type: "stopping", reason: "removed", running: false }], [
      5,
      GATED,
    ]],
    state: { state: "downloading", lastFailure: null },
    actions: [],
  },
  {
    name: "a crash after the download restarts from the files fetched: no second fetch",
    events: [[0, START], [10, READY_MODEL], [1, { type: "spawned", pid: 9 }], [5, EXIT_1], [
      100,
      TICK,
    ]],
    state: { state: "backoff", modelPath: "/cache/models--o--m/snapshots/c1" },
    actions: [{ type: "launch" }],
  },
  {
    name: "an adopted run's restart reuses the model it was launched from: no fetch",
    events: [[0, { type: "adopted", pid: 7, path: "/cache/snap" }], [5, EXIT_1], [100, TICK]],
    state: { state: "backoff", modelPath: "/cache/snap" },
    actions: [{ type: "launch" }],
  },
];

for (const c of CASES) {
  Deno.test(`shard machine, downloading: ${c.name}`, () => {
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
    if (c.permanent !== undefined) assertEquals(s.lastFailure?.permanent, c.permanent);
  });
}
