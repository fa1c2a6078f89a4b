import { assertEquals } from "../tests/assert.ts";
import { afterFailure, type FailureDecision, type FailureFacts } from "./crash_loop.ts";

const POLICY = { limit: 5, backoff: { initialMs: 1_000, maxMs: 300_000, factor: 2 } };
const LOCAL: FailureFacts = {
  failures: 1,
  kind: "restartable",
  multiNode: false,
  wanted: true,
};
const GIVE_UP = "crash loop: failed 5 times in a row without staying ready; " +
  "not restarted on this node again";

const CASES: [string, Partial<FailureFacts>, FailureDecision][] = [
  ["a first crash restarts after 1 s", {}, { action: "restart", delayMs: 1_000, crashLoop: false }],
  [
    "a second crash in a row is a crash loop",
    { failures: 2 },
    { action: "restart", delayMs: 2_000, crashLoop: true },
  ],
  ["the fourth backs off 8 s", { failures: 4 }, {
    action: "restart",
    delayMs: 8_000,
    crashLoop: true,
  }],
  ["the fifth gives up for good", { failures: 5 }, {
    action: "fail",
    permanent: true,
    note: GIVE_UP,
    next: "the replica must be placed on another node",
  }],
  ["past the limit too", { failures: 9 }, {
    action: "fail",
    permanent: true,
    note: "crash loop: failed 9 times in a row without staying ready; " +
      "not restarted on this node again",
    next: "the replica must be placed on another node",
  }],
  ["a refused launch fails at once", { kind: "permanent" }, {
    action: "fail",
    permanent: true,
    note: null,
    next: null,
  }],
  ["a multi-node shard is rebuilt whole", { multiNode: true, failures: 1 }, {
    action: "fail",
    permanent: false,
    note: null,
    next: "the replica must be rebuilt whole",
  }],
  ["a multi-node shard refused stays permanent", {
    multiNode: true,
    kind: "permanent",
  }, { action: "fail", permanent: true, note: null, next: null }],
  ["a shard being stopped is not restarted", { wanted: false, failures: 3 }, {
    action: "fail",
    permanent: false,
    note: null,
    next: null,
  }],
];

for (const [name, facts, want] of CASES) {
  Deno.test(`afterFailure: ${name}`, () => {
    assertEquals(afterFailure({ ...LOCAL, ...facts }, POLICY), want);
  });
}

Deno.test("afterFailure: the limit is a setting", () => {
  const once = { ...POLICY, limit: 1 };
  assertEquals(afterFailure(LOCAL, once).action, "fail");
  assertEquals(afterFailure({ ...LOCAL, failures: 2 }, { ...POLICY, limit: 3 }).action, "restart");
});
