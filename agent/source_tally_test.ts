/**
 * Which sources supplied a snapshot's bytes: counted as the model cache
 * streams them, whichever source it moves a range to, frozen at completion;
 * only bytes the download keeps (review 1, finding 9).
 */
import { assertEquals } from "../tests/assert.ts";
import { MemoryByteSource } from "../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import type { ModelCacheOptions } from "./model_cache/model_cache.ts";
import { SourceTallies } from "./source_tally.ts";

const HUB = "http://hub.test";
const SHARD = "model-00001-of-00002.safetensors";

/** A cache whose events reach `tallies`, as the fetcher passes them on. */
function talliedCache(
  root: string,
  tallies: SourceTallies,
  extra: Partial<ModelCacheOptions> = {},
) {
  return testCache(root, { ...extra, onEvent: (e) => tallies.cacheEvent(e) }).cache;
}

const sum = (sources: { bytes: number }[]) => sources.reduce((n, s) => n + s.bytes, 0);

Deno.test("source tally: a file the peer does not hold comes from the hub, and both are counted", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    const config = snapshot.files.find((f) => f.path === "config.json")!;
    const peer = new MemoryByteSource("peer a", contents, [{ kind: "deny", file: "config.json" }]);
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const tallies = new SourceTallies();
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const cache = talliedCache(root, tallies);
    const ended = tallies.begin(key);
    // Nothing is answered before the cache says the snapshot is complete.
    const sources = () => {
      assertEquals(tallies.supplied(key), []);
      return tallies.wrap(key, [peer, hub]);
    };
    await cache.ensureSnapshot(snapshot, sources);
    ended();
    assertEquals(tallies.supplied(key), [
      { kind: "peer", name: "peer a", bytes: total - config.size },
      { kind: "hub", name: HUB, bytes: config.size },
    ]);
    // A second shard's completion of the same snapshot counted nothing: the answer stays.
    const again = tallies.begin(key);
    await cache.ensureSnapshot(snapshot, tallies.wrap(key, [hub]));
    again();
    assertEquals(tallies.supplied(key).map((s) => s.bytes), [total - config.size, config.size]);
  });
});

Deno.test("source tally: a range cut midway counts what came; the rest is the next source's", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    // The peer breaks once, 512 bytes into the shard's first chunk; the cache resumes from there.
    const peer = new MemoryByteSource("peer a", contents, [
      { kind: "break_at", file: SHARD, offset: 512, times: 1 },
    ]);
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const tallies = new SourceTallies();
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const cache = talliedCache(root, tallies, { concurrency: 1 });
    await cache.ensureSnapshot(snapshot, tallies.wrap(key, [peer, hub]));
    const got = tallies.supplied(key);
    // Every byte on disk was counted once, whoever sent it; the peer's cut range counted its 512.
    assertEquals(sum(got), total);
    const peerBytes = got.find((s) => s.name === "peer a")?.bytes ?? 0;
    assertEquals(peerBytes >= 512, true, `peer a counted ${peerBytes}`);
    assertEquals(got.map((s) => s.name).sort(), [HUB, "peer a"]);
  });
});

Deno.test("source tally: a file whose content failed its hash counts for no one; bytes past a range neither", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    // "peer bad" serves only the shard, with a wrong byte: nothing it sent is kept.
    const bad = new MemoryByteSource("peer bad", contents, [
      { kind: "deny", file: "config.json" },
      { kind: "deny", file: "model-00002-of-00002.safetensors" },
      { kind: "corrupt", file: SHARD },
    ]);
    // "peer long" sends one byte too many once: the cache refuses the piece, the tally too.
    const long = new MemoryByteSource("peer long", contents, [{ kind: "long", times: 1 }]);
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const tallies = new SourceTallies();
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const cache = talliedCache(root, tallies);
    await cache.ensureSnapshot(snapshot, tallies.wrap(key, [bad, long, hub]));
    const got = tallies.supplied(key);
    assertEquals(sum(got), total, JSON.stringify(got));
    assertEquals(got.some((s) => s.name === "peer bad"), false, JSON.stringify(got));
  });
});

Deno.test("source tally: a fetch after a failed or cancelled one counts from zero; one joining a fetch under way does not", async () => {
  const { snapshot, contents } = sampleModel();
  const file = snapshot.files.find((f) => f.path === SHARD)!;
  const peer = new MemoryByteSource("peer a", contents);
  const hub = new MemoryByteSource(HUB, contents, [], "hub");
  const tallies = new SourceTallies();
  const key = `${snapshot.repo}@${snapshot.commit}`;
  const read = async (source: MemoryByteSource, start: number, end: number) => {
    const [w] = tallies.wrap(key, [source]);
    const signal = new AbortController().signal;
    await Array.fromAsync(await w.read(snapshot.repo, snapshot.commit, file, start, end, signal));
  };
  const completed = { kind: "completed", repo: snapshot.repo, commit: snapshot.commit } as const;
  // A try that failed after the peer sent 1 KiB: the next fetch counts from zero.
  const failed = tallies.begin(key);
  await read(peer, 0, 1024);
  failed();
  const first = tallies.begin(key);
  await read(hub, 0, 1024);
  // A second shard's fetch joins the one under way: the hub's 1 KiB so far stays counted.
  const second = tallies.begin(key);
  await read(hub, 1024, 2048);
  tallies.cacheEvent({ ...completed, bytes: 2048, path: "/x" });
  first();
  second();
  assertEquals(tallies.supplied(key), [{ kind: "hub", name: HUB, bytes: 2048 }]);
  // An end told twice counts once: a later fetch still counts from zero.
  second();
  const third = tallies.begin(key);
  await read(peer, 0, 512);
  tallies.cacheEvent({ ...completed, bytes: 512, path: "/x" });
  third();
  assertEquals(tallies.supplied(key), [{ kind: "peer", name: "peer a", bytes: 512 }]);
});

Deno.test("source tally: an evicted snapshot's answer is forgotten; snapshots are counted apart", async () => {
  const { snapshot, contents } = sampleModel();
  const hub = new MemoryByteSource(HUB, contents, [], "hub");
  const tallies = new SourceTallies();
  const [a1] = tallies.wrap("r@1", [hub]);
  const [a2] = tallies.wrap("r@1", [hub]);
  const [b] = tallies.wrap("r@2", [hub]);
  assertEquals(a1 === a2, true);
  assertEquals(a1 === b, false);
  assertEquals([a1.kind, a1.name], ["hub", HUB]);
  const file = snapshot.files.find((f) => f.path === SHARD)!;
  await Array.fromAsync(await a1.read("r", "1", file, 0, 100, new AbortController().signal));
  tallies.cacheEvent({ kind: "completed", repo: "r", commit: "2", bytes: 0, path: "/x" });
  assertEquals(tallies.supplied("r@2"), []);
  tallies.cacheEvent({ kind: "completed", repo: "r", commit: "1", bytes: 100, path: "/x" });
  assertEquals(tallies.supplied("r@1"), [{ kind: "hub", name: HUB, bytes: 100 }]);
  tallies.cacheEvent({ kind: "evicted", repo: "r", commit: "1", bytes: 100, reason: "disk" });
  assertEquals(tallies.supplied("r@1"), []);
});
