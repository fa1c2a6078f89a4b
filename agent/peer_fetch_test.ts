/**
 * Once per fleet, at the agent's fetcher (issue #25 item 3): agent A fetches
 * a model from the fake hub; agent B, assigned A as its peer, fetches the
 * same revision through A's peer route over mTLS (A's node certificate
 * serving, B's asking) and takes no file byte from the hub: only the
 * revision lookup. B's files verify and match A's. A download B began on
 * the hub, before A was assigned to it, moves its remaining chunks to A once
 * the assignment names A; and one that found A down (restarting) asks A
 * again once its backoff ends, and takes the rest from it.
 */
import { type FakeHub, inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { HubClient } from "../models/hub_client.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { withPeerRoute } from "../tests/peer_route.ts";
import { testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { CacheModelFetcher } from "./model_fetch.ts";
import { AssignedSources } from "./assigned_sources.ts";
import { PeerServer } from "./peer_server.ts";
import type { RepoFile } from "../models/repo_snapshot.ts";

function shard(model: string, commit: string): DesiredShard {
  const l = launch({ port: 8000 });
  return {
    id: "r-1/0",
    engine: "vllm",
    launch: {
      ...l,
      shard_id: "r-1/0",
      model,
      model_commit: commit,
      port: null,
      world: { ...l.world, rendezvous_port: null, leader_http_port: null },
    },
  };
}

/** What each test gets: A holding the model and serving it over mTLS, B's peer fetch. */
interface Fleet {
  dir: string;
  hub: FakeHub;
  commit: string;
  files: RepoFile[];
  pathA: string;
  peer: PeerServer;
  peerUrl: string;
  peerFetch: typeof fetch;
}

/** Runs `body` with host A holding `acme/tiny` and serving it; everything is stopped after. */
async function withFleet(weightBytes: number, body: (f: Fleet) => Promise<void>): Promise<void> {
  await withTempDir(async (dir) => {
    const model = await syntheticModel({ repo: "acme/tiny", shards: 2, weightBytes });
    const commit = model.refs.main;
    const hub = inProcessFakeHub({ repos: [model] });
    const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
    const a = testCache(`${dir}/a`, { chunkBytes: 32 * 1024 });
    const pathA = await new CacheModelFetcher({ cache: a.cache, hub: client })
      .fetch(shard("acme/tiny", commit), new AbortController().signal).then((m) => m.path);
    const peer = new PeerServer({ layout: a.cache.layout });
    await withPeerRoute(peer, async ({ url, fetch }) => {
      hub.counters.reset();
      await body({
        dir,
        hub,
        commit,
        files: model.commits[commit],
        pathA,
        peer,
        peerUrl: url,
        peerFetch: fetch,
      });
    });
  });
}

async function assertSameFiles(files: RepoFile[], pathB: string, pathA: string): Promise<void> {
  for (const f of files) {
    assertEquals(
      await Deno.readFile(`${pathB}/${f.path}`),
      await Deno.readFile(`${pathA}/${f.path}`),
    );
  }
}

Deno.test("a host assigned a peer fetches the revision from it: no file byte from the hub", async () => {
  await withFleet(
    256 * 1024,
    async ({ dir, hub, commit, files, pathA, peer, peerUrl, peerFetch }) => {
      const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
      const assigned = new AssignedSources(peerFetch);
      assigned.update([{
        model: "acme/tiny",
        commit,
        peers: [{ node_id: "a", url: peerUrl }],
        origin: true,
      }]);
      const b = testCache(`${dir}/b`, { chunkBytes: 32 * 1024 });
      const fetcher = new CacheModelFetcher({
        cache: b.cache,
        hub: client,
        sources: (m, c, origin) => assigned.sourcesFor(m, c, origin),
      });
      const pathB = (await fetcher.fetch(shard("acme/tiny", commit), new AbortController().signal))
        .path;
      const counters = hub.counters.snapshot();
      // The revision API only: every file came from the peer.
      assertEquals([counters.byKind.resolve?.requests ?? 0, counters.byKind.cdn?.requests ?? 0], [
        0,
        0,
      ]);
      await assertSameFiles(files, pathB, pathA);
      const total = files.reduce((n, f) => n + f.size, 0);
      assertEquals(peer.stats().bytesServed, total);
      assertEquals(b.events.filter((e) => e.kind === "verified").length, files.length);
    },
  );
});

Deno.test("a download under way on the hub moves its remaining chunks to a peer assigned midway", async () => {
  await withFleet(
    1024 * 1024,
    async ({ dir, hub, commit, files, pathA, peer, peerUrl, peerFetch }) => {
      const assigned = new AssignedSources(peerFetch);
      const concurrency = 2;
      const assignAfter = 3;
      let planned = false;
      // The plan reaches B once the hub has begun serving it the weights (the CDN's ranged reads).
      const client = new HubClient({
        config: { endpoint: hub.endpoint },
        fetch: (input, init) => {
          if (!planned && hub.counters.snapshot().byKind.cdn.requests >= assignAfter) {
            planned = true;
            assigned.update([{
              model: "acme/tiny",
              commit,
              peers: [{ node_id: "a", url: peerUrl }],
              origin: true,
            }]);
          }
          return hub.fetch(input, init);
        },
      });
      const b = testCache(`${dir}/b`, { chunkBytes: 32 * 1024, concurrency });
      const fetcher = new CacheModelFetcher({
        cache: b.cache,
        hub: client,
        sources: (m, c, origin) => assigned.sourcesFor(m, c, origin),
      });
      const pathB = (await fetcher.fetch(shard("acme/tiny", commit), new AbortController().signal))
        .path;
      await assertSameFiles(files, pathB, pathA);
      const weights = files.filter((f) => f.sha256 !== undefined).reduce((n, f) => n + f.size, 0);
      const cdn = hub.counters.snapshot().byKind.cdn;
      // Those begun on the hub finish there; every later chunk asks the peer, the hub only as a fallback.
      assertOk(
        cdn.requests >= assignAfter && cdn.requests <= assignAfter + concurrency,
        `${cdn.requests} CDN reads`,
      );
      assertOk(cdn.bytes < weights / 2, `the hub served ${cdn.bytes} of ${weights} weight bytes`);
      assertOk(
        peer.stats().bytesServed > weights / 2,
        `the peer served ${peer.stats().bytesServed}`,
      );
      const changed = b.events.filter((e) => e.kind === "source_changed");
      assertEquals(changed.length, 1);
      assertOk(
        changed[0].kind === "source_changed" && changed[0].to === "peer a",
        JSON.stringify(changed),
      );
    },
  );
});

Deno.test("a peer that was down when the download began is asked again after its backoff and serves the rest", async () => {
  await withFleet(
    1024 * 1024,
    async ({ dir, hub, commit, files, pathA, peer, peerUrl, peerFetch }) => {
      // A restarting: its listener refuses connections until the hub has served a few chunks.
      let down = true;
      const refused = { count: 0 };
      // How many chunks the hub serves while A's probe is in flight depends on scheduling (the
      // TLS handshake): chunks that begin on the hub once the probe asked A wait until A is
      // healthy again, which its second request since it came back proves (the probe's chunk
      // succeeded: only then do the other chunks ask it). Those that chose the hub before A
      // came back go on, so a slot is always free for the probe.
      let healthy = false;
      let asksSinceBack = 0;
      let opened = () => {};
      const gate = new Promise<void>((resolve) => opened = resolve);
      const stop = new AbortController();
      const bound = setTimeout(() => stop.abort(new Error("A never served again")), 60_000);
      const aborted = new Promise<void>((resolve) =>
        stop.signal.addEventListener("abort", () => resolve(), { once: true })
      );
      const restarting: typeof fetch = (input, init) => {
        if (!down) {
          if (++asksSinceBack === 2) {
            healthy = true;
            opened();
          }
          return peerFetch(input, init);
        }
        refused.count++;
        return Promise.reject(new TypeError("error sending request: Connection refused"));
      };
      // Not asked again within the try (as for 5 s in production): each try fails at once.
      const assigned = new AssignedSources(restarting, 1);
      assigned.update([{
        model: "acme/tiny",
        commit,
        peers: [{ node_id: "a", url: peerUrl }],
        origin: true,
      }]);
      const clock = new FakeClock(0);
      const backAfter = 3;
      // Chunks that began on the hub (a request to its endpoint; the CDN's follow), and how many
      // of them began once A was healthy again.
      const hubChunks = { all: 0, afterHealthy: 0 };
      const client = new HubClient({
        config: { endpoint: hub.endpoint },
        fetch: async (input, init) => {
          // A is back, and B's 2 s backoff for it has passed.
          if (down && hub.counters.snapshot().byKind.cdn.requests >= backAfter) {
            down = false;
            clock.advance(2_000);
          }
          const url = String(input instanceof Request ? input.url : input);
          if (url.startsWith(hub.endpoint) && url.includes("/resolve/")) {
            hubChunks.all++;
            if (healthy) hubChunks.afterHealthy++;
            if (asksSinceBack > 0) await Promise.race([gate, aborted]);
          }
          return hub.fetch(input, init);
        },
      });
      const b = testCache(`${dir}/b`, { chunkBytes: 32 * 1024, clock });
      const fetcher = new CacheModelFetcher({
        cache: b.cache,
        hub: client,
        sources: (m, c, origin) => assigned.sourcesFor(m, c, origin),
      });
      let pathB: string;
      try {
        pathB = (await fetcher.fetch(shard("acme/tiny", commit), stop.signal)).path;
      } finally {
        clearTimeout(bound);
      }
      await assertSameFiles(files, pathB, pathA);
      assertOk(refused.count > 0, "A refused while down");
      assertOk(healthy, "A served the probe and the chunk after it");
      // Before this change the hub served every chunk after the peer's failure; now no chunk
      // begun once A was healthy again asks the hub.
      assertEquals(hubChunks.afterHealthy, 0, JSON.stringify(hubChunks));
      // So the hub served only the chunks begun before A came back or during its probe, a few
      // of the 3 slots' worth: under half of the 32.
      const weights = files.filter((f) => f.sha256 !== undefined).reduce((n, f) => n + f.size, 0);
      const cdn = hub.counters.snapshot().byKind.cdn;
      assertOk(cdn.bytes < weights / 2, `the hub served ${cdn.bytes} of ${weights} weight bytes`);
      assertOk(
        peer.stats().bytesServed > weights / 2,
        `the peer served ${peer.stats().bytesServed}`,
      );
      const changes = b.events.flatMap((e) =>
        e.kind === "source_changed" ? [`${e.cause} ${e.from} -> ${e.to}`] : []
      );
      assertEquals(changes, [
        `failure peer a -> ${hub.endpoint}`,
        `recovered ${hub.endpoint} -> peer a`,
      ]);
    },
  );
});
