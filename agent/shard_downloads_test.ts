/**
 * What the fetcher remembers for the shards' reports stays bounded: a shard
 * the desired state dropped is forgotten, a snapshot's last progress goes
 * with its last shard or its eviction; a report between tries keeps it.
 */
import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { HubClient } from "../models/hub_client.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import type { ProgressReport } from "./model_cache/download_progress.ts";
import { CacheModelFetcher } from "./model_fetch.ts";
import { ShardDownloads } from "./shard_downloads.ts";

const commit = (n: number) => n.toString(16).padStart(40, "0");

/** The cache's progress of `repo`@`commit`: `done` of 100 bytes. */
function under(repo: string, c: string, done: number): ProgressReport {
  return {
    repo,
    commit: c,
    bytesDone: done,
    bytesTotal: 100,
    rateBytesPerSecond: 10,
    etaSeconds: (100 - done) / 10,
    sources: ["hub"],
  };
}

Deno.test("shards that come and go leave nothing behind: memory stays at the shards desired", () => {
  const d = new ShardDownloads();
  // Months of rollouts: each brings a new shard id and a new commit; the previous one goes.
  for (let i = 0; i < 500; i++) {
    const id = `r-${i}/0`;
    d.fetching(id, { repo: "acme/tiny", commit: commit(i), bytes: 100 });
    d.progress(id, [under("acme/tiny", commit(i), 40)]);
    d.retain([id, "kept/0"]);
  }
  assertEquals(d.size, { shards: 1, snapshots: 1 });
  d.retain([]);
  assertEquals(d.size, { shards: 0, snapshots: 0 });
  assertEquals(d.progress("r-499/0", []), null);
});

Deno.test("a report between tries shows the last progress; a snapshot another shard fetches keeps it", () => {
  const d = new ShardDownloads();
  const c = commit(1);
  d.fetching("a/0", { repo: "acme/tiny", commit: c, bytes: 100 });
  d.fetching("b/0", { repo: "acme/tiny", commit: c, bytes: 100 });
  d.progress("a/0", [under("acme/tiny", c, 60)]);
  // The try failed: the cache reports nothing under way, the report keeps what was seen.
  assertEquals(d.progress("a/0", [])?.bytes_done, 60);
  d.retain(["b/0"]);
  assertEquals(d.progress("a/0", []), null);
  assertEquals(d.progress("b/0", [])?.bytes_done, 60);
  assertEquals(d.size, { shards: 1, snapshots: 1 });
});

Deno.test("a shard's new snapshot (launch changed) drops the old one's progress when no one fetches it", () => {
  const d = new ShardDownloads();
  d.fetching("a/0", { repo: "acme/tiny", commit: commit(1), bytes: 100 });
  d.progress("a/0", [under("acme/tiny", commit(1), 100)]);
  d.fetching("a/0", { repo: "acme/tiny", commit: commit(2), bytes: 50 });
  assertEquals(d.size, { shards: 1, snapshots: 0 });
  const p = d.progress("a/0", []);
  assertEquals([p?.commit, p?.bytes_done, p?.bytes_total], [commit(2), 0, 50]);
});

Deno.test("an evicted snapshot's progress is dropped: a new fetch of it starts from nothing done", () => {
  const d = new ShardDownloads();
  const c = commit(1);
  d.fetching("a/0", { repo: "acme/tiny", commit: c, bytes: 100 });
  assertEquals(d.progress("a/0", [under("acme/tiny", c, 100)])?.bytes_done, 100);
  d.evicted("acme/tiny", c);
  assertEquals(d.size, { shards: 1, snapshots: 0 });
  // Fetched again after its eviction: not the old 100 of 100 before the cache reports anything.
  assertEquals(d.progress("a/0", [])?.bytes_done, 0);
});

/** A fetcher over the fake hub in-process, holding `acme/tiny`. */
async function hubFetcher(root: string) {
  const model = await syntheticModel({ repo: "acme/tiny", shards: 1, weightBytes: 4096 });
  const hub = inProcessFakeHub({ repos: [model] });
  const client = new HubClient({
    config: { endpoint: hub.endpoint },
    fetch: hub.fetch,
    userAgent: "llmgw-agent/test",
  });
  return { model, fetcher: new CacheModelFetcher({ cache: testCache(root).cache, hub: client }) };
}

/** A shard of `acme/tiny` with id `id`, at `commit` when given. */
function tiny(id: string, commit?: string): DesiredShard {
  const l = launch({ port: 8000 });
  const at = commit === undefined ? {} : { model_commit: commit };
  return { id, engine: "vllm", launch: { ...l, shard_id: id, model: "acme/tiny", ...at } };
}

Deno.test("through the fetcher: a shard the desired state dropped is forgotten, its report gone", async () => {
  await withTempDir(async (root) => {
    const { fetcher } = await hubFetcher(root);
    for (let i = 0; i < 20; i++) {
      const s = tiny(`r-${i}/0`);
      await fetcher.fetch(s, new AbortController().signal);
      assertOk(fetcher.progress(s) !== null);
      fetcher.retain([s.id]);
    }
    assertEquals(fetcher.remembered.shards, 1);
    fetcher.retain([]);
    assertEquals(fetcher.remembered, { shards: 0, snapshots: 0 });
    assertEquals(fetcher.progress(tiny("r-19/0")), null);
  });
});

Deno.test("through the fetcher: a shard stopped while its snapshot was looked up is not remembered", async () => {
  await withTempDir(async (root) => {
    const { model, fetcher } = await hubFetcher(root);
    const commit = model.refs.main;
    // Its list is kept now: a later fetch of the commit finds it without the hub.
    await fetcher.fetch(tiny("a/0", commit), new AbortController().signal);
    const stopped = new AbortController();
    stopped.abort(new Error("shard stopped"));
    await assertRejects(
      () => fetcher.fetch(tiny("gone/0", commit), stopped.signal),
      Error,
      "stopped",
    );
    assertEquals(fetcher.progress(tiny("gone/0", commit)), null);
    assertEquals(fetcher.remembered.shards, 1);
  });
});
