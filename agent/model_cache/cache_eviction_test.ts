import { assertEquals, assertOk } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import { type CacheFs, denoCacheFs } from "./cache_fs.ts";
import { revisionKey } from "./cache_revisions.ts";
import type { ModelCache } from "./model_cache.ts";

const COMMIT_B = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";
const COMMIT_C = "1111111111111111111111111111111111111111";

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("over the high watermark, unused revisions go least recently used first; kept and shared blobs stay", async () => {
  await withTempDir(async (root) => {
    let free = 1e12;
    const fs: CacheFs = {
      ...denoCacheFs,
      diskUsage: () => Promise.resolve({ totalBytes: 100_000, freeBytes: free }),
      freeBytes: () => Promise.resolve(1e12),
    };
    const clock = new FakeClock();
    const { cache, events } = testCache(root, { fs, clock });
    const a = sampleModel(); // config seed 1
    const b = sampleModel(COMMIT_B, 7); // same shards, another config
    const c = sampleModel(COMMIT_C, 8);
    const ensure = async (m: ReturnType<typeof sampleModel>, c: ModelCache, revision?: string) => {
      clock.advance(1000);
      const hub = new MemoryByteSource("hub", m.contents);
      await c.ensureSnapshot(m.snapshot, [hub], { revision });
    };
    await ensure(a, cache, "v1");
    await ensure(b, cache, "main");
    await ensure(c, cache);
    // Last uses: a oldest, then c, then b.
    clock.advance(1000);
    await cache.markUsed("acme/tiny-llm", COMMIT_C);
    clock.advance(1000);
    await cache.markUsed("acme/tiny-llm", COMMIT_B);
    const listed = await cache.revisions();
    assertEquals(listed.length, 3);
    assertEquals(listed.find((r) => r.commit === COMMIT_B)!.refs, ["main"]);
    const keep = { revisions: new Set([revisionKey("acme/tiny-llm", COMMIT_B)]) };
    const marks = { highPercent: 90, lowPercent: 80 };
    free = 50_000; // 50 % used: nothing to do
    assertEquals(await cache.eviction.evict(keep, marks), []);
    free = 5_000; // 95 % used: evict until 80 %, which needs all that may go
    const evicted = await cache.eviction.evict(keep, marks);
    assertEquals(evicted.map((r) => r.commit), [a.snapshot.commit, COMMIT_C]);
    const repo = `${root}/models--acme--tiny-llm`;
    assertEquals(exists(`${repo}/snapshots/${a.snapshot.commit}`), false);
    assertEquals(
      exists(`${repo}/blobs/${a.snapshot.files[0].blobId}`),
      false,
      "a's own config freed",
    );
    assertEquals(exists(`${repo}/refs/v1`), false);
    // b is kept, and with it the shards all three shared.
    for (const f of b.snapshot.files) {
      assertEquals(
        await Deno.readFile(`${repo}/snapshots/${COMMIT_B}/${f.path}`),
        b.contents.get(f.path),
      );
    }
    const ev = events.filter((e) => e.kind === "evicted");
    assertEquals(ev.length, 2);
    assertOk(ev.every((e) => e.kind === "evicted" && e.reason.includes("high watermark of 90%")));
    assertEquals((await cache.revisions()).map((r) => r.commit), [COMMIT_B]);
  });
});
