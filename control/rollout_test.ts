import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import {
  freshReplicaId,
  planRollout,
  type RolloutDecision,
  type RolloutReplica,
  type RolloutView,
} from "./rollout.ts";
import type { RolloutStepRecord } from "./store/store.ts";

const MIN = 60_000;

function rep(id: string, index: number, current: boolean, ready = true): RolloutReplica {
  return { id, index, current, ready, failed: null };
}

function view(replicas: RolloutReplica[], o: Partial<RolloutView> = {}): RolloutView {
  return {
    desired: 2,
    replicas,
    step: null,
    now: 1_000,
    progressAt: 0,
    deadlineMs: 10 * MIN,
    revertible: true,
    ...o,
  };
}

const FITS = () => true;
const FULL = () => false;
const SURGE_STEP: RolloutStepRecord = {
  replaced: "d-r0",
  by: "d-r0-v2",
  mode: "surge",
  started_at: 0,
};

Deno.test("planRollout: one decision per state (table)", () => {
  const cases: [string, RolloutView, () => boolean, RolloutDecision][] = [
    [
      "free capacity: the new replica starts first",
      view([rep("d-r0", 0, false), rep("d-r1", 1, false)]),
      FITS,
      { kind: "surge", replaces: "d-r0", index: 0 },
    ],
    [
      "no capacity, all ready: one replica down at a time",
      view([rep("d-r0", 0, false), rep("d-r1", 1, false)]),
      FULL,
      { kind: "replace", id: "d-r0" },
    ],
    [
      "an old replica serving nothing is replaced first, without a surge",
      view([rep("d-r0", 0, false), rep("d-r1", 1, false, false)]),
      FITS,
      { kind: "replace", id: "d-r1" },
    ],
    [
      "the surge replica is loading: wait",
      view([rep("d-r0", 0, false), rep("d-r0-v2", 0, true, false), rep("d-r1", 1, false)], {
        step: SURGE_STEP,
      }),
      FITS,
      { kind: "wait", reason: "waiting for d-r0-v2 to become ready" },
    ],
    [
      "the surge replica is ready: the old one goes",
      view([rep("d-r0", 0, false), rep("d-r0-v2", 0, true), rep("d-r1", 1, false)], {
        step: SURGE_STEP,
      }),
      FITS,
      { kind: "retire", id: "d-r0", by: "d-r0-v2" },
    ],
    [
      "an in-place step whose replica is ready is done",
      view([rep("d-r0", 0, true), rep("d-r1", 1, false)], {
        step: { replaced: "d-r0", by: "d-r0", mode: "in_place", started_at: 0 },
      }),
      FITS,
      { kind: "step_done", id: "d-r0" },
    ],
    [
      "no capacity and one replica already down: wait (max unavailable 1)",
      view([rep("d-r0", 0, false), rep("d-r1", 1, false)], { desired: 3 }),
      FULL,
      {
        kind: "wait",
        reason: "no free capacity to start a new replica first, and fewer than 3 replicas " +
          "are ready to take one down",
      },
    ],
    [
      "every replica current: complete",
      view([rep("d-r0-v2", 0, true), rep("d-r1", 1, true)]),
      FULL,
      { kind: "complete" },
    ],
    [
      "replicas past the count do not hold a rollout back",
      view([rep("d-r0", 0, true), rep("d-r1", 1, true), rep("d-r2", 2, false)]),
      FULL,
      { kind: "complete" },
    ],
    [
      "the deadline passed with the new replica not ready: fail",
      view([rep("d-r0", 0, false), rep("d-r0-v2", 0, true, false)], {
        desired: 1,
        now: 11 * MIN,
        step: SURGE_STEP,
      }),
      FITS,
      {
        kind: "fail",
        reason: "d-r0-v2 not ready within the 600 s progress deadline",
      },
    ],
    [
      "a revert is never failed: it waits",
      view([rep("d-r0", 0, false), rep("d-r0-v3", 0, true, false)], {
        desired: 1,
        now: 11 * MIN,
        revertible: false,
      }),
      FITS,
      { kind: "wait", reason: "waiting for d-r0-v3 to become ready" },
    ],
    [
      "a new replica given up on fails the rollout at once",
      view([rep("d-r0", 0, false), { ...rep("d-r1", 1, true, false), failed: "bad args" }]),
      FITS,
      { kind: "fail", reason: "replica d-r1 failed: bad args" },
    ],
    [
      "after a revert, a surge replica of the failed revision serving nothing goes",
      view([rep("d-r0", 0, true), rep("d-r0-v2", 0, false, false)], { desired: 1 }),
      FULL,
      { kind: "retire", id: "d-r0-v2", by: "d-r0" },
    ],
    [
      "an old replica beside a loading current one, both not ready: the old one goes",
      view([rep("d-r0", 0, false, false), rep("d-r0-v2", 0, true, false)], { desired: 1 }),
      FULL,
      { kind: "retire", id: "d-r0", by: null },
    ],
  ];
  for (const [title, v, fits, want] of cases) {
    assertEquals(planRollout(v, fits), want, title);
  }
});

Deno.test("planRollout: capacity is asked only when a ready replica is next", () => {
  let asked = 0;
  const fits = () => {
    asked++;
    return true;
  };
  planRollout(view([rep("d-r0", 0, true), rep("d-r1", 1, true)]), fits);
  planRollout(view([rep("d-r0", 0, false, false), rep("d-r1", 1, true)]), fits);
  assertEquals(asked, 0);
  planRollout(view([rep("d-r0", 0, false), rep("d-r1", 1, true)]), fits);
  assertEquals(asked, 1);
});

Deno.test("freshReplicaId: plain while free, then the revision, then a counter", () => {
  const taken = new Set(["d-r0", "d-r1-v3"]);
  const has = (id: string) => taken.has(id);
  assertEquals(freshReplicaId("d", 2, 3, has, false), "d-r2");
  assertEquals(freshReplicaId("d", 0, 3, has, false), "d-r0-v3");
  assertEquals(freshReplicaId("d", 0, 3, has, true), "d-r0-v3");
  assertEquals(freshReplicaId("d", 1, 3, has, true), "d-r1-v3-2");
});

/** A simulated deployment: replicas, free slots, and when each new replica becomes ready. */
interface Sim {
  replicas: (RolloutReplica & { readyIn: number })[];
  free: number;
  step: RolloutStepRecord | null;
  now: number;
  progressAt: number;
  made: number;
}

/**
 * Runs the planner against a simulated cluster until it completes or fails,
 * acting on each decision as the roll_out step does; new replicas become
 * ready after `readyTicks[k]` ticks (the k-th made; Infinity: never).
 * Checks after every tick: ready indices never fewer than desired − 1,
 * never more than desired + 1 replicas, at most one new replica loading.
 */
function simulate(
  desired: number,
  free: number,
  readyTicks: number[],
  deadlineTicks: number,
): { outcome: "complete" | "fail" | "stuck"; ticks: number } {
  const TICK = 1_000;
  const sim: Sim = {
    replicas: Array.from({ length: desired }, (_, i) => ({
      ...rep(`d-r${i}`, i, false),
      readyIn: 0,
    })),
    free,
    step: null,
    now: 0,
    progressAt: 0,
    made: 0,
  };
  const readyAfter = () => readyTicks[sim.made++ % readyTicks.length];
  for (let tick = 0; tick < 50 * (desired + 1); tick++) {
    const d = planRollout({
      desired,
      replicas: sim.replicas,
      step: sim.step,
      now: sim.now,
      progressAt: sim.progressAt,
      deadlineMs: deadlineTicks * TICK,
      revertible: true,
    }, () => sim.free > 0);
    switch (d.kind) {
      case "complete":
      case "fail":
        return { outcome: d.kind, ticks: tick };
      case "surge":
        sim.free--;
        sim.replicas.push({
          ...rep(`d-r${d.index}-v2`, d.index, true, false),
          readyIn: readyAfter(),
        });
        sim.step = { replaced: d.replaces, by: `d-r${d.index}-v2`, mode: "surge", started_at: 0 };
        sim.progressAt = sim.now;
        break;
      case "replace": {
        const r = sim.replicas.find((x) => x.id === d.id)!;
        Object.assign(r, { current: true, ready: false, readyIn: readyAfter() });
        sim.step = { replaced: r.id, by: r.id, mode: "in_place", started_at: 0 };
        sim.progressAt = sim.now;
        break;
      }
      case "retire":
        sim.replicas = sim.replicas.filter((r) => r.id !== d.id);
        sim.free++;
        if (d.by !== null) sim.progressAt = sim.now;
        if (sim.step?.replaced === d.id) sim.step = null;
        break;
      case "step_done":
        sim.step = null;
        sim.progressAt = sim.now;
        break;
      case "wait":
        break;
    }
    sim.now += TICK;
    for (const r of sim.replicas) {
      if (!r.ready && --r.readyIn <= 0) r.ready = true;
    }
    const readyIndices = new Set(sim.replicas.filter((r) => r.ready).map((r) => r.index)).size;
    assertOk(readyIndices >= desired - 1, `ready ${readyIndices} of ${desired} at tick ${tick}`);
    assertOk(sim.replicas.length <= desired + 1, `${sim.replicas.length} replicas`);
    assertOk(sim.replicas.filter((r) => r.current && !r.ready).length <= 1, "two loading");
  }
  return { outcome: "stuck", ticks: -1 };
}

Deno.test("planRollout (property): replicas that become ready roll out completely, never below desired − 1", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 0, max: 2 }),
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 8 }),
      (desired, free, readyTicks) => {
        const { outcome } = simulate(desired, free, readyTicks, 100);
        assertEquals(outcome, "complete");
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("planRollout (property): a new replica that never becomes ready fails the rollout after the deadline", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 0, max: 2 }),
      fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 0, maxLength: 4 }),
      fc.integer({ min: 2, max: 20 }),
      (desired, free, before, deadline) => {
        // The replicas made before the bad one become ready; the bad one never does.
        const ticks = [...before.slice(0, desired - 1), Infinity];
        const { outcome } = simulate(desired, free, ticks, deadline);
        assertEquals(outcome, "fail");
      },
    ),
    { numRuns: 300 },
  );
});
