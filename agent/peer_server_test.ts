/**
 * The peer route on the agent's local API listener, over real TLS sockets
 * with certificates from a test CA (issue #25 items 3, 8): only a node
 * certificate of the cluster gets bytes; a range is served from the chunk
 * record before the blob is complete, never beyond it; the peer source
 * waits for a range still downloading, then gets it; a peer killed
 * mid-transfer leaves the range to the next source. Every listener is shut
 * in a `finally`.
 */
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import type { KeyPairPem } from "../tls/authority.ts";
import { type ClusterPki, clusterPki } from "../tests/cluster_pki.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { createLogger } from "../log/log.ts";
import type { AgentTls } from "./agent_tls.ts";
import { type ServedListener, serveLocalApi } from "./agent_listeners.ts";
import type { LocalApiView } from "./local_api.ts";
import { emptyAgentMetrics } from "./metrics.ts";
import { PeerServer } from "./peer_server.ts";
import { CacheLayout } from "./model_cache/cache_layout.ts";
import { recordHeader, recordLine } from "./model_cache/chunk_record.ts";
import { rememberVerified } from "./model_cache/cache_inspect.ts";
import { denoCacheFs } from "./model_cache/cache_fs.ts";
import { PeerByteSource, PeerSourceError } from "../models/peer_byte_source.ts";
import { peerBlobPath } from "../models/peer_protocol.ts";
import { blobKey, type RepoFile } from "../models/repo_snapshot.ts";
import { MemoryByteSource, syntheticSnapshot } from "../tests/memory_byte_source.ts";
import { testCache, withTempDir } from "../tests/model_cache_fixture.ts";
import { FakeClock } from "../tests/fake_clock.ts";

const REPO = "acme/tiny-llm";
const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";

const view: LocalApiView = {
  status: () => ({
    node_id: "a",
    generation: 0,
    registered: true,
    last_heartbeat_at: null,
    control_plane_failures: 0,
    shards: [],
  }),
  shard: () => null,
  metrics: () => emptyAgentMetrics(),
  metricsTokenHashes: () => [],
};

type Pki = ClusterPki;
const pki = clusterPki;

/** The local API with the peer route, over TLS with the test CA (or plain HTTP). */
async function serve(root: string, p: Pki | null, maxUploads = 4): Promise<{
  listener: ServedListener;
  peer: PeerServer;
}> {
  const peer = new PeerServer({ layout: new CacheLayout(root), maxUploads });
  // The listener reads only these three members of the agent's TLS.
  const tls = p === null
    ? null
    : { caPem: p.caPem, serving: p.server, onCertificate() {} } as unknown as AgentTls;
  const listener = await serveLocalApi(view, "llmgw_local_peer-test-0123456789", {
    listen: { hostname: "127.0.0.1", port: 0 },
    mgmtAddr: "127.0.0.1",
    tls,
    log: createLogger("agent", () => {}),
  }, peer);
  return { listener, peer };
}

/** A file's bytes written to the cache as a verified blob, or as a part file with `chunks` recorded. */
async function place(root: string, file: RepoFile, bytes: Uint8Array, chunks?: number[]) {
  const layout = new CacheLayout(root);
  await Deno.mkdir(`${layout.repoDir(REPO)}/blobs`, { recursive: true });
  if (chunks === undefined) {
    await Deno.writeFile(layout.blobPath(REPO, file), bytes);
    await rememberVerified(denoCacheFs, layout, REPO, file);
    return;
  }
  await Deno.writeFile(layout.partPath(REPO, file), bytes);
  await Deno.writeTextFile(
    layout.chunksPath(REPO, file),
    recordHeader(file.size, 1024) + chunks.map(recordLine).join(""),
  );
}

function model() {
  const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
    { path: "model.safetensors", size: 4 * 1024 + 100, seed: 7 },
  ]);
  const file = snapshot.files[0];
  return { snapshot, file, bytes: contents.get(file.path)!, contents };
}

async function get(url: string, client: KeyPairPem | undefined, p: Pki, range: string) {
  const http = pinnedFetch(p.caPem, client);
  try {
    const res = await http.fetch(url, { headers: { range } });
    return {
      status: res.status,
      code: res.headers.get("content-type")?.includes("json")
        ? (await res.clone().json()).error.code
        : null,
      bytes: new Uint8Array(await res.arrayBuffer()),
    };
  } finally {
    http.close();
  }
}

Deno.test("peer route: only a node certificate of the cluster gets bytes", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    await place(root, file, bytes);
    const { listener } = await serve(root, p);
    const plain = await serve(root, null);
    try {
      const url = listener.url + peerBlobPath(REPO, blobKey(file), file.size);
      const range = "bytes=10-2047";
      const ok = await get(url, p.nodeB, p, range);
      assertEquals([ok.status, ok.bytes], [206, bytes.slice(10, 2048)]);
      assertEquals((await get(url, undefined, p, range)).code, "client_certificate_required");
      assertEquals((await get(url, p.stranger, p, range)).code, "client_certificate_required");
      assertEquals((await get(url, p.control, p, range)).code, "forbidden");
      // The local token's routes keep their rule: a node certificate alone gets no status.
      assertEquals((await get(`${listener.url}/v1/status`, p.nodeB, p, range)).status, 401);
      // Plain HTTP proves nothing about the caller: no bytes at all.
      const res = await fetch(plain.listener.url + peerBlobPath(REPO, blobKey(file), file.size), {
        headers: { range },
      });
      assertEquals([res.status, (await res.json()).error.code], [403, "peer_tls_required"]);
    } finally {
      await listener.server.shutdown();
      await plain.listener.server.shutdown();
    }
  });
});

Deno.test("peer route: bad requests get 400/416 naming what was wrong", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    await place(root, file, bytes);
    const { listener } = await serve(root, p);
    try {
      const base = listener.url + peerBlobPath(REPO, blobKey(file), file.size);
      assertEquals((await get(base, p.nodeB, p, "bytes=5-")).code, "bad_range");
      assertEquals((await get(base, p.nodeB, p, `bytes=0-${file.size}`)).status, 416);
      const badKey = `${listener.url}/peer/v1/blobs/acme/tiny-llm/..%2F..%2Fetc?size=4`;
      const r = await get(badKey, p.nodeB, p, "bytes=0-1");
      assertEquals([r.status, r.code], [400, "bad_request"]);
      const badRepo = `${listener.url}/peer/v1/blobs/a--b/c/${blobKey(file)}?size=4`;
      assertEquals((await get(badRepo, p.nodeB, p, "bytes=0-1")).code, "bad_request");
    } finally {
      await listener.server.shutdown();
    }
  });
});

Deno.test("peer route: a range is served from the chunk record before the blob is complete, never beyond it", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    // Chunks 0 and 2 on disk; chunk 1's bytes are zeros in the part file, as a hole would be.
    const part = bytes.slice();
    part.fill(0, 1024, 2048);
    await place(root, file, part, [0, 2]);
    const { listener, peer } = await serve(root, p);
    try {
      const url = listener.url + peerBlobPath(REPO, blobKey(file), file.size);
      const first = await get(url, p.nodeB, p, "bytes=100-1023");
      assertEquals([first.status, first.bytes], [206, bytes.slice(100, 1024)]);
      const third = await get(url, p.nodeB, p, "bytes=2048-3071");
      assertEquals([third.status, third.bytes], [206, bytes.slice(2048, 3072)]);
      for (const range of ["bytes=1024-1024", "bytes=1000-1100", "bytes=0-4195"]) {
        const r = await get(url, p.nodeB, p, range);
        assertEquals([r.status, r.code], [503, "range_pending"], range);
      }
      const other = listener.url + peerBlobPath(REPO, "ab".repeat(32), file.size);
      assertEquals((await get(other, p.nodeB, p, "bytes=0-1")).code, "not_held");
      const stats = peer.stats();
      assertEquals(stats.bytesServed, 924 + 1024);
      assertEquals([stats.rangesServed, stats.refused.range_pending, stats.refused.not_held], [
        2,
        3,
        1,
      ]);
      assertEquals(stats.uploads, 0);
    } finally {
      await listener.server.shutdown();
    }
  });
});

Deno.test("peer route: an unverified blob (an existing hub cache's, never hashed here) is not served", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    const layout = new CacheLayout(root);
    await Deno.mkdir(`${layout.repoDir(REPO)}/blobs`, { recursive: true });
    await Deno.writeFile(layout.blobPath(REPO, file), bytes);
    const { listener } = await serve(root, p);
    try {
      const url = listener.url + peerBlobPath(REPO, blobKey(file), file.size);
      assertEquals((await get(url, p.nodeB, p, "bytes=0-9")).code, "not_held");
    } finally {
      await listener.server.shutdown();
    }
  });
});

Deno.test("peer route: uploads beyond the bound are refused as busy", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    // Larger than the socket's buffers, so the first upload is still running.
    const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
      { path: "model.safetensors", size: 32 * 2 ** 20, seed: 5 },
    ]);
    const file = snapshot.files[0];
    await place(root, file, contents.get(file.path)!);
    const { listener, peer } = await serve(root, p, 1);
    const http = pinnedFetch(p.caPem, p.nodeB);
    try {
      const url = listener.url + peerBlobPath(REPO, blobKey(file), file.size);
      const held = await http.fetch(url, { headers: { range: `bytes=0-${file.size - 1}` } });
      assertEquals(held.status, 206);
      // The first upload's body is not read yet: its slot is still taken.
      const second = await http.fetch(url, { headers: { range: "bytes=0-9" } });
      assertEquals([second.status, (await second.json()).error.code], [503, "busy"]);
      assertEquals((await held.bytes()).length, file.size);
      assertEquals(peer.stats().uploads, 0);
    } finally {
      http.close();
      await listener.server.shutdown();
    }
  });
});

Deno.test("peer source: reads from a node's peer route with a node certificate; waits (bounded) for a pending range", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    await place(root, file, bytes, [0]);
    const { listener } = await serve(root, p);
    const http = pinnedFetch(p.caPem, p.nodeB);
    const clock = new FakeClock(1_000);
    let sleeps = 0;
    const layout = new CacheLayout(root);
    const source = new PeerByteSource({
      nodeId: "a",
      url: listener.url,
      fetch: http.fetch,
      maxWaitMs: 5_000,
      clock,
      sleep: async (ms) => {
        sleeps++;
        clock.advance(ms);
        // The peer's download reaches chunk 1 while the source waits.
        if (sleeps === 2) {
          await Deno.writeTextFile(layout.chunksPath(REPO, file), "1\n", { append: true });
        }
      },
    });
    try {
      const signal = new AbortController().signal;
      const got = await new Response(await source.read(REPO, COMMIT, file, 0, 2048, signal))
        .bytes();
      assertEquals(got, bytes.slice(0, 2048));
      assertEquals(sleeps, 2);
      // Chunk 3 never comes: the source gives up after its bound, retryably.
      const late = await assertRejects(
        () => source.read(REPO, COMMIT, file, 3072, 4096, signal),
        PeerSourceError,
      ) as PeerSourceError;
      assertStringIncludes(late.message, "peer a still fetching bytes 3072-4095");
      assertEquals(late.retryable, true);
      const missing = { ...file, sha256: "cd".repeat(32) };
      const none = await assertRejects(
        () => source.read(REPO, COMMIT, missing, 0, 10, signal),
        PeerSourceError,
      ) as PeerSourceError;
      assertEquals(none.retryable, false);
    } finally {
      http.close();
      await listener.server.shutdown();
    }
  });
});

Deno.test("a peer killed mid-transfer: the cache fetches the rest of the range elsewhere and verifies", async () => {
  const p = await pki();
  await withTempDir(async (dir) => {
    const { snapshot, contents } = syntheticSnapshot(REPO, COMMIT, [
      { path: "model.safetensors", size: 64 * 2 ** 20, seed: 11 },
    ]);
    const file = snapshot.files[0];
    const bytes = contents.get(file.path)!;
    const peerRoot = `${dir}/peer`;
    await place(peerRoot, file, bytes);
    const { listener } = await serve(peerRoot, p);
    const http = pinnedFetch(p.caPem, p.nodeB);
    let killed = false;
    // The peer's listener is shut, every connection cut, once the first bytes arrived.
    const killing: typeof fetch = async (input, init) => {
      const res = await http.fetch(input, init);
      if (killed || res.body === null) return res;
      const reader = res.body.getReader();
      const first = await reader.read();
      killed = true;
      await listener.server.shutdown(0);
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          if (!first.done) c.enqueue(first.value);
        },
        async pull(c) {
          try {
            const next = await reader.read();
            if (next.done) c.close();
            else c.enqueue(next.value);
          } catch (e) {
            c.error(e);
          }
        },
        cancel: (r) => reader.cancel(r),
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const origin = new MemoryByteSource("origin", contents, [], "hub");
    origin.pieceBytes = 2 ** 20;
    const peer = new PeerByteSource({ nodeId: "a", url: listener.url, fetch: killing });
    const { cache, events } = testCache(`${dir}/cache`, {
      chunkBytes: 2 * 2 ** 20,
      concurrency: 1,
    });
    try {
      const path = await cache.ensureSnapshot(snapshot, [peer, origin]);
      assertEquals(await Deno.readFile(`${path}/${file.path}`), bytes);
      assertOk(killed, "the peer was killed mid-transfer");
      const changed = events.find((e) => e.kind === "source_changed");
      assertEquals(changed?.kind === "source_changed" ? [changed.from, changed.to] : [], [
        "peer a",
        "origin",
      ]);
      // The origin went on from the byte the peer reached, not from the chunk's start.
      const resumed = origin.reads[0];
      assertOk(resumed.start > 0 && resumed.start < 32 * 2 ** 20, JSON.stringify(origin.reads));
      const fromOrigin = origin.reads.reduce((n, r) => n + r.end - r.start, 0);
      assertEquals(fromOrigin, file.size - resumed.start);
    } finally {
      http.close();
      await listener.server.shutdown(0);
    }
  });
});

Deno.test("peer source: a peer not listening yet, or not begun, is asked again within its bounds", async () => {
  const p = await pki();
  await withTempDir(async (root) => {
    const { file, bytes } = model();
    const { listener } = await serve(root, p);
    const http = pinnedFetch(p.caPem, p.nodeB);
    const clock = new FakeClock(1_000);
    let calls = 0;
    const source = new PeerByteSource({
      nodeId: "a",
      url: listener.url,
      // Refused twice, as a peer whose agent is still starting.
      fetch: (input, init) =>
        ++calls <= 2
          ? Promise.reject(new TypeError("client error (Connect)"))
          : http.fetch(input, init),
      maxWaitMs: 5_000,
      clock,
      sleep: async (ms) => {
        clock.advance(ms);
        // It begins (and finishes) the download while it is asked again.
        if (calls === 4) await place(root, file, bytes);
      },
    });
    try {
      const signal = new AbortController().signal;
      const got = await new Response(await source.read(REPO, COMMIT, file, 0, 1000, signal))
        .bytes();
      assertEquals(got, bytes.slice(0, 1000));
      assertEquals(calls, 5); // 2 refused, 2 not_held, then served
      // Never listening: retryable, after at most maxUnreachableMs (5 s by default, 2 s here).
      const dead = new PeerByteSource({
        nodeId: "gone",
        url: "https://127.0.0.1:9",
        fetch: () => Promise.reject(new TypeError("client error (Connect)")),
        maxUnreachableMs: 2_000,
        clock,
        sleep: (ms) => Promise.resolve(clock.advance(ms)),
      });
      const began = clock.now();
      const e = await assertRejects(
        () => dead.read(REPO, COMMIT, file, 0, 10, signal),
        PeerSourceError,
        "peer gone unreachable",
      ) as PeerSourceError;
      assertEquals(e.retryable, true);
      assertOk(clock.now() - began <= 2_000);
    } finally {
      http.close();
      await listener.server.shutdown();
    }
  });
});
