/**
 * The model cache's heartbeat report and its eviction (issue #25 item 5):
 * over the high watermark the agent evicts what no desired shard uses and
 * the desired state does not pin or pull, reports what is left (pinned
 * marked), the room, and each eviction once.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { MemoryByteSource } from "../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { desiredLaunch } from "../tests/shard_launch.ts";
import { createLogger } from "../log/log.ts";
import { REPORT_BOUNDS } from "../protocol/report_bounds.ts";
import { ModelCacheReportSchema } from "../protocol/model_cache_report.ts";
import { type CacheFs, denoCacheFs } from "./model_cache/cache_fs.ts";
import type { CachedRevision } from "./model_cache/cache_revisions.ts";
import {
  keepSet,
  ModelCacheReporter,
  type ModelCacheReporterOptions,
} from "./model_cache_report.ts";

const REPO = "acme/tiny-llm";
const COMMIT_B = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";
const COMMIT_C = "1111111111111111111111111111111111111111";
const MARKS = { highPercent: 90, lowPercent: 80 };
const quiet = createLogger("agent", () => {});

/**
 * A reporter over an in-memory cache listing (`revisions`), nothing under way,
 * `room` bytes of room, and `finished` telling which downloads finished here.
 */
function listedReporter(
  revisions: () => Promise<CachedRevision[]>,
  room: number,
  finished: ModelCacheReporterOptions["finished"],
  more: Partial<ModelCacheReporterOptions> = {},
): ModelCacheReporter {
  const cache = {
    revisions,
    progress: () => [],
    eviction: { evict: () => Promise.resolve([]), room: () => Promise.resolve(room) },
  } as unknown as ModelCacheReporterOptions["cache"];
  return new ModelCacheReporter({
    cache,
    finished,
    watermarks: MARKS,
    desired: () => null,
    clock: new FakeClock(),
    log: quiet,
    ...more,
  });
}

Deno.test("over the high watermark: evicts what nothing desired keeps, reports the rest, the room and the eviction once", async () => {
  await withTempDir(async (root) => {
    let free = 50_000;
    const fs: CacheFs = {
      ...denoCacheFs,
      diskUsage: () => Promise.resolve({ totalBytes: 100_000, freeBytes: free }),
      freeBytes: () => Promise.resolve(1e12),
    };
    const clock = new FakeClock();
    let reporter: ModelCacheReporter | null = null;
    const { cache } = testCache(root, { fs, clock, onEvent: (e) => reporter?.cacheEvent(e) });
    for (const [commit, seed] of [[undefined, 1], [COMMIT_B, 7], [COMMIT_C, 8]] as const) {
      clock.advance(1000);
      const m = sampleModel(commit, seed);
      await cache.ensureSnapshot(m.snapshot, [new MemoryByteSource("hub", m.contents)]);
    }
    const a = sampleModel().snapshot.commit;
    const desired = {
      shards: [{
        id: "r1/0",
        engine: "vllm",
        launch: desiredLaunch("r1/0", { model: REPO, model_commit: COMMIT_B }),
      }],
      models: [{ model: REPO, commit: COMMIT_C, pinned: true, pull: false }],
    };
    reporter = new ModelCacheReporter({
      cache,
      watermarks: MARKS,
      desired: () => desired,
      clock,
      log: quiet,
    });
    const first = (await reporter.report())!;
    assertEquals(first.revisions.map((r) => [r.commit, r.state, r.pinned]), [
      [COMMIT_C, "complete", true],
      [COMMIT_B, "complete", false],
      [a, "complete", false],
    ]);
    assertEquals(first.evicted, []);
    assertEquals(first.omitted, 0);
    // Room: 90 % of the disk less what is used, plus what a may free (its own config).
    const aOwn = first.revisions.find((r) => r.commit === a)!;
    assertOk(first.room_bytes! >= 40_000 && first.room_bytes! < 40_000 + aOwn.bytes);
    free = 5_000; // 95 % used
    assertEquals((await reporter.report())!.evicted, [], "not refreshed within the interval");
    clock.advance(10_000);
    const second = (await reporter.report())!;
    assertEquals(second.revisions.map((r) => r.commit), [COMMIT_C, COMMIT_B]);
    assertEquals(second.evicted.map((e) => [e.repo, e.commit]), [[REPO, a]]);
    assertOk(second.evicted[0].reason.includes("high watermark of 90%"));
    reporter.delivered(second);
    assertEquals((await reporter.report())!.evicted, [], "delivered once");
  });
});

Deno.test("keep: a shard's commit, the models pinned or pulled; a shard without a commit keeps its repository", () => {
  const held = [REPO, "acme/other"].flatMap((repo) =>
    [COMMIT_B, COMMIT_C].map((commit): CachedRevision => ({
      repo,
      commit,
      blobs: new Map(),
      refs: [],
      lastUsedMs: 1,
    }))
  );
  const withCommit = {
    id: "r1/0",
    engine: "vllm",
    launch: desiredLaunch("r1/0", { model: REPO, model_commit: COMMIT_B }),
  };
  const noCommit = {
    id: "r2/0",
    engine: "vllm",
    launch: desiredLaunch("r2/0", { model: "acme/other" }),
  };
  const local = {
    id: "r3/0",
    engine: "vllm",
    launch: desiredLaunch("r3/0", { model: "/models/llama" }),
  };
  const pulled = { model: REPO, commit: COMMIT_C, pinned: false, pull: true };
  assertEquals(
    [...keepSet({ shards: [withCommit, local], models: [pulled] }, held).revisions].sort(),
    [
      `${REPO}@${COMMIT_C}`,
      `${REPO}@${COMMIT_B}`,
    ],
  );
  assertEquals([...keepSet({ shards: [noCommit] }, held).revisions].sort(), [
    `acme/other@${COMMIT_C}`,
    `acme/other@${COMMIT_B}`,
  ]);
  assertEquals(keepSet(null, held).revisions.size, 0);
});

Deno.test("the list is bounded: downloads first, then the most recently used; the rest counted", async () => {
  const held: CachedRevision[] = Array.from(
    { length: REPORT_BOUNDS.cacheRevisions + 5 },
    (_, i) => ({
      repo: `acme/m${i}`,
      commit: COMMIT_B,
      blobs: new Map([["k", 10]]),
      refs: [],
      lastUsedMs: 1000 + i,
    }),
  );
  const cache = {
    revisions: () => Promise.resolve(held),
    progress: () => [{
      repo: "acme/new",
      commit: COMMIT_C,
      bytesDone: 30,
      bytesTotal: 100,
      rateBytesPerSecond: 1,
      etaSeconds: 70,
      sources: [],
    }],
    eviction: { evict: () => Promise.resolve([]), room: () => Promise.resolve(123) },
  } as unknown as ModelCacheReporterOptions["cache"];
  const reporter = new ModelCacheReporter({
    cache,
    finished: () => Promise.resolve(true),
    watermarks: MARKS,
    desired: () => null,
    clock: new FakeClock(),
    log: quiet,
  });
  const r = (await reporter.report())!;
  assertEquals(r.revisions.length, REPORT_BOUNDS.cacheRevisions);
  assertEquals(r.omitted, 6);
  assertEquals(r.room_bytes, 123);
  assertEquals(r.revisions[0], {
    repo: "acme/new",
    commit: COMMIT_C,
    bytes: 100,
    state: "downloading",
    bytes_done: 30,
    last_used: null,
    pinned: false,
  });
  assertEquals(r.revisions[1].repo, `acme/m${REPORT_BOUNDS.cacheRevisions + 4}`);
});

Deno.test("a cache that cannot be read: null, then the last report; the agent goes on", async () => {
  let fail = true;
  const lines: string[] = [];
  const clock = new FakeClock();
  const reporter = listedReporter(
    () => fail ? Promise.reject(new Error("EIO")) : Promise.resolve([]),
    7,
    () => Promise.resolve(true),
    { clock, log: createLogger("agent", (l) => lines.push(l)) },
  );
  assertEquals(await reporter.report(), null);
  assertOk(lines.some((l) => l.includes("EIO")));
  fail = false;
  clock.advance(10_000);
  assertEquals((await reporter.report())!.room_bytes, 7);
});

Deno.test("a download that completes is read at the next report, not after the interval", async () => {
  let held: CachedRevision[] = [];
  const reporter = listedReporter(() => Promise.resolve(held), 1, () => Promise.resolve(true));
  assertEquals((await reporter.report())!.revisions, []);
  held = [{ repo: REPO, commit: COMMIT_B, blobs: new Map([["k", 5]]), refs: [], lastUsedMs: 9 }];
  assertEquals((await reporter.report())!.revisions, [], "within the interval");
  reporter.cacheEvent({ kind: "completed", repo: REPO, commit: COMMIT_B, bytes: 5, path: "/x" });
  assertEquals((await reporter.report())!.revisions.map((r) => r.commit), [COMMIT_B]);
});

Deno.test("a revision whose download never finished here is partial, not complete", async () => {
  const held: CachedRevision[] = [REPO, "acme/other"].map((repo) => ({
    repo,
    commit: COMMIT_B,
    blobs: new Map([["k", 5]]),
    refs: [],
    lastUsedMs: 9,
  }));
  const reporter = listedReporter(
    () => Promise.resolve(held),
    1,
    (repo) => Promise.resolve(repo === REPO),
  );
  assertEquals((await reporter.report())!.revisions.map((r) => [r.repo, r.state, r.bytes_done]), [
    ["acme/other", "partial", 5],
    [REPO, "complete", 5],
  ]);
});

Deno.test("a download that finishes between the listing and its record's check is reported whole", async () => {
  // The first listing caught the snapshot with one of its two files linked; the record of the
  // finished download is seen right after.
  let listings = 0;
  const partial: CachedRevision = {
    repo: REPO,
    commit: COMMIT_B,
    blobs: new Map([["a", 5]]),
    refs: [],
    lastUsedMs: 9,
  };
  const whole = { ...partial, blobs: new Map([["a", 5], ["b", 7]]) };
  const reporter = listedReporter(
    () => Promise.resolve([listings++ === 0 ? partial : whole]),
    1,
    () => Promise.resolve(true),
  );
  assertEquals((await reporter.report())!.revisions.map((r) => [r.state, r.bytes]), [
    ["complete", 12],
  ]);
  // Once seen finished, the next refresh lists once.
  listings = 0;
  reporter.cacheEvent({ kind: "completed", repo: "x/y", commit: COMMIT_C, bytes: 1, path: "/p" });
  await reporter.report();
  assertEquals(listings, 1);
});

Deno.test("an engine cache eviction whose walk was cut short is reported as 'at least' its bytes", async () => {
  const reporter = listedReporter(() => Promise.resolve([]), 7, () => Promise.resolve(true));
  const evicted = (key: string, atLeast: boolean) => ({
    engine: "vllm",
    key,
    model: null,
    revision: null,
    bytes: 4096,
    atLeast,
    cause: "disk_pressure" as const,
    reason: "disk full",
  });
  reporter.engineCacheEvicted(evicted("whole", false));
  reporter.engineCacheEvicted(evicted("cut", true));
  const report = (await reporter.report())!;
  assertEquals(report.engine_caches_evicted?.map((e) => [e.key, e.bytes_at_least]), [
    ["whole", undefined],
    ["cut", true],
  ]);
  assertEquals(ModelCacheReportSchema.safeParse(report).success, true);
});
