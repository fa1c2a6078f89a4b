/**
 * A model revision evicted under the watermarks takes its engine compile
 * caches with it, through the agent's own hook (the model cache reporter's
 * refresh, then the keeper's sweep, as agent/agent_supervisor.ts wires
 * them), over a real model cache; the revision a desired shard keeps keeps
 * its directory too. The heartbeat never waits for that sweep: the report
 * after it carries the eviction.
 */
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { COMMIT, sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import { desiredLaunch } from "../../tests/shard_launch.ts";
import { createLogger } from "../../log/log.ts";
import { type CacheFs, denoCacheFs } from "../model_cache/cache_fs.ts";
import { revisionKey } from "../model_cache/cache_revisions.ts";
import { ModelCacheReporter } from "../model_cache_report.ts";
import {
  type ModelCacheReport,
  ModelCacheReportSchema,
} from "../../protocol/model_cache_report.ts";
import { type EngineCacheEvicted, EngineCacheKeeper } from "./engine_cache_keeper.ts";
import { treeBytes } from "./tree_bytes.ts";

const REPO = "acme/tiny-llm";
const KEPT = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";
const MARKS = { highPercent: 90, lowPercent: 80 };

Deno.test("a revision evicted from the model cache takes its engine caches; a kept one keeps its own", async () => {
  await withTempDir(async (root) => {
    let free = 50_000;
    const fs: CacheFs = {
      ...denoCacheFs,
      diskUsage: () => Promise.resolve({ totalBytes: 100_000, freeBytes: free }),
      freeBytes: () => Promise.resolve(1e12),
    };
    const clock = new FakeClock();
    let reporter: ModelCacheReporter | null = null;
    const { cache } = testCache(`${root}/models`, {
      fs,
      clock,
      onEvent: (e) => reporter?.cacheEvent(e),
    });
    for (const [commit, seed] of [[COMMIT, 1], [KEPT, 7]] as const) {
      clock.advance(1000);
      const m = sampleModel(commit, seed);
      await cache.ensureSnapshot(m.snapshot, [new MemoryByteSource("hub", m.contents)]);
    }
    const shard = (id: string, commit: string) => ({
      id,
      engine: "vllm",
      launch: desiredLaunch(id, { model: REPO, model_commit: commit }),
    });
    const running = shard("r1/0", KEPT);
    const desired = { shards: [running], models: [] };
    const evicted: EngineCacheEvicted[] = [];
    // The engine caches' walk hangs until the test lets it go: a slow or stalled state dir.
    let stuck: PromiseWithResolvers<void> | null = null;
    const keeper = new EngineCacheKeeper({
      root: `${root}/engine_cache`,
      inUse: () => desired.shards,
      held: async () =>
        new Set((await cache.revisions()).map((r) => revisionKey(r.repo, r.commit))),
      installed: () => null,
      marks: MARKS,
      clock,
      log: createLogger("agent", () => {}),
      onEvicted: (e) => {
        evicted.push(e);
        reporter?.engineCacheEvicted(e);
      },
      // The engine caches' own disk is roomy: only the revision's eviction moves them.
      fs: { ...denoCacheFs, diskUsage: () => Promise.resolve({ totalBytes: 1e9, freeBytes: 9e8 }) },
      bytes: async (dir) => {
        await stuck?.promise;
        return treeBytes(dir);
      },
    });
    reporter = new ModelCacheReporter({
      cache,
      watermarks: MARKS,
      desired: () => desired,
      clock,
      log: createLogger("agent", () => {}),
    });
    reporter.afterEviction(() => keeper.sweep());

    // An earlier shard of the old commit compiled here, and so did the running one.
    const old = await keeper.use("vllm", shard("r0/0", COMMIT).launch);
    const kept = await keeper.use("vllm", running.launch);
    for (const dir of [old, kept]) await Deno.writeFile(`${dir}/graph.bin`, new Uint8Array(4096));
    assertEquals((await reporter.report())!.evicted, [], "under the high watermark");

    free = 5_000;
    clock.advance(10_000);
    stuck = Promise.withResolvers<void>();
    let first: ModelCacheReport | null = null;
    const reporting = reporter.report().then((r) => first = r);
    try {
      await until("the heartbeat's report, while the engine caches' walk hangs", () => first, {
        timeoutMs: 5_000,
      });
    } finally {
      stuck.resolve();
      await reporting;
    }
    assertEquals(first!.evicted.map((e) => e.commit), [COMMIT]);
    assertEquals(first!.engine_caches_evicted, undefined, "the sweep has not run yet");
    await keeper.sweep();
    const report = (await reporter.report())!;
    assertOk(!(await exists(old)), "the evicted revision's compile cache is gone");
    assertOk(await exists(`${kept}/graph.bin`), "the running shard's stays");
    assertEquals(evicted.map((e) => [e.revision, e.cause]), [[COMMIT, "revision_evicted"]]);
    // The next heartbeat carries it for the control plane, once.
    const sent = report.engine_caches_evicted ?? [];
    assertEquals(sent.map((e) => [e.engine, e.model, e.commit, e.cause]), [
      ["vllm", REPO, COMMIT, "revision_evicted"],
    ]);
    assertEquals(sent[0].key, old.split("/").at(-1));
    assertOk(sent[0].bytes >= 4096 && sent[0].reason.includes("no longer in the model cache"));
    assertEquals(ModelCacheReportSchema.safeParse(report).success, true);
    reporter.delivered(report);
    assertEquals((await reporter.report())!.engine_caches_evicted, undefined, "delivered once");
  });
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}
