/**
 * The model cache's faults (issue #25 items 2 and 8): wrong bytes, a source
 * dying mid-chunk, short and long streams, every source failing, a full
 * disk before and during a download; plus the rate limit and progress.
 */
import { assertEquals, assertOk, assertRejects } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { DownloadFailedError } from "./download_failed.ts";
import type { CacheEvent } from "./cache_events.ts";
import { type CacheFs, denoCacheFs } from "./cache_fs.ts";
import { InsufficientDiskError } from "./disk_space.ts";
import {
  diskThatFills,
  sampleModel,
  testCache,
  withTempDir,
} from "../../tests/model_cache_fixture.ts";
import { ModelCache } from "./model_cache.ts";

const SHARD = "model-00001-of-00002.safetensors";

/** Names in the repository's blobs folder. */
function blobNames(root: string): string[] {
  try {
    return [...Deno.readDirSync(`${root}/models--acme--tiny-llm/blobs`)].map((e) => e.name).sort();
  } catch {
    return [];
  }
}

const ofKind = <K extends CacheEvent["kind"]>(events: CacheEvent[], kind: K) =>
  events.filter((e): e is Extract<CacheEvent, { kind: K }> => e.kind === kind);

Deno.test("wrong bytes: the file is deleted, an event says so, and it is fetched from the next source", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const bad = new MemoryByteSource("peer-a", contents, [{ kind: "corrupt", file: SHARD }]);
    const good = new MemoryByteSource("https://hub.example", contents);
    const file = snapshot.files.find((f) => f.path === SHARD)!;
    const blob = `${root}/models--acme--tiny-llm/blobs/${file.sha256}`;
    let checks = 0;
    // At every source call, no unverified content is under the blob's final name.
    for (const s of [bad, good]) {
      s.onRead = (r) => {
        if (r.file !== SHARD) return;
        checks++;
        let exists = true;
        try {
          Deno.lstatSync(blob);
        } catch {
          exists = false;
        }
        assertEquals(exists, false, `blobs/<key> exists before verification (read ${r.start})`);
      };
    }
    const { cache, events } = testCache(root);
    await cache.ensureSnapshot(snapshot, [bad, good]);
    assertEquals(await Deno.readFile(blob), contents.get(SHARD));
    const [mismatch] = ofKind(events, "mismatch");
    assertEquals(mismatch.file, SHARD);
    assertEquals(mismatch.sources, ["peer-a"]);
    assertEquals(mismatch.want, file.sha256);
    assertOk(good.reads.some((r) => r.file === SHARD), "fetched again from the hub");
    assertOk(checks >= 10, `checked at every read (${checks})`);
  });
});

Deno.test("wrong bytes from every source: final (hash_mismatch); from some sources only: tried again later", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const corrupt = (name: string) =>
      new MemoryByteSource(name, contents, [{ kind: "corrupt", file: SHARD }]);
    const { cache } = testCache(root, { verifyAttempts: 3 });
    const every = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [corrupt("peer-a"), corrupt("https://hub.example")]),
      DownloadFailedError,
      "after 3 fetches, from every source",
    ) as DownloadFailedError;
    assertEquals([every.retryable, every.kind], [false, "hash_mismatch"]);
    // One fetch, from the first of three: the other two may hold the right bytes.
    const { cache: once } = testCache(`${root}/once`, { verifyAttempts: 1 });
    const some = await assertRejects(
      () => once.ensureSnapshot(snapshot, [corrupt("a"), corrupt("b"), corrupt("c")]),
      DownloadFailedError,
    ) as DownloadFailedError;
    assertEquals([some.retryable, some.kind], [true, null]);
    // The plan named no source any more when the fetch gave up: not final either.
    const { cache: replanned, events } = testCache(`${root}/replanned`, {
      verifyAttempts: 1,
      concurrency: 1,
    });
    const bad = corrupt("peer-a");
    const gone = await assertRejects(
      () =>
        replanned.ensureSnapshot(
          { ...snapshot, files: snapshot.files.filter((f) => f.path === SHARD) },
          () => ofKind(events, "mismatch").length > 0 ? [] : [bad],
        ),
      DownloadFailedError,
    ) as DownloadFailedError;
    assertEquals([gone.retryable, gone.kind], [true, null]);
  });
});

Deno.test("a source that dies mid-chunk: the rest of the range comes from the next source", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const dying = new MemoryByteSource("peer-a", contents, [
      { kind: "break_at", file: SHARD, offset: 1024 + 300, times: 1 },
    ]);
    const other = new MemoryByteSource("peer-b", contents);
    const { cache, events } = testCache(root, { concurrency: 1 });
    await cache.ensureSnapshot(snapshot, [dying, other]);
    const file = snapshot.files.find((f) => f.path === SHARD)!;
    assertEquals(
      await Deno.readFile(`${root}/models--acme--tiny-llm/blobs/${file.sha256}`),
      contents.get(SHARD),
    );
    // peer-a delivered 300 bytes of chunk 1 before the reset: peer-b is asked for the rest only.
    assertEquals(other.reads.filter((r) => r.file === SHARD)[0], {
      file: SHARD,
      start: 1024 + 300,
      end: 2048,
    });
    const [failed] = ofKind(events, "chunk_failed");
    assertEquals([failed.source, failed.range, failed.attempt], ["peer-a", "1024-2048", 1]);
    const [changed] = ofKind(events, "source_changed");
    assertEquals([changed.from, changed.to], ["peer-a", "peer-b"]);
    assertOk(changed.reason.includes("connection reset"), changed.reason);
  });
});

Deno.test("short and long streams are failures of the source, never accepted bytes", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const odd = new MemoryByteSource("peer-a", contents, [
      { kind: "short", file: SHARD, offset: 500, times: 1 },
      { kind: "long", file: SHARD, offset: 2048, times: 1 },
    ]);
    const { cache, events } = testCache(root, { concurrency: 1 });
    await cache.ensureSnapshot(snapshot, [odd]);
    const errors = ofKind(events, "chunk_failed").map((e) => e.error);
    assertOk(errors.some((e) => e.includes("early, at byte")), errors.join("; "));
    assertOk(errors.some((e) => e.includes("sent more than")), errors.join("; "));
    assertEquals(ofKind(events, "mismatch"), []);
  });
});

Deno.test("every source failing: a bounded number of tries, then a clear error and a failed event", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const a = new MemoryByteSource("peer-a", contents, [{ kind: "refuse", file: SHARD }]);
    const b = new MemoryByteSource("peer-b", contents, [{ kind: "refuse", file: SHARD }]);
    const slept: number[] = [];
    const { cache, events } = testCache(root, {
      attemptsPerSource: 2,
      sleep: (ms) => {
        slept.push(ms);
        return Promise.resolve();
      },
      retryPolicy: { initialMs: 100, maxMs: 1_000, factor: 2 },
    });
    const e = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [a, b]),
      DownloadFailedError,
      `Cannot fetch acme/tiny-llm ${SHARD} bytes`,
    );
    assertOk(e.message.includes("4 tries failed"), e.message);
    assertOk(e.message.includes("connection refused"), e.message);
    const firstChunkTries = [...a.reads, ...b.reads].filter((r) =>
      r.file === SHARD && r.start === 0
    );
    assertEquals(firstChunkTries.length <= 4, true);
    // Backoff grows between tries (random 0 → half of each step).
    assertOk(slept.includes(50) && slept.includes(100), slept.join(","));
    const [failed] = ofKind(events, "failed");
    assertEquals(failed.file, SHARD);
  });
});

Deno.test("tries are counted per source: a re-plan that leaves one source still gives it its tries", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const peers = ["p1", "p2", "p3", "p4"].map((n) =>
      new MemoryByteSource(n, contents, [{ kind: "refuse", file: SHARD }])
    );
    const hub = new MemoryByteSource("hub", contents, [{ kind: "refuse", file: SHARD, times: 1 }]);
    let assigned: MemoryByteSource[] = [...peers, hub];
    let peerFailures = 0;
    for (const p of peers) {
      p.onRead = (r) => {
        // Four peers failed the chunk once each: the control plane re-plans to the hub alone.
        if (r.file === SHARD && ++peerFailures === peers.length) assigned = [hub];
      };
    }
    // One chunk at a time: the shard's first chunk meets every failure.
    const { cache, events } = testCache(root, { concurrency: 1, attemptsPerSource: 3 });
    await cache.ensureSnapshot(snapshot, () => assigned);
    const tries = ofKind(events, "chunk_failed").map((e) => `${e.source}#${e.attempt}`);
    assertEquals(tries, ["p1#1", "p2#2", "p3#3", "p4#4", "hub#5"]);
    assertEquals(ofKind(events, "completed").length, 1);
    // The hub alone, failing every time, still has its bound: 3 tries of the chunk.
    hub.faults = [{ kind: "refuse", file: SHARD }];
    const { cache: again, events: later } = testCache(`${root}/again`, { attemptsPerSource: 3 });
    await assertRejects(
      () => again.ensureSnapshot(snapshot, () => [hub]),
      DownloadFailedError,
      "3 tries failed, the last on hub",
    );
    const perChunk = Map.groupBy(ofKind(later, "chunk_failed"), (e) => e.range);
    assertOk(
      [...perChunk.values()].every((fails) => fails.length <= 3),
      [...perChunk.keys()].join(),
    );
  });
});

Deno.test("not enough free space: refused before any byte is fetched", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("hub", contents);
    const fs: CacheFs = { ...denoCacheFs, freeBytes: () => Promise.resolve(4096) };
    const { cache, events } = testCache(root, { fs });
    const e = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [hub]),
      InsufficientDiskError,
      "insufficient_disk",
    ) as InsufficientDiskError;
    assertEquals(e.neededBytes, snapshot.files.reduce((n, f) => n + f.size, 0));
    assertEquals(e.freeBytes, 4096);
    assertEquals(hub.reads, []);
    assertEquals(ofKind(events, "failed").length, 1);
  });
});

Deno.test("disk full midway: partial files removed, InsufficientDiskError with bytes needed and free", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("hub", contents);
    const fs = diskThatFills(4000); // the disk fills after 40 KiB of the model's 128 KiB of weights
    const { cache, events } = testCache(root, { fs });
    const e = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [hub]),
      InsufficientDiskError,
      "Cannot fetch acme/tiny-llm@",
    ) as InsufficientDiskError;
    assertEquals(e.freeBytes, 0);
    assertOk(e.neededBytes > 0, String(e.neededBytes));
    assertEquals(blobNames(root).filter((n) => n.includes(".llmgw")), [], "partial files removed");
    assertEquals(ofKind(events, "failed").length, 1);
    assertEquals(cache.progress(), []);
  });
});

Deno.test("the download rate holds across parallel chunks; progress is readable midway", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const clock = new FakeClock();
    const start = clock.now();
    const hub = new MemoryByteSource("https://hub.example", contents, [], "hub");
    const cache = new ModelCache({
      root,
      chunkBytes: 1024,
      concurrency: 4,
      rateBytesPerSecond: 1024,
      clock,
      sleep: (ms) => {
        clock.advance(ms);
        return Promise.resolve();
      },
    });
    let seen = cache.progress();
    hub.onRead = (r) => {
      if (r.file === SHARD && r.start === 4096) seen = cache.progress();
    };
    await cache.ensureSnapshot(snapshot, [hub]);
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    // 8499 bytes at 1 KiB/s after a 1 KiB burst: at least 7.2 s of (fake) time.
    assertOk(clock.now() - start >= ((total - 1024) * 1000) / 1024 - 1, `${clock.now() - start}`);
    assertEquals(seen.length, 1);
    assertEquals([seen[0].repo, seen[0].bytesTotal], ["acme/tiny-llm", total]);
    assertOk(seen[0].bytesDone > 0 && seen[0].bytesDone < total, String(seen[0].bytesDone));
    assertOk(
      seen[0].rateBytesPerSecond > 0 && seen[0].rateBytesPerSecond <= 2048, // the limit, plus its 1 s burst early on
      JSON.stringify(seen[0]),
    );
    assertEquals(seen[0].sources, ["https://hub.example"]);
    assertEquals(cache.progress(), []);
  });
});

Deno.test("a source's final answer (gated, unknown file) is not retried: the next source, or a clear failure", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("https://hub.example", contents, [{
      kind: "deny",
      file: SHARD,
    }], "hub");
    const slept: number[] = [];
    const { cache, events } = testCache(root, {
      sleep: (ms) => {
        slept.push(ms);
        return Promise.resolve();
      },
    });
    const e = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [hub]),
      DownloadFailedError,
      "https://hub.example refused it: https://hub.example: 403 access to model is restricted: set HF_TOKEN",
    ) as DownloadFailedError;
    assertEquals(e.retryable, false);
    assertEquals(
      hub.reads.filter((r) => r.file === SHARD && r.start === 0).length,
      1,
      "asked once",
    );
    assertEquals(slept, [], "no backoff before a final answer");
    assertEquals(ofKind(events, "failed")[0].file, SHARD);
    // A peer holding the file serves it; the refusing hub is not asked for it again.
    const peer = new MemoryByteSource("peer-b", contents);
    const hub2 = new MemoryByteSource("https://hub.example", contents, [{
      kind: "deny",
      file: SHARD,
    }], "hub");
    await cache.ensureSnapshot(snapshot, [hub2, peer]);
    assertEquals(
      hub2.reads.filter((r) => r.file === SHARD).length <= 3,
      true,
      "one try per chunk in flight",
    );
    assertOk(peer.reads.some((r) => r.file === SHARD));
  });
});

Deno.test("peers that refuse a file for good are not final: the download is asked again later; a hub's refusal is", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    // A parent peer that restarted holds nothing yet (not_held past its wait), origin off.
    const deny = () => [{ kind: "deny" as const, file: SHARD }];
    const a = new MemoryByteSource("peer a", contents, deny());
    const b = new MemoryByteSource("peer b", contents, deny());
    const { cache } = testCache(root);
    const e = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [a, b]),
      DownloadFailedError,
      "peer a refused it",
    ) as DownloadFailedError;
    assertEquals(e.retryable, true, e.message);
    // The same refusals with the hub's among them: the hub says what exists, final.
    const hub = new MemoryByteSource("https://hub.example", contents, deny(), "hub");
    const c = new MemoryByteSource("peer c", contents, deny());
    const final = await assertRejects(
      () => cache.ensureSnapshot(snapshot, [c, hub]),
      DownloadFailedError,
      "https://hub.example refused it",
    ) as DownloadFailedError;
    assertEquals(final.retryable, false, final.message);
    // Asked again later, the peer that now holds it serves it.
    await cache.ensureSnapshot(snapshot, [new MemoryByteSource("peer a", contents)]);
  });
});
