/**
 * Once per fleet, at the agent's fetcher (issue #25 item 3): agent A fetches
 * a model from the fake hub; agent B, assigned A as its peer, fetches the
 * same revision through A's peer route over mTLS (A's node certificate
 * serving, B's asking) and takes no file byte from the hub: only the
 * revision lookup. B's files verify and match A's.
 */
import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { HubClient } from "../models/hub_client.ts";
import type { DesiredShard } from "../protocol/agent_protocol.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { assertEquals } from "../tests/assert.ts";
import { clusterPki } from "../tests/cluster_pki.ts";
import { testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { serveTlsListener } from "./listener.ts";
import { CacheModelFetcher } from "./model_fetch.ts";
import { AssignedSources } from "./assigned_sources.ts";
import { PeerServer } from "./peer_server.ts";

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

Deno.test("a host assigned a peer fetches the revision from it: no file byte from the hub", async () => {
  const p = await clusterPki();
  await withTempDir(async (dir) => {
    const model = await syntheticModel({ repo: "acme/tiny", shards: 2, weightBytes: 256 * 1024 });
    const commit = model.refs.main;
    const files = model.commits[commit];
    const hub = inProcessFakeHub({ repos: [model] });
    const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
    const a = testCache(`${dir}/a`, { chunkBytes: 32 * 1024 });
    const pathA = await new CacheModelFetcher({ cache: a.cache, hub: client })
      .fetch(shard("acme/tiny", commit), new AbortController().signal).then((m) => m.path);
    const peer = new PeerServer({ layout: a.cache.layout });
    const server = await serveTlsListener(
      "the peer route",
      { hostname: "127.0.0.1", port: 0 },
      { ...p.server, ca: p.caPem },
      (req, info) => peer.handle(req, info),
      () => {},
    );
    const http = pinnedFetch(p.caPem, p.nodeB);
    try {
      const assigned = new AssignedSources(http.fetch);
      assigned.update([{
        model: "acme/tiny",
        commit,
        peers: [{ node_id: "a", url: `https://127.0.0.1:${server.addr.port}` }],
        origin: true,
      }]);
      hub.counters.reset();
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
      for (const f of files) {
        assertEquals(
          await Deno.readFile(`${pathB}/${f.path}`),
          await Deno.readFile(`${pathA}/${f.path}`),
        );
      }
      const total = files.reduce((n, f) => n + f.size, 0);
      assertEquals(peer.stats().bytesServed, total);
      assertEquals(b.events.filter((e) => e.kind === "verified").length, files.length);
    } finally {
      http.close();
      await server.shutdown();
    }
  });
});
