/**
 * The model cache against the fake hub over real sockets, through the hub
 * client: a synthetic multi-shard safetensors model is fetched (LFS shards
 * through the CDN redirect), every file checked against its listed hash
 * from disk; the hub switched off midway moves the rest to a mirror; once
 * held, the snapshot needs no hub at all.
 */
import { startFakeHub } from "../../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../../dev/fake_hub/synthetic_model.ts";
import type { ByteSource } from "../../models/byte_source.ts";
import { expectedHash } from "../../models/file_hash.ts";
import { HubClient } from "../../models/hub_client.ts";
import { snapshotBytes } from "../../models/repo_snapshot.ts";
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { testCache, withTempDir } from "../../tests/model_cache_fixture.ts";

const client = (endpoint: string) =>
  new HubClient({ config: { endpoint }, userAgent: "llmgw-test" });

async function hashOnDisk(path: string, file: Parameters<typeof expectedHash>[0]): Promise<string> {
  const { hash } = expectedHash(file);
  const f = await Deno.open(path);
  for await (const piece of f.readable) hash.update(piece);
  return hash.hex();
}

Deno.test("a multi-shard model from the fake hub: verified on disk, origin bytes once, then offline", async () => {
  const model = await syntheticModel({
    repo: "acme/shards-4",
    shards: 4,
    weightBytes: 6 * 2 ** 20,
  });
  const hub = startFakeHub({ repos: [model] });
  try {
    await withTempDir(async (root) => {
      const snapshot = await client(hub.endpoint).resolveRevision("acme/shards-4", "main");
      assertEquals(snapshot.commit, model.refs.main);
      hub.counters.reset();
      const { cache, events } = testCache(root, { chunkBytes: 2 ** 20, concurrency: 4 });
      const dir = await cache.ensureSnapshot(snapshot, [client(hub.endpoint).byteSource()], {
        revision: "main",
      });
      for (const file of snapshot.files) {
        assertEquals(
          await hashOnDisk(`${dir}/${file.path}`, file),
          expectedHash(file).want,
          file.path,
        );
      }
      const counted = hub.counters.snapshot();
      const size = snapshotBytes(snapshot);
      assertOk(counted.byKind.cdn.requests >= 4, "LFS shards came through the CDN redirect");
      const lfs = snapshot.files.filter((f) => f.sha256 !== undefined);
      const lfsBytes = lfs.reduce((n, f) => n + f.size, 0);
      assertEquals(counted.byKind.cdn.bytes, lfsBytes, "every LFS byte once, through the CDN");
      // Small files come from resolve itself; its redirects of LFS files add a short body each.
      assertOk(
        counted.totalBytes >= size && counted.totalBytes <= 1.02 * size,
        `${counted.totalBytes}`,
      );
      assertEquals(counted.cdnRequestsWithAuthorization, 0);
      assertEquals(events.filter((e) => e.kind === "verified").length, snapshot.files.length);
      // Held: with the hub off, the same snapshot is answered from disk.
      await hub.offline();
      const again = await cache.ensureSnapshot(snapshot, [client(hub.endpoint).byteSource()]);
      assertEquals(again, dir);
      assertEquals(await cache.holdsRevision(snapshot), true);
    });
  } finally {
    await hub.stop();
  }
});

Deno.test("the hub switched off midway: a chunk_failed event, the rest fetched from a mirror", async () => {
  const model = await syntheticModel({
    repo: "acme/shards-2",
    shards: 2,
    weightBytes: 3 * 2 ** 20,
  });
  const hub = startFakeHub({ repos: [model] });
  const mirror = startFakeHub({ repos: [model] });
  try {
    await withTempDir(async (root) => {
      const snapshot = await client(hub.endpoint).resolveRevision("acme/shards-2");
      const origin = client(hub.endpoint).byteSource();
      let reads = 0;
      // The hub goes away after its third read.
      const dying: ByteSource = {
        kind: origin.kind,
        name: origin.name,
        async read(...args) {
          if (++reads === 4) await hub.offline();
          return await origin.read(...args);
        },
      };
      const { cache, events } = testCache(root, { chunkBytes: 512 * 1024, concurrency: 1 });
      const dir = await cache.ensureSnapshot(snapshot, [
        dying,
        client(mirror.endpoint).byteSource(),
      ]);
      for (const file of snapshot.files) {
        assertEquals(
          await hashOnDisk(`${dir}/${file.path}`, file),
          expectedHash(file).want,
          file.path,
        );
      }
      const changed = events.filter((e) => e.kind === "source_changed");
      assertEquals(changed.length, 1);
      assertOk(changed[0].kind === "source_changed" && changed[0].to === mirror.endpoint);
      assertOk(mirror.counters.snapshot().totalBytes > 0, "the mirror served the rest");
    });
  } finally {
    await hub.stop();
    await mirror.stop();
  }
});
