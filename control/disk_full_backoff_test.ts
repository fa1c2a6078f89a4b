/**
 * The disk-full backoff's rule (control/disk_full_backoff.ts): the delays
 * in a row, what lifts a hold (time, or room grown by the revision's size),
 * when the count starts over, and on random histories the invariants.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import {
  afterDiskFull,
  DISK_FULL_BACKOFF,
  type DiskFull,
  DiskFullBook,
  type DiskFullFacts,
  diskFullHold,
  FORGET_AFTER_MS,
  roomToRetry,
  withRoomReport,
} from "./disk_full_backoff.ts";

const GIB = 2 ** 30;
const T0 = 1_700_000_000_000;
const REV = "acme/llm@4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";

function facts(at: number, room: number | null = 100 * GIB, needed: number | null = 15 * GIB) {
  return {
    node: "n1",
    revision: REV,
    name: "acme/llm@4b1c2a9",
    at,
    needed,
    room,
    reason: "Cannot fetch acme/llm@4b1c2a9 into /cache: needs 15.0 GiB more, 2.0 GiB free " +
      "(insufficient_disk)",
  } satisfies DiskFullFacts;
}

Deno.test("delays in a row: 30 s doubling to at most 10 min", () => {
  const table: [number, number][] = [
    [1, 30_000],
    [2, 60_000],
    [3, 120_000],
    [4, 240_000],
    [5, 480_000],
    [6, 600_000],
    [7, 600_000],
    [20, 600_000],
  ];
  let d: DiskFull | null = null;
  for (let n = 1; n <= 20; n++) {
    d = afterDiskFull(d, facts(T0 + n));
    const want = table.find(([k]) => k === n)?.[1];
    if (want !== undefined) assertEquals([n, d.until - d.at], [n, want]);
  }
});

Deno.test("a hold lifts when its backoff ends, or once the reported room grew by the revision's size", () => {
  const d = afterDiskFull(null, facts(T0, 100 * GIB, 15 * GIB));
  const cases: { name: string; room: number | null; now: number; held: boolean }[] = [
    { name: "just after", room: 100 * GIB, now: T0, held: true },
    { name: "a moment before the end", room: 100 * GIB, now: d.until - 1, held: true },
    { name: "at the end", room: 100 * GIB, now: d.until, held: false },
    { name: "room grew, not enough", room: 115 * GIB - 1, now: T0 + 1, held: true },
    { name: "room grew by the size", room: 115 * GIB, now: T0 + 1, held: false },
    { name: "room unknown", room: null, now: T0 + 1, held: true },
  ];
  for (const c of cases) {
    assertEquals(diskFullHold(d, c.room, c.now) !== null, c.held, c.name);
  }
  const text = diskFullHold(d, 100 * GIB, T0 + 25_000)!;
  assertEquals(
    text,
    "ran out of disk fetching acme/llm@4b1c2a9 25s ago (its agent: needs 15.0 GiB more, 2.0 GiB " +
      "free; it reported room for 100.0 GiB); retried after 2023-11-14T22:13:50.000Z (disk-full 1 " +
      "in a row), or sooner once its reported room reaches 115.0 GiB",
  );
  // Words the agent did not say are left out rather than guessed.
  const quiet = afterDiskFull(null, { ...facts(T0, null), reason: "disk full" });
  assertStringIncludes(diskFullHold(quiet, null, T0)!, "acme/llm@4b1c2a9 just now; retried after");
  assertStringIncludes(diskFullHold(d, 100 * GIB, T0)!, "acme/llm@4b1c2a9 just now");
  // Unknown size: only time lifts it, and nothing promises otherwise.
  const unsized = afterDiskFull(null, facts(T0, 100 * GIB, null));
  assertEquals(roomToRetry(unsized), null);
  assertOk(diskFullHold(unsized, 10_000 * GIB, T0 + 1) !== null);
  assertOk(!diskFullHold(unsized, 0, T0 + 1)!.includes("reaches"));
});

Deno.test("room grows from the lowest report since the failure: an honest low report lets it back sooner", () => {
  let d = afterDiskFull(null, facts(T0, 100 * GIB));
  d = withRoomReport(d, 1 * GIB); // the agent's next report, after the fetch freed its part files
  d = withRoomReport(d, 50 * GIB); // higher reports never raise it
  assertEquals(d.roomLow, 1 * GIB);
  assertEquals(roomToRetry(d), 16 * GIB);
  assertEquals(diskFullHold(d, 16 * GIB, T0 + 1), null);
  assertEquals(withRoomReport(d, null), d);
});

Deno.test("the book: counts in a row, starts over on a held revision or after an hour, forgets a node", () => {
  const book = new DiskFullBook();
  assertEquals(book.record(facts(T0)).failures, 1);
  assertEquals(book.record(facts(T0 + 40_000)).failures, 2);
  assertEquals([...book.holds("n1", 100 * GIB, T0 + 50_000).keys()], [REV]);
  assertEquals(book.holds("n2", 100 * GIB, T0 + 50_000).size, 0);
  // A fetch there succeeded: the node reports the revision held.
  book.observe("n1", 100 * GIB, new Set([REV]), T0 + 60_000);
  assertEquals(book.get("n1", REV), undefined);
  assertEquals(book.record(facts(T0 + 70_000)).failures, 1);
  // Quiet for an hour after its backoff: forgotten, and a later one starts at 30 s.
  const d = book.record(facts(T0 + 80_000));
  assertEquals(d.failures, 2);
  const later = d.until + FORGET_AFTER_MS;
  assertEquals(book.record(facts(later)).failures, 1);
  book.observe("n1", 5 * GIB, new Set(), later + 1);
  assertEquals(book.get("n1", REV)?.roomLow, 5 * GIB);
  book.forget("n1");
  assertEquals(book.get("n1", REV), undefined);
});

/** A small deterministic generator (xorshift32), so a failing seed can be replayed. */
function rng(seed: number): () => number {
  let x = seed || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

Deno.test("on random histories: the delay is bounded and grows in a row; a hold never outlives its backoff; room lifts it exactly", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const rand = rng(seed);
    const book = new DiskFullBook();
    let now = T0;
    let lastDelay = 0;
    let low: number | null = null;
    const needed = Math.floor(rand() * 200) * GIB;
    for (let step = 0; step < 60; step++) {
      const room = Math.floor(rand() * 400) * GIB;
      const roll = rand();
      if (roll < 0.3) {
        const prev = book.get("n1", REV);
        const d = book.record(facts(now, room, needed));
        const delay = d.until - d.at;
        assertOk(
          delay >= DISK_FULL_BACKOFF.initialMs && delay <= DISK_FULL_BACKOFF.maxMs,
          `${seed}`,
        );
        if (prev !== undefined && d.failures > 1) assertOk(delay >= lastDelay, `seed ${seed}`);
        lastDelay = delay;
        low = room;
      } else if (roll < 0.6) {
        book.observe("n1", room, new Set(), now);
        if (book.get("n1", REV) === undefined) low = null;
        else low = low === null ? room : Math.min(low, room);
      } else {
        now += Math.floor(rand() * 700_000);
      }
      const d = book.get("n1", REV);
      if (d === undefined) continue;
      assertEquals(d.roomLow, low, `seed ${seed}: lowest room since the failure`);
      const held = book.holds("n1", room, now).has(REV);
      const byTime = now < d.until;
      const byRoom = room < d.roomLow! + needed;
      assertEquals(held, byTime && byRoom, `seed ${seed} step ${step}`);
    }
  }
});
