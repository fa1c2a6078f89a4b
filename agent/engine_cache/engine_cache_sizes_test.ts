import { assertEquals } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import type { EngineCacheEntry } from "./engine_cache_plan.ts";
import { EngineCacheSizes, SIZING_MS, WALK_MS } from "./engine_cache_sizes.ts";

const entry = (dir: string, lastUsedMs: number): EngineCacheEntry => ({
  dir,
  key: null,
  lastUsedMs,
});

const whole = (bytes: number) => Promise.resolve({ bytes, complete: true });

Deno.test("sizes: walked once while the last use stays, again once a start used it", async () => {
  const clock = new FakeClock();
  const walked: [string, number][] = [];
  const sizes = new EngineCacheSizes(clock, (dir, stopAtMs) => {
    walked.push([dir, stopAtMs]);
    return whole(100);
  });
  assertEquals((await sizes.size(entry("a", 1))).bytes, 100);
  assertEquals((await sizes.size(entry("a", 1))).bytes, 100);
  assertEquals(walked, [["a", clock.now() + WALK_MS]], "each walk has its time bound");
  await sizes.size(entry("a", 2));
  assertEquals(walked.length, 2, "used again: walked again");
  sizes.keepOnly(new Set());
  await sizes.size(entry("a", 2));
  assertEquals(walked.length, 3, "forgotten once gone");
});

Deno.test("sizes: a walk cut short is not remembered: the next sweep walks the directory again", async () => {
  const clock = new FakeClock();
  let walks = 0;
  // The first walk of a big tree runs out of time; the second gets through it.
  const sizes = new EngineCacheSizes(
    clock,
    () =>
      Promise.resolve(
        ++walks === 1 ? { bytes: 10, complete: false } : { bytes: 500, complete: true },
      ),
  );
  assertEquals(await sizes.size(entry("a", 1)), { ...entry("a", 1), bytes: 10, complete: false });
  assertEquals(await sizes.size(entry("a", 1)), { ...entry("a", 1), bytes: 500, complete: true });
  await sizes.size(entry("a", 1));
  assertEquals(walks, 2, "a whole size is remembered");
});

Deno.test("sizes: a prefix stops once enough is found, or when its time is spent", async () => {
  const clock = new FakeClock();
  const walked: string[] = [];
  let walkMs = 0;
  const sizes = new EngineCacheSizes(clock, (dir) => {
    walked.push(dir);
    clock.advance(walkMs);
    return whole(100);
  });
  const all = ["a", "b", "c", "d"].map((d) => entry(d, 1));
  assertEquals((await sizes.prefix(all, 150)).map((e) => e.dir), ["a", "b"]);
  assertEquals(walked, ["a", "b"]);
  // Slow walks: the second one ends past the budget, so the third is not begun.
  walkMs = SIZING_MS / 2 + 1;
  sizes.keepOnly(new Set());
  walked.length = 0;
  assertEquals((await sizes.prefix(all, 1000)).map((e) => e.dir), ["a", "b"]);
  // The next sweep goes on from what is remembered.
  walkMs = 0;
  assertEquals((await sizes.prefix(all, 1000)).map((e) => e.dir), ["a", "b", "c", "d"]);
  assertEquals(walked, ["a", "b", "c", "d"]);
});

Deno.test("sizes: once the signal is aborted, no walk begins and the one under way is told", async () => {
  const clock = new FakeClock();
  const stop = new AbortController();
  const told: (AbortSignal | undefined)[] = [];
  const sizes = new EngineCacheSizes(clock, (_dir, _stopAtMs, signal) => {
    told.push(signal);
    stop.abort();
    return whole(1);
  }, stop.signal);
  const all = ["a", "b", "c"].map((d) => entry(d, 1));
  assertEquals((await sizes.prefix(all, 1000)).map((e) => e.dir), ["a"]);
  assertEquals(told, [stop.signal]);
  assertEquals(await sizes.prefix(all, 1000), [], "stopped: nothing");
});
