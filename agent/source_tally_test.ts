/**
 * Which sources supplied a snapshot's bytes: counted as the model cache
 * streams them, whichever source it moves a range to, frozen at completion.
 */
import { assertEquals } from "../tests/assert.ts";
import { MemoryByteSource } from "../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { SourceTallies } from "./source_tally.ts";

const HUB = "http://hub.test";

Deno.test("source tally: a file the peer does not hold comes from the hub, and both are counted", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    const config = snapshot.files.find((f) => f.path === "config.json")!;
    const peer = new MemoryByteSource("peer a", contents, [{ kind: "deny", file: "config.json" }]);
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const tallies = new SourceTallies();
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const { cache } = testCache(root);
    await cache.ensureSnapshot(snapshot, tallies.wrap(key, [peer, hub]));
    // Nothing is answered before the cache says the snapshot is complete.
    assertEquals(tallies.supplied(key), []);
    tallies.complete(key);
    assertEquals(tallies.supplied(key), [
      { kind: "peer", name: "peer a", bytes: total - config.size },
      { kind: "hub", name: HUB, bytes: config.size },
    ]);
    // A second shard's completion of the same download counted nothing: the answer stays.
    tallies.complete(key);
    assertEquals(tallies.supplied(key).map((s) => s.bytes), [total - config.size, config.size]);
  });
});

Deno.test("source tally: a range cut midway counts what came; the rest is the next source's", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const total = snapshot.files.reduce((n, f) => n + f.size, 0);
    const shard = "model-00001-of-00002.safetensors";
    // The peer breaks once, 512 bytes into the shard's first chunk; the cache resumes from there.
    const peer = new MemoryByteSource("peer a", contents, [
      { kind: "break_at", file: shard, offset: 512, times: 1 },
    ]);
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const tallies = new SourceTallies();
    const key = `${snapshot.repo}@${snapshot.commit}`;
    const { cache } = testCache(root, { concurrency: 1 });
    await cache.ensureSnapshot(snapshot, tallies.wrap(key, [peer, hub]));
    tallies.complete(key);
    const got = tallies.supplied(key);
    // Every byte on disk was counted once, whoever sent it; the peer's cut range counted its 512.
    assertEquals(got.reduce((n, s) => n + s.bytes, 0), total);
    const peerBytes = got.find((s) => s.name === "peer a")?.bytes ?? 0;
    assertEquals(peerBytes >= 512, true, `peer a counted ${peerBytes}`);
    assertEquals(got.map((s) => s.name).sort(), [HUB, "peer a"]);
  });
});

Deno.test("source tally: snapshots are counted apart, and the same source keeps one wrapper", () => {
  const { contents } = sampleModel();
  const hub = new MemoryByteSource(HUB, contents, [], "hub");
  const tallies = new SourceTallies();
  const [a1] = tallies.wrap("r@1", [hub]);
  const [a2] = tallies.wrap("r@1", [hub]);
  const [b] = tallies.wrap("r@2", [hub]);
  assertEquals(a1 === a2, true);
  assertEquals(a1 === b, false);
  assertEquals([a1.kind, a1.name], ["hub", HUB]);
  tallies.complete("r@2");
  assertEquals(tallies.supplied("r@2"), []);
});
