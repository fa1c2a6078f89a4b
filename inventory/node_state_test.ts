import { assertEquals, assertThrows } from "../tests/assert.ts";
import {
  DEFAULT_LIVENESS_THRESHOLDS,
  type Liveness,
  LIVENESS_VALUES,
  livenessAt,
  livenessThresholds,
  LivenessThresholdsError,
  nodeState,
  OPERATOR_INTENTS,
  type OperatorIntent,
  worseLiveness,
} from "./node_state.ts";
import type { NodeState } from "./types.ts";

Deno.test("design §4 defaults: heartbeat 5 s, unreachable after 15 s, lost after 60 s", () => {
  assertEquals({ ...DEFAULT_LIVENESS_THRESHOLDS }, {
    heartbeat_interval_ms: 5_000,
    unreachable_after_ms: 15_000,
    lost_after_ms: 60_000,
  });
  assertEquals(livenessThresholds(), { ...DEFAULT_LIVENESS_THRESHOLDS });
});

Deno.test("livenessAt follows the thresholds, boundaries included", () => {
  const cases: [lastSeen: number, now: number, expected: Liveness][] = [
    [1_000, 1_000, "ready"],
    [1_000, 15_999, "ready"],
    [1_000, 16_000, "unreachable"],
    [1_000, 60_999, "unreachable"],
    [1_000, 61_000, "lost"],
    [1_000, 10_000_000, "lost"],
    [1_000, 0, "ready"], // a clock step back counts as just seen
  ];
  for (const [lastSeen, now, expected] of cases) {
    assertEquals(livenessAt(lastSeen, now), expected, `lastSeen=${lastSeen} now=${now}`);
  }
});

Deno.test("livenessAt uses configured thresholds", () => {
  const t = livenessThresholds({ heartbeat_interval_ms: 100, unreachable_after_ms: 300 });
  assertEquals(t, { heartbeat_interval_ms: 100, unreachable_after_ms: 300, lost_after_ms: 60_000 });
  assertEquals(livenessAt(0, 299, t), "ready");
  assertEquals(livenessAt(0, 300, t), "unreachable");
  assertEquals(livenessAt(0, 59_999, t), "unreachable");
  assertEquals(livenessAt(0, 60_000, t), "lost");
});

Deno.test("livenessThresholds refuses thresholds that cannot work", () => {
  const cases: [Partial<Parameters<typeof livenessThresholds>[0]>, string][] = [
    [{ heartbeat_interval_ms: 0 }, "heartbeat_interval_ms=0"],
    [{ unreachable_after_ms: -1 }, "unreachable_after_ms=-1"],
    [{ lost_after_ms: Number.NaN }, "lost_after_ms=NaN"],
    [{ lost_after_ms: Infinity }, "lost_after_ms=Infinity"],
    [{ unreachable_after_ms: 5_000 }, "must exceed heartbeat_interval_ms=5000"],
    [{ lost_after_ms: 15_000 }, "must exceed unreachable_after_ms=15000"],
    [{ unreachable_after_ms: 90_000 }, "lost_after_ms=60000: must exceed"],
  ];
  for (const [partial, message] of cases) {
    assertThrows(() => livenessThresholds(partial), LivenessThresholdsError, message);
  }
});

Deno.test("nodeState combines liveness and intent: lost > unreachable > draining > cordoned > ready", () => {
  const table: Record<Liveness, Record<OperatorIntent, NodeState>> = {
    ready: { none: "ready", cordoned: "cordoned", draining: "draining" },
    unreachable: { none: "unreachable", cordoned: "unreachable", draining: "unreachable" },
    lost: { none: "lost", cordoned: "lost", draining: "lost" },
  };
  for (const liveness of LIVENESS_VALUES) {
    for (const intent of OPERATOR_INTENTS) {
      assertEquals(nodeState(liveness, intent), table[liveness][intent], `${liveness}+${intent}`);
    }
  }
});

Deno.test("worseLiveness picks the more severe", () => {
  const cases: [Liveness, Liveness, Liveness][] = [
    ["ready", "ready", "ready"],
    ["ready", "unreachable", "unreachable"],
    ["unreachable", "ready", "unreachable"],
    ["lost", "unreachable", "lost"],
    ["ready", "lost", "lost"],
  ];
  for (const [a, b, expected] of cases) assertEquals(worseLiveness(a, b), expected, `${a} ${b}`);
});
