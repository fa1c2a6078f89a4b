/**
 * The agent's model fetcher against the fake hub in-process: a hub model
 * resolved and fetched into the cache (the snapshot directory answered,
 * `config.json` in it, progress known); two shards of one snapshot share the
 * download; the hub's final answers (unknown repo, unknown revision, gated
 * without a token) are final with its words; an unreachable hub is retryable;
 * a local path is used in place after its check.
 */
import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { addCommit, smallFile } from "../dev/fake_hub/fake_repo.ts";
import { HubClient } from "../models/hub_client.ts";
import { HubToken } from "../models/hub_config.ts";
import { ModelFetchError } from "../supervisor/model_fetcher.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { diskThatFills, testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { CacheModelFetcher, fetchError, launchRevision } from "./model_fetch.ts";
import { InsufficientDiskError } from "./model_cache/disk_space.ts";
import type { CacheFs } from "./model_cache/cache_fs.ts";
import type { ByteSource } from "../models/byte_source.ts";

function shard(model: string, id = "r-1/0", commit?: string, revision?: string): DesiredShard {
  const l = launch({ port: 8000 });
  return {
    id,
    engine: "vllm",
    launch: {
      ...l,
      shard_id: id,
      model,
      ...(commit === undefined ? {} : { model_commit: commit }),
      ...(revision === undefined ? {} : { model_revision: revision }),
      port: null,
      world: { ...l.world, rendezvous_port: null, leader_http_port: null },
    },
  };
}

async function setUp(root: string, token?: string, fs?: CacheFs) {
  const model = await syntheticModel({ repo: "acme/tiny", shards: 2, weightBytes: 64 * 1024 });
  const gated = await syntheticModel({
    repo: "acme/gated",
    shards: 1,
    weightBytes: 4096,
    gated: "manual",
    grantedTokens: ["hf_granted_0123456789"],
  });
  const hub = inProcessFakeHub({ repos: [model, gated], tokens: ["hf_granted_0123456789"] });
  const client = new HubClient({
    config: token === undefined ? { endpoint: hub.endpoint } : {
      endpoint: hub.endpoint,
      token: new HubToken(token),
    },
    fetch: hub.fetch,
    userAgent: "llmgw-agent/test",
  });
  const { cache } = testCache(root, { chunkBytes: 16 * 1024, ...(fs === undefined ? {} : { fs }) });
  const fetcher = new CacheModelFetcher({ cache, hub: client });
  return { hub, model, fetcher, cache };
}

const signal = () => new AbortController().signal;

Deno.test("a hub model is resolved at main and fetched into the cache; its directory is answered", async () => {
  await withTempDir(async (root) => {
    const { hub, model, fetcher } = await setUp(root);
    const s = shard("acme/tiny");
    assertEquals(fetcher.progress(s), null);
    const got = await fetcher.fetch(s, signal());
    assertEquals(got.path, `${root}/models--acme--tiny/snapshots/${model.refs.main}`);
    assertOk(Deno.statSync(`${got.path}/config.json`).isFile);
    assertEquals(Deno.readTextFileSync(`${root}/models--acme--tiny/refs/main`), model.refs.main);
    const p = fetcher.progress(s)!;
    assertEquals([p.model, p.commit], ["acme/tiny", model.refs.main]);
    // Only the agent asked the hub.
    assertEquals(Object.keys(hub.counters.snapshot().byCaller), ["llmgw-agent/test"]);
  });
});

Deno.test("two shards of one snapshot share the download: each byte fetched once", async () => {
  await withTempDir(async (root) => {
    const { hub, model, fetcher } = await setUp(root);
    const [a, b] = await Promise.all([
      fetcher.fetch(shard("acme/tiny", "r-1/0"), signal()),
      fetcher.fetch(shard("acme/tiny", "r-2/0"), signal()),
    ]);
    assertEquals(a.path, b.path);
    const size = model.commits[model.refs.main].reduce((n, f) => n + f.size, 0);
    const counted = hub.counters.snapshot();
    assertOk(counted.byKind.cdn.bytes <= size, `${counted.byKind.cdn.bytes} > ${size}`);
    assertEquals(counted.byKind.api.requests, 1, "one revision lookup for both");
  });
});

Deno.test("the control plane's commit is fetched as it is, without a ref", async () => {
  await withTempDir(async (root) => {
    const { model, fetcher } = await setUp(root);
    const commit = model.refs.main;
    assertEquals(launchRevision(shard("acme/tiny", "x", commit).launch), {
      commit,
      revision: commit,
    });
    const got = await fetcher.fetch(shard("acme/tiny", "x", commit), signal());
    assertEquals(got.path, `${root}/models--acme--tiny/snapshots/${commit}`);
  });
});

Deno.test("a revision the control plane has not resolved yet is fetched at that revision, not main", async () => {
  await withTempDir(async (root) => {
    const { model, fetcher } = await setUp(root);
    const main = model.refs.main;
    const v2Files = model.commits[main].filter((f) => f.path !== "config.json");
    const v2 = addCommit(model, [...v2Files, await smallFile("config.json", '{"v":2}')], ["v2"]);
    assertOk(v2 !== main);
    const got = await fetcher.fetch(shard("acme/tiny", "x", undefined, "v2"), signal());
    assertEquals(got.path, `${root}/models--acme--tiny/snapshots/${v2}`);
    assertEquals(Deno.readTextFileSync(`${got.path}/config.json`), '{"v":2}');
    assertEquals(Deno.readTextFileSync(`${root}/models--acme--tiny/refs/v2`), v2);
    assertEquals(launchRevision(shard("acme/tiny", "x", undefined, "v2").launch), {
      revision: "v2",
    });
    // The commit, once resolved, wins over the revision; a revision that is a commit writes no ref.
    const byCommit = shard("acme/tiny", "y", main, "v2").launch;
    assertEquals(launchRevision(byCommit), { commit: main, revision: main });
    assertEquals(launchRevision(shard("acme/tiny", "z", undefined, main).launch), {
      commit: main,
      revision: main,
    });
  });
});

Deno.test("final hub answers are final, with the hub's words; an unreachable hub is retryable", async () => {
  await withTempDir(async (root) => {
    const { hub, fetcher } = await setUp(root);
    const gated = await assertRejects(
      () => fetcher.fetch(shard("acme/gated"), signal()),
      ModelFetchError,
    );
    assertOk(!(gated as ModelFetchError).retryable);
    assertEquals(
      gated.message,
      "model acme/gated is gated: set HF_TOKEN to a token that was granted access",
    );
    const unknown = await assertRejects(
      () => fetcher.fetch(shard("acme/nope"), signal()),
      ModelFetchError,
      "model acme/nope not found",
    );
    assertOk(!(unknown as ModelFetchError).retryable);
    const badCommit = "0".repeat(40);
    const rev = await assertRejects(
      () => fetcher.fetch(shard("acme/tiny", "y", badCommit), signal()),
      ModelFetchError,
      `revision ${badCommit} not found`,
    );
    assertOk(!(rev as ModelFetchError).retryable);
    await hub.offline();
    const down = await assertRejects(
      () => fetcher.fetch(shard("acme/tiny", "z"), signal()),
      ModelFetchError,
      "unreachable",
    );
    assertOk((down as ModelFetchError).retryable);
  });
});

Deno.test("a gated repo with a granted token is fetched; the token is in no error or progress", async () => {
  await withTempDir(async (root) => {
    const { fetcher } = await setUp(root, "hf_granted_0123456789");
    const s = shard("acme/gated");
    const got = await fetcher.fetch(s, signal());
    assertOk(Deno.statSync(`${got.path}/config.json`).isFile);
    assertOk(!JSON.stringify(fetcher.progress(s)).includes("hf_granted"));
  });
});

Deno.test("a disk too small is final, with the numbers; other errors keep the sources' word", () => {
  const disk = fetchError(new InsufficientDiskError("/cache", "acme/x@c", 2 ** 30, 2 ** 20));
  assertOk(!disk.retryable);
  assertOk(disk.message.includes("insufficient_disk"), disk.message);
  // Its kind travels to the report: the control plane puts the replica back to pending.
  assertEquals(disk.kind, "insufficient_disk");
  assertEquals(fetchError(new Error("socket hang up")).kind, null);
  assertOk(fetchError(new Error("socket hang up")).retryable);
});

Deno.test("disk full midway through a fetch: partial files gone, a final error of kind insufficient_disk", async () => {
  await withTempDir(async (root) => {
    const fs = diskThatFills(40 * 1024); // the disk fills after 40 KiB of the model's 128 KiB of weights
    const { fetcher } = await setUp(root, undefined, fs);
    const e = await assertRejects(
      () => fetcher.fetch(shard("acme/tiny"), signal()),
      ModelFetchError,
      "(insufficient_disk)",
    ) as ModelFetchError;
    assertEquals([e.retryable, e.kind], [false, "insufficient_disk"]);
    const partial: string[] = [];
    for await (const entry of walkFiles(root)) {
      if (entry.endsWith(".incomplete")) partial.push(entry);
    }
    assertEquals(partial, [], "partial files removed");
  });
});

/** Every file under `dir`, recursively. */
async function* walkFiles(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) yield* walkFiles(path);
    else yield path;
  }
}

Deno.test("a local path is used in place after its check; a missing or empty one is final", async () => {
  await withTempDir(async (root) => {
    const { fetcher, hub } = await setUp(root);
    const dir = `${root}/local-model`;
    Deno.mkdirSync(dir);
    const empty = await assertRejects(() => fetcher.fetch(shard(dir), signal()), ModelFetchError);
    assertEquals(empty.message, `Cannot use local model ${dir}: it holds no files on this host`);
    Deno.writeTextFileSync(`${dir}/config.json`, "{}");
    assertEquals(await fetcher.fetch(shard(`file://${dir}`), signal()), { path: dir, bytes: 0 });
    const gone = await assertRejects(
      () => fetcher.fetch(shard(`${root}/nothing`), signal()),
      ModelFetchError,
    );
    assertOk(!(gone as ModelFetchError).retryable);
    assertEquals(
      gone.message,
      `Cannot use local model ${root}/nothing: no such directory on this host`,
    );
    assertEquals(hub.counters.snapshot().byKind.api.requests, 0, "a local path asks no hub");
  });
});

Deno.test("a snapshot completed once starts again with the hub off: by its commit with no request, by main through refs/main", async () => {
  await withTempDir(async (root) => {
    const { hub, model, fetcher } = await setUp(root);
    const commit = model.refs.main;
    const first = await fetcher.fetch(shard("acme/tiny", "a"), signal());
    assertOk(Deno.statSync(`${root}/.llmgw/listings/models--acme--tiny/${commit}.json`).isFile);
    // A later start (a new agent, the same cache): its commit needs no hub at all.
    hub.counters.reset();
    const again = await setUp(root);
    const byCommit = await again.fetcher.fetch(shard("acme/tiny", "b", commit), signal());
    assertEquals(byCommit.path, first.path);
    assertEquals(again.hub.counters.snapshot().totalBytes, 0);
    assertEquals(Object.keys(again.hub.counters.snapshot().byCaller), [], "no request at all");
    // The hub gone: main is what refs/main says.
    await again.hub.offline();
    const byBranch = await again.fetcher.fetch(shard("acme/tiny", "c"), signal());
    assertEquals(byBranch.path, first.path);
    // A commit never completed here still needs the hub: retryable.
    await assertRejects(
      () => again.fetcher.fetch(shard("acme/tiny", "d", "1".repeat(40)), signal()),
      ModelFetchError,
      "unreachable",
    );
  });
});

Deno.test("pull: a revision fetched into the cache without a shard, as a shard's would be; no ref for a commit", async () => {
  await withTempDir(async (root) => {
    const { model, fetcher, cache } = await setUp(root);
    const commit = model.refs.main;
    const path = await fetcher.pull("acme/tiny", commit, signal());
    assertEquals(path, `${root}/models--acme--tiny/snapshots/${commit}`);
    assertOk(Deno.statSync(`${path}/config.json`).isFile);
    assertEquals((await cache.revisions()).map((r) => r.commit), [commit]);
    let refs = true;
    try {
      Deno.statSync(`${root}/models--acme--tiny/refs/main`);
    } catch {
      refs = false;
    }
    assertEquals(refs, false);
    // A shard of the same commit then finds it here: the same directory.
    assertEquals((await fetcher.fetch(shard("acme/tiny", "r-1/0", commit), signal())).path, path);
    await assertRejects(() => fetcher.pull("acme/nope", commit, signal()), ModelFetchError);
  });
});

/** A fetcher whose sources the test picks, seeing its cache's events as the agent's does. */
async function sourcedFetcher(root: string) {
  const model = await syntheticModel({ repo: "acme/tiny", shards: 2, weightBytes: 64 * 1024 });
  const hub = inProcessFakeHub({ repos: [model] });
  const client = new HubClient({
    config: { endpoint: hub.endpoint },
    fetch: hub.fetch,
    userAgent: "llmgw-agent/test",
  });
  const pick = { sources: (hub: ByteSource): ByteSource[] => [hub] };
  let fetcher: CacheModelFetcher | null = null;
  const { cache } = testCache(root, {
    chunkBytes: 16 * 1024,
    onEvent: (e) => fetcher?.cacheEvent(e),
  });
  fetcher = new CacheModelFetcher({ cache, hub: client, sources: (_m, _c, h) => pick.sources(h) });
  return { fetcher, pick, hubName: client.byteSource().name };
}

/** `inner` as a peer named `name` that refuses `file`, or sends it with its first byte wrong. */
function faultyPeer(
  name: string,
  inner: ByteSource,
  file: string,
  fault: "refuse" | "corrupt",
): ByteSource {
  return {
    kind: "peer",
    name,
    async read(repo, commit, f, start, end, signal) {
      if (f.path === file && fault === "refuse") throw new Error(`${name}: connection refused`);
      const stream = await inner.read(repo, commit, f, start, end, signal);
      if (f.path !== file || start !== 0) return stream;
      let first = true;
      return stream.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(piece, out) {
            out.enqueue(first ? piece.map((b, i) => (i === 0 ? b ^ 0xff : b)) : piece);
            first = false;
          },
        }),
      );
    },
  };
}

const SHARD_1 = "model-00001-of-00002.safetensors";
const SHARD_2 = "model-00002-of-00002.safetensors";

Deno.test("the receipt's sources: a failed try's are dropped, the next names only what it fetched", async () => {
  await withTempDir(async (root) => {
    const { fetcher, pick, hubName } = await sourcedFetcher(root);
    // Peer a sends every file but the second shard, which it refuses until the try fails.
    pick.sources = (hub) => [faultyPeer("peer a", hub, SHARD_2, "refuse")];
    const failed = await assertRejects(
      () => fetcher.fetch(shard("acme/tiny"), signal()),
      ModelFetchError,
      "tries failed",
    ) as ModelFetchError;
    assertOk(failed.retryable, failed.message);
    pick.sources = (hub) => [hub];
    const got = await fetcher.fetch(shard("acme/tiny"), signal());
    assertEquals(got.sources?.map((s) => s.name), [hubName]);
    const named = got.sources!.reduce((n, s) => n + s.bytes, 0);
    assertOk(named <= got.bytes, `the sources name ${named} bytes of ${got.bytes}`);
  });
});

Deno.test("the receipt's sources: bytes of a file whose hash did not match are named by no one", async () => {
  await withTempDir(async (root) => {
    const { fetcher, pick, hubName } = await sourcedFetcher(root);
    pick.sources = (hub) => [faultyPeer("peer c", hub, SHARD_1, "corrupt"), hub];
    const got = await fetcher.fetch(shard("acme/tiny"), signal());
    const named = got.sources!.reduce((n, s) => n + s.bytes, 0);
    assertEquals(named, got.bytes, JSON.stringify(got.sources));
    assertOk(got.sources!.some((s) => s.name === hubName), JSON.stringify(got.sources));
  });
});
