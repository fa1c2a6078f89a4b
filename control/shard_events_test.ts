import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import {
  QWEN,
  registerNodes,
  reportAll,
  shardReport,
  testControl,
} from "../tests/control_fixture.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import { shardEvents } from "./shard_events.ts";

const STARTED = 1_000_000;
const KILLED = {
  at: STARTED + 10_000,
  reason: "killed by signal 9 (SIGKILL)",
  exit_code: null,
  signal: "SIGKILL",
  log_tail: ["INFO: 127.0.0.1 - POST /v1/chat/completions 200"],
  permanent: false,
};

const before = (...reports: ShardReport[]) => new Map(reports.map((r) => [r.id, r]));
const kinds = (events: { kind: string }[]) => events.map((e) => e.kind);

const CASES: [string, Map<string, ShardReport> | undefined, ShardReport, string[]][] = [
  [
    "a new failure is told",
    before(shardReport("s", "ready")),
    shardReport("s", "backoff", { last_failure: KILLED }),
    ["shard_failed"],
  ],
  [
    "ready again after it: recovered",
    before(shardReport("s", "starting", { last_failure: KILLED })),
    shardReport("s", "ready", { last_failure: KILLED, since: KILLED.at + 12_000 }),
    ["shard_recovered"],
  ],
  [
    "failed and ready again between two heartbeats: both, in order",
    before(shardReport("s", "ready")),
    shardReport("s", "ready", { last_failure: KILLED, since: KILLED.at + 3_000 }),
    ["shard_failed", "shard_recovered"],
  ],
  [
    "still ready, same failure: nothing new",
    before(shardReport("s", "ready", { last_failure: KILLED })),
    shardReport("s", "ready", { last_failure: KILLED }),
    [],
  ],
  [
    "ready without ever failing: nothing",
    before(shardReport("s", "loading")),
    shardReport("s", "ready"),
    [],
  ],
  [
    "a predecessor's failure and recovery are not told again",
    undefined,
    shardReport("s", "ready", { last_failure: { ...KILLED, at: STARTED - 1 } }),
    [],
  ],
  [
    "a failure the agent gave up on is the reconciler's to tell",
    before(shardReport("s", "backoff")),
    shardReport("s", "failed", { last_failure: { ...KILLED, permanent: true } }),
    [],
  ],
];

for (const [name, was, now, want] of CASES) {
  Deno.test(`shardEvents: ${name}`, () => {
    assertEquals(kinds(shardEvents("n1", was, [now], STARTED)), want);
  });
}

Deno.test("shardEvents: texts name the signal, the crash-loop count and the time to recover", () => {
  const [failed] = shardEvents(
    "n1",
    before(shardReport("s", "backoff")),
    [shardReport("s", "backoff", {
      last_failure: KILLED,
      crash_loop: { failures: 3, limit: 5 },
    })],
    STARTED,
  );
  assertStringIncludes(
    failed.message,
    "shard s on n1 failed: killed by signal 9 (SIGKILL) " +
      "(failure 3 in a row; the agent gives up on this node at 5)",
  );
  const [recovered] = shardEvents(
    "n1",
    before(shardReport("s", "loading", { last_failure: KILLED })),
    [shardReport("s", "ready", { last_failure: KILLED, since: KILLED.at + 12_400 })],
    STARTED,
  );
  assertEquals(
    recovered.message,
    "shard s on n1 is ready again 12 s after it failed: killed by signal 9 (SIGKILL)",
  );
});

Deno.test("a heartbeat that shows a failed shard ready again records shard_recovered for its replica", async () => {
  const { cp, clock } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  await reportAll(cp, "n1", "ready");
  clock.advance(1_000);
  const failure = { ...KILLED, at: clock.now() };
  await reportAll(cp, "n1", "backoff", { last_failure: failure });
  clock.advance(5_000);
  await reportAll(cp, "n1", "ready", { last_failure: failure, since: clock.now() });
  await reportAll(cp, "n1", "ready", { last_failure: failure, since: clock.now() });
  const events = (await cp.events.list({ limit: 1000 })).filter((e) =>
    e.kind === "shard_failed" || e.kind === "shard_recovered"
  );
  assertEquals(events.map((e) => [e.kind, e.subject]), [
    ["shard_failed", "replica/qwen-r0"],
    ["shard_recovered", "replica/qwen-r0"],
  ]);
  assertStringIncludes(events[1].message, "is ready again 5 s after it failed: killed by signal 9");
});
