/**
 * Which source the next chunk asks (issue #25 item 3): the assignment read
 * now; a failed source backed off (2 s doubling to 60 s), asked after the
 * others until its backoff ends, then in its place again with one probe;
 * one outage counted once; a success forgets; refused sources skipped and
 * the sources of a mismatching file last for that file.
 */
import { assertEquals, assertOk } from "../../tests/assert.ts";
import {
  afterFailure,
  afterMismatch,
  afterPick,
  afterRelease,
  afterSuccess,
  keepAssigned,
  nextSource,
  SOURCE_BACKOFF,
  type SourceHealth,
  sourceOrder,
} from "./source_order.ts";

const named = (...names: string[]) => names.map((name) => ({ name }));
const names = (sources: readonly { name: string }[]) => sources.map((s) => s.name);
/** A source that failed `failures` times in a row, the last at `at`, backed off until `until`. */
const down = (
  name: string,
  until: number,
  failures = 1,
  at = 0,
  probing = false,
): SourceHealth => ({
  name,
  failures,
  at,
  until,
  probing,
});

Deno.test("sourceOrder: the assignment's order, backed-off sources after it, soonest back first", () => {
  const cases: [string, string[], SourceHealth[], number, string[]][] = [
    ["nothing failed", ["peer a", "hub"], [], 0, ["peer a", "hub"]],
    ["the head backed off", ["peer a", "hub"], [down("peer a", 2_000)], 1_999, ["hub", "peer a"]],
    // The peer restarted or the hub's 503 passed: tried again in its place.
    ["its backoff ended", ["peer a", "hub"], [down("peer a", 2_000)], 2_000, ["peer a", "hub"]],
    [
      "the soonest back first",
      ["peer a", "peer b", "hub"],
      [
        down("hub", 4_000),
        down("peer a", 2_000),
      ],
      0,
      ["peer b", "peer a", "hub"],
    ],
    // Ended but its probe is under way: the others first until it answers.
    ["probing", ["peer a", "hub"], [down("peer a", 2_000, 1, 0, true)], 3_000, ["hub", "peer a"]],
    ["a failed source no longer assigned", ["hub"], [down("peer a", 9_000)], 0, ["hub"]],
    ["nothing assigned", [], [down("peer a", 9_000)], 0, []],
  ];
  for (const [what, assigned, health, now, want] of cases) {
    assertEquals(names(sourceOrder(named(...assigned), health, now)), want, what);
  }
  // The head, as the download tells it: a probe counts as in its place.
  const probing = [down("peer a", 2_000, 1, 0, true)];
  assertEquals(names(sourceOrder(named("peer a", "hub"), probing, 3_000, undefined, true)), [
    "peer a",
    "hub",
  ]);
  // The sources of a file that failed its hash go after every other, backed off or not.
  assertEquals(
    names(sourceOrder(named("peer a", "hub"), [down("hub", 9_000)], 0, new Set(["peer a"]))),
    ["hub", "peer a"],
  );
});

Deno.test("nextSource: the first in order that did not refuse the file", () => {
  const cases: [string, string[], SourceHealth[], string[], string | undefined][] = [
    ["the head", ["peer a", "hub"], [], [], "peer a"],
    ["the head refused", ["peer a", "hub"], [], ["peer a"], "hub"],
    ["the head backed off", ["peer a", "hub"], [down("peer a", 2_000)], [], "hub"],
    // Backed off is not skipped: with nothing else, it is asked (the chunk's own backoff paces it).
    [
      "backed off and the rest refused",
      ["peer a", "hub"],
      [down("peer a", 2_000)],
      ["hub"],
      "peer a",
    ],
    ["every one refused", ["peer a", "hub"], [], ["peer a", "hub"], undefined],
    // Removed from the plan (silent, gone): never asked, even when all others refused.
    ["the only one left refused", ["hub"], [], ["hub"], undefined],
  ];
  for (const [what, assigned, health, refused, want] of cases) {
    assertEquals(nextSource(named(...assigned), health, 0, new Set(refused))?.name, want, what);
  }
});

Deno.test("afterFailure: backed off 2 s, doubling per failure in a row to 60 s; one outage counts once", () => {
  const assigned = named("peer a", "peer b", "hub");
  const cases: [string, SourceHealth[], number, number, SourceHealth[]][] = [
    ["a first failure", [], 0, 100, [down("peer a", 2_100, 1, 100)]],
    // Eight chunks cut by one restart: tries begun before the counted failure add nothing.
    ["the same outage", [down("peer a", 2_100, 1, 100)], 100, 150, [down("peer a", 2_100, 1, 100)]],
    ["its probe failed", [down("peer a", 2_100, 1, 100, true)], 2_200, 2_300, [
      down("peer a", 6_300, 2, 2_300),
    ]],
    ["at most 60 s", [down("peer a", 0, 6, 0)], 1, 1_000, [down("peer a", 61_000, 7, 1_000)]],
    ["the memory of an unassigned source dropped", [down("peer x", 9_000)], 0, 100, [
      down("peer a", 2_100, 1, 100),
    ]],
  ];
  for (const [what, health, startedAt, now, want] of cases) {
    assertEquals(afterFailure(assigned, health, "peer a", startedAt, now), want, what);
  }
  // Another source's failure leaves the others as they are.
  assertEquals(afterFailure(assigned, [down("peer a", 2_000)], "hub", 0, 10), [
    down("peer a", 2_000),
    down("hub", 2_010, 1, 10),
  ]);
});

Deno.test("afterFailure, afterMismatch: the backoff is jittered as retries are, half to all of it", () => {
  const assigned = named("peer a", "hub");
  const at = (random: number, failures = 0) =>
    afterFailure(
      assigned,
      failures === 0 ? [] : [down("peer a", 0, failures, 0)],
      "peer a",
      1,
      100,
      SOURCE_BACKOFF,
      () => random,
    )[0].until - 100;
  assertEquals([at(0), at(0.5), at(0.999)], [1_000, 1_500, 1_999]);
  assertEquals([at(0, 1), at(0.999, 1)], [2_000, 3_998], "the second failure: 2-4 s");
  assertEquals(at(0, 9), 30_000, "at most 60 s, at least half of it");
  const blamed = afterMismatch(assigned, [], new Set(["hub"]), 100, SOURCE_BACKOFF, () => 0);
  assertEquals(blamed, [down("hub", 1_100, 1, 100)]);
  // Agents cut by one outage come back spread over the second half of the backoff.
  const untils = new Set(
    Array.from({ length: 50 }, (_, i) => at(i / 50)),
  );
  assertEquals(untils.size, 50);
});

Deno.test("afterPick, afterSuccess, afterRelease: one probe after the backoff; a try begun after the failure decides", () => {
  const failed = [down("peer a", 2_000, 3, 0)];
  assertEquals(afterPick(failed, "peer a", 1_999), failed, "still backed off: not a probe");
  const probing = afterPick(failed, "peer a", 2_000);
  assertEquals(probing, [down("peer a", 2_000, 3, 0, true)]);
  assertEquals(afterPick(probing, "peer a", 2_500), probing, "one probe at a time");
  // A try begun before the failure says nothing of the source since.
  assertEquals(afterSuccess(failed, "peer a", 0), failed);
  assertEquals(afterSuccess(probing, "peer a", 2_000), [], "served: forgotten");
  assertEquals(afterSuccess(probing, "hub", 2_000), probing);
  // The probe's file refused for good, or the download stopped: the next try probes again.
  assertEquals(afterRelease(probing, "peer a", 2_000), failed);
  assertEquals(afterRelease(probing, "peer a", 0), probing);
});

Deno.test("afterMismatch: each source that served the rejected bytes counts a failure", () => {
  const assigned = named("peer a", "peer b", "hub");
  assertEquals(afterMismatch(assigned, [], new Set(["hub", "peer a"]), 10), [
    down("peer a", 2_010, 1, 10),
    down("hub", 2_010, 1, 10),
  ]);
  // Even right after another failure: bad bytes are not an outage other chunks share.
  assertEquals(afterMismatch(assigned, [down("peer b", 2_000, 1, 10)], new Set(["peer b"]), 10), [
    down("peer b", 4_010, 2, 10),
  ]);
  assertEquals(keepAssigned(assigned, [down("peer x", 1), down("hub", 1)]), [down("hub", 1)]);
});

/** A seeded generator (mulberry32): the same cases on every run. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

Deno.test("source order, over random runs: a permutation of the assignment; no failed source is lost past 60 s", () => {
  const random = seeded(25);
  const assigned = named("peer a", "peer b", "peer c", "hub");
  for (let run = 0; run < 200; run++) {
    let health: SourceHealth[] = [];
    let now = 0;
    const began = new Map<string, number>();
    for (let step = 0; step < 60; step++) {
      now += Math.floor(random() * 5_000);
      const source = nextSource(assigned, health, now, new Set());
      assertOk(source !== undefined);
      health = afterPick(health, source.name, now);
      began.set(source.name, now);
      const roll = random();
      const startedAt = began.get(assigned[Math.floor(random() * 4)].name) ?? now;
      const name = assigned[Math.floor(random() * 4)].name;
      if (roll < 0.5) health = afterFailure(assigned, health, name, startedAt, now);
      else if (roll < 0.8) health = afterSuccess(health, name, startedAt);
      else health = afterRelease(health, name, startedAt);
      const order = names(sourceOrder(assigned, health, now));
      assertEquals([...order].sort(), names(assigned).sort(), "a permutation");
      for (const h of health) {
        const wait = h.until - h.at;
        assertOk(wait >= 2_000 && wait <= 60_000, `backoff ${wait} ms`);
        // Once its backoff ended and no probe of it runs, it is in its place: first of the
        // sources after it in the assignment that are not backed off.
        const back = sourceOrder(assigned, health, h.until);
        if (!health.find((x) => x.name === h.name)!.probing) {
          const i = names(back).indexOf(h.name);
          const ahead = names(back).slice(0, i);
          const rank = names(assigned).indexOf(h.name);
          assertOk(
            ahead.every((n) => names(assigned).indexOf(n) < rank),
            `${h.name} at ${h.until}: ${names(back)}`,
          );
        }
      }
    }
  }
});
