/**
 * The model cache on a real file system in temporary directories: the hub
 * cache's layout, resume after an interrupted download, shared jobs, an
 * existing hub cache reused. Faults are in model_cache_faults_test.ts.
 */
import { assertEquals, assertOk, assertRejects } from "../../tests/assert.ts";
import {
  MemoryByteSource,
  type SourceRead,
  syntheticSnapshot,
} from "../../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import { UnsafePathError } from "./cache_layout.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const COMMIT2 = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";

/** The bytes an engine reads through `snapshots/<commit>/<path>`. */
async function readThroughSnapshot(dir: string, path: string): Promise<Uint8Array> {
  return await Deno.readFile(`${dir}/${path}`);
}

Deno.test("ensureSnapshot lays files out as huggingface_hub does: blobs, relative links, refs", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("https://hub.example", contents, [], "hub");
    const { cache, events } = testCache(root);
    const dir = await cache.ensureSnapshot(snapshot, [hub], { revision: "main" });
    const repoDir = `${root}/models--acme--tiny-llm`;
    assertEquals(dir, `${repoDir}/snapshots/${COMMIT}`);
    for (const f of snapshot.files) {
      const key = f.sha256 ?? f.blobId;
      // The relative target huggingface_hub's _create_symlink writes.
      assertEquals(await Deno.readLink(`${dir}/${f.path}`), `../../blobs/${key}`);
      assertEquals(await readThroughSnapshot(dir, f.path), contents.get(f.path));
      assertOk((await Deno.lstat(`${repoDir}/blobs/${key}`)).isFile);
    }
    // The hub's client writes the bare commit, without a newline.
    assertEquals(await Deno.readTextFile(`${repoDir}/refs/main`), COMMIT);
    const left = [...Deno.readDirSync(`${repoDir}/blobs`)].map((e) => e.name);
    assertEquals(left.filter((n) => n.includes(".llmgw")), [], "no part file or record left");
    assertEquals(events.map((e) => e.kind), [
      "started",
      "verified",
      "verified",
      "verified",
      "completed",
    ]);
    assertEquals(await cache.holdsRevision(snapshot), true);
    // Asked again: nothing fetched.
    const reads = hub.reads.length;
    await cache.ensureSnapshot(snapshot, [hub], { revision: "main" });
    assertEquals(hub.reads.length, reads);
  });
});

Deno.test("chunks are ranged reads of the chunk size, fetched in parallel", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("hub", contents);
    let inFlight = 0;
    let most = 0;
    hub.onRead = async () => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
    };
    const { cache } = testCache(root);
    await cache.ensureSnapshot(snapshot, [hub]);
    const shard = hub.reads.filter((r) => r.file === "model-00002-of-00002.safetensors")
      .map((r) => [r.start, r.end]).sort((a, b) => a[0] - b[0]);
    assertEquals(shard, [[0, 1024], [1024, 2048], [2048, 3072], [3072, 3079]]);
    assertEquals(most, 3, "the configured 3 chunks at once, never more");
  });
});

Deno.test("an interrupted download resumes: only the chunks not recorded are fetched again", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const shard = "model-00001-of-00002.safetensors";
    // Chunks 0 and 1 of the 5-chunk shard finish; chunk 2 hangs until the agent is stopped.
    const first = new MemoryByteSource("hub", contents, [{
      kind: "hang",
      file: shard,
      offset: 2048,
    }]);
    const stop = new AbortController();
    first.onRead = (r) => {
      if (r.file === shard && r.start === 2048) {
        setTimeout(() => stop.abort(new Error("agent stopped")), 20);
      }
    };
    const one = testCache(root, { concurrency: 1 });
    await assertRejects(
      () => one.cache.ensureSnapshot(snapshot, [first], { signal: stop.signal }),
      Error,
      "agent stopped",
    );
    const fetchedBefore = first.reads.filter((r) => r.file === shard).map((r) => r.start);
    assertEquals(fetchedBefore, [0, 1024, 2048]);
    // A new agent process over the same directory.
    const second = new MemoryByteSource("hub", contents);
    const two = testCache(root, { concurrency: 1 });
    await two.cache.ensureSnapshot(snapshot, [second]);
    const again: SourceRead[] = second.reads.filter((r) => r.file === shard);
    assertEquals(again.map((r) => [r.start, r.end]), [[2048, 3072], [3072, 4096], [4096, 5120]]);
    const blobs = `${root}/models--acme--tiny-llm/blobs`;
    const f = snapshot.files.find((x) => x.path === shard)!;
    assertEquals(await Deno.readFile(`${blobs}/${f.sha256}`), contents.get(shard));
  });
});

Deno.test("two snapshots needing the same blob share one job; a second commit reuses blobs", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource("hub", contents);
    const { cache } = testCache(root);
    await Promise.all([
      cache.ensureSnapshot(snapshot, [hub]),
      cache.ensureSnapshot(snapshot, [hub]),
    ]);
    const size = snapshot.files.reduce((n, f) => n + f.size, 0);
    assertEquals(hub.reads.reduce((n, r) => n + r.end - r.start, 0), size, "every byte once");
    // A new commit with the same shards and another config: only the config is fetched.
    const next = sampleModel(COMMIT2, 9);
    const hub2 = new MemoryByteSource("hub", next.contents);
    const dir = await cache.ensureSnapshot(next.snapshot, [hub2], { revision: "main" });
    assertEquals(
      [...new Set(hub2.reads.map((r) => r.file))],
      ["config.json"],
      "identical blobs in two snapshots are fetched once",
    );
    assertEquals(
      await Deno.readTextFile(`${root}/models--acme--tiny-llm/refs/main`),
      COMMIT2,
      "the ref follows the commit asked for",
    );
    assertEquals(
      await Deno.readLink(`${dir}/config.json`),
      `../../blobs/${next.snapshot.files[0].blobId}`,
    );
  });
});

Deno.test("an existing hub cache is reused: its blob hashed once, a corrupt one replaced", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const [config, shard1] = snapshot.files;
    const blobs = `${root}/models--acme--tiny-llm/blobs`;
    await Deno.mkdir(blobs, { recursive: true });
    // As huggingface_hub left it: one good blob, one of the right size but wrong bytes.
    await Deno.writeFile(`${blobs}/${config.blobId}`, contents.get(config.path)!);
    const bad = new Uint8Array(contents.get(shard1.path)!);
    bad[100] ^= 1;
    await Deno.writeFile(`${blobs}/${shard1.sha256}`, bad);
    const hub = new MemoryByteSource("hub", contents);
    const { cache, events } = testCache(root);
    assertEquals(await cache.holdsRevision(snapshot), false);
    await cache.ensureSnapshot(snapshot, [hub]);
    assertEquals(hub.reads.some((r) => r.file === config.path), false, "good blob not fetched");
    assertOk(hub.reads.some((r) => r.file === shard1.path), "corrupt blob fetched again");
    assertOk(events.some((e) => e.kind === "mismatch" && e.file === shard1.path));
    assertEquals(await Deno.readFile(`${blobs}/${shard1.sha256}`), contents.get(shard1.path));
    assertOk(await Deno.stat(`${root}/.llmgw/verified/models--acme--tiny-llm/${config.blobId}`));
  });
});

Deno.test("an unsafe file path is refused before anything is fetched or written", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const evil = {
      ...snapshot,
      files: [...snapshot.files, { ...snapshot.files[0], path: "../../etc/x" }],
    };
    const hub = new MemoryByteSource("hub", contents);
    const { cache } = testCache(root);
    await assertRejects(() => cache.ensureSnapshot(evil, [hub]), UnsafePathError, '"../../etc/x"');
    await assertRejects(
      () =>
        cache.ensureSnapshot({ ...snapshot, files: [{ ...snapshot.files[0], path: "/etc/x" }] }, [
          hub,
        ]),
      UnsafePathError,
      "absolute",
    );
    assertEquals(hub.reads, []);
    assertEquals([...Deno.readDirSync(root)], []);
  });
});

Deno.test("empty files, two paths with one blob, and nested folders are laid out too", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = syntheticSnapshot("acme/odd", COMMIT, [
      { path: ".gitattributes", size: 0, seed: 1, lfs: false },
      { path: "empty.txt", size: 0, seed: 2, lfs: false },
      { path: "onnx/deep/model.onnx", size: 2500, seed: 3 },
    ]);
    const hub = new MemoryByteSource("hub", contents);
    const { cache } = testCache(root);
    const dir = await cache.ensureSnapshot(snapshot, [hub]);
    const empty = snapshot.files[0].blobId;
    assertEquals(empty, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "git's id of the empty blob");
    assertEquals(await Deno.readLink(`${dir}/.gitattributes`), `../../blobs/${empty}`);
    assertEquals(await Deno.readLink(`${dir}/empty.txt`), `../../blobs/${empty}`);
    assertEquals((await Deno.readFile(`${dir}/empty.txt`)).length, 0);
    const deep = snapshot.files[2];
    assertEquals(
      await Deno.readLink(`${dir}/onnx/deep/model.onnx`),
      `../../../../blobs/${deep.sha256}`,
    );
    assertEquals(await Deno.readFile(`${dir}/onnx/deep/model.onnx`), contents.get(deep.path));
  });
});

Deno.test("a torn chunk record: the chunk whose line was cut is fetched again, the others not", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const shard = snapshot.files.find((f) => f.path === "model-00001-of-00002.safetensors")!;
    const blobs = `${root}/models--acme--tiny-llm/blobs`;
    await Deno.mkdir(blobs, { recursive: true });
    // As a crash would leave it: chunks 0 and 1 written; the line of chunk 3 torn (no newline).
    const bytes = contents.get(shard.path)!;
    const part = new Uint8Array(bytes.length);
    part.set(bytes.subarray(0, 2048));
    part.set(bytes.subarray(3072, 4096), 3072);
    await Deno.writeFile(`${blobs}/${shard.sha256}.llmgw.incomplete`, part);
    await Deno.writeTextFile(
      `${blobs}/${shard.sha256}.llmgw.chunks`,
      `llmgw-chunks 1 size=${bytes.length} chunk=1024\n0\n1\n3`,
    );
    const hub = new MemoryByteSource("hub", contents);
    const { cache } = testCache(root);
    await cache.ensureSnapshot(snapshot, [hub]);
    const again = hub.reads.filter((r) => r.file === shard.path).map((r) => r.start).sort((a, b) =>
      a - b
    );
    assertEquals(again, [2048, 3072, 4096]);
    assertEquals(await Deno.readFile(`${blobs}/${shard.sha256}`), bytes);
  });
});
