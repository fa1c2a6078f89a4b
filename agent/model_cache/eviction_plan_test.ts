import { assertEquals, assertThrows } from "../../tests/assert.ts";
import type { CachedRevision } from "./cache_revisions.ts";
import {
  checkWatermarks,
  parseWatermark,
  planEviction,
  roomUnderHighWatermark,
  WatermarkError,
} from "./eviction_plan.ts";

const rev = (commit: string, lastUsedMs: number, blobs: [string, number][]): CachedRevision => ({
  repo: "acme/m",
  commit,
  blobs: new Map(blobs),
  refs: [],
  lastUsedMs,
});
const marks = { highPercent: 90, lowPercent: 80 };
const none = () => false;

Deno.test("nothing is evicted at or under the high watermark", () => {
  const revs = [rev("a", 1, [["x", 50]])];
  assertEquals(planEviction(revs, { totalBytes: 1000, freeBytes: 100 }, marks, none).evict, []);
});

Deno.test("over the high watermark: least recently used first, down to the low one", () => {
  const revs = [
    rev("new", 30, [["n", 60]]),
    rev("old", 10, [["o", 60]]),
    rev("mid", 20, [["m", 60]]),
  ];
  // 950 of 1000 used: down to 800 needs 150 bytes, so three 60-byte revisions.
  const plan = planEviction(revs, { totalBytes: 1000, freeBytes: 50 }, marks, none);
  assertEquals(plan.evict.map((r) => r.commit), ["old", "mid", "new"]);
  assertEquals(plan.freedBytes, 180);
  // 910 used: 110 bytes to free, two revisions do it.
  const two = planEviction(revs, { totalBytes: 1000, freeBytes: 90 }, marks, none);
  assertEquals(two.evict.map((r) => r.commit), ["old", "mid"]);
});

Deno.test("kept revisions stay; a shared blob is freed only with its last revision", () => {
  const revs = [
    rev("a", 1, [["shared", 100], ["a1", 10]]),
    rev("b", 2, [["shared", 100]]),
    rev("c", 3, [["c1", 5]]),
  ];
  const keepC = (r: CachedRevision) => r.commit === "c";
  const plan = planEviction(revs, { totalBytes: 1000, freeBytes: 0 }, marks, keepC);
  assertEquals(plan.evict.map((r) => r.commit), ["a", "b"]);
  assertEquals(plan.freedBytes, 110);
  // Room under 90 % of 1000 with 1000 used, after evicting a and b: 900 - 1000 + 110 = 10.
  assertEquals(roomUnderHighWatermark(revs, { totalBytes: 1000, freeBytes: 0 }, marks, keepC), 10);
  assertEquals(
    roomUnderHighWatermark(revs, { totalBytes: 1000, freeBytes: 0 }, marks, () => true),
    0,
  );
});

Deno.test("watermarks are percents, the low one under the high one", () => {
  assertEquals(parseWatermark("90%", "--cache-high"), 90);
  assertEquals(parseWatermark(" 85.5 ", "--cache-low"), 85.5);
  assertThrows(
    () => parseWatermark("", "--cache-high"),
    WatermarkError,
    "Cannot parse --cache-high: value is empty",
  );
  assertThrows(() => parseWatermark("120%", "--cache-high"), WatermarkError, "not a percent");
  assertThrows(() => parseWatermark("10GB", "--cache-low"), WatermarkError, "--cache-low");
  assertThrows(
    () => checkWatermarks({ highPercent: 80, lowPercent: 90 }),
    WatermarkError,
    "must be under",
  );
});
