import { createLogger } from "../log/log.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { AgentModelWiring } from "./agent_model_wiring.ts";
import { PeerServer } from "./peer_server.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { MemoryByteSource, syntheticSnapshot } from "../tests/memory_byte_source.ts";
import { until } from "../tests/until.ts";
import type { ByteSource } from "../models/byte_source.ts";
import { peerBlobPath } from "../models/peer_protocol.ts";
import { blobKey } from "../models/repo_snapshot.ts";

const quiet = createLogger("supervisor", () => {});
const none = () => null;
const MIB = 2 ** 20;

/** A wiring over plain HTTP with its model cache at `root` (no hub answers); `received` as given. */
function cachedWiring(
  root: string,
  received: ConstructorParameters<typeof AgentModelWiring>[0]["received"] = none,
): AgentModelWiring {
  return new AgentModelWiring({
    models: {
      cache: { root, rateBytesPerSecond: null, watermarks: { highPercent: 90, lowPercent: 80 } },
      hub: { endpoint: "http://127.0.0.1:1" },
    },
    tls: null,
    log: quiet,
    version: "test",
    received,
    applied: none,
  });
}

Deno.test("AgentModelWiring without a model cache: no cache, no peer route, nothing to close", () => {
  const w = new AgentModelWiring({
    models: undefined,
    tls: null,
    log: quiet,
    version: "test",
    received: none,
    applied: none,
  });
  assertEquals([w.models, w.peer], [null, undefined]);
  w.close();
});

Deno.test("AgentModelWiring over plain HTTP: the cache at its root, a peer route that serves no one without TLS", async () => {
  const root = await Deno.makeTempDir({ prefix: "llmgw_model_wiring_" });
  try {
    let asked = 0;
    // Without TLS no peer is asked, so the received state's sources are never read.
    const w = cachedWiring(root, () => (asked++, null));
    assertOk(w.models);
    assertEquals(w.models.root, root);
    assertOk(w.peer instanceof PeerServer);
    const refused = await w.peer.handle(new Request("http://h/peer/v1/blobs/x/y?size=1"), null);
    assertEquals(refused.status, 403);
    await refused.body?.cancel();
    // An applied state: the fetcher keeps the downloads of the shards it lists, no others.
    const told: string[][] = [];
    w.models.fetcher.retain = (ids) => void told.push([...ids]);
    const kept = { id: "keep/0", engine: "vllm", launch: launch({ port: 8000 }) };
    w.applied({ generation: 3, shards: [kept] });
    assertEquals(told, [["keep/0"]]);
    w.close();
    assertEquals(asked, 0);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("AgentModelWiring: the peer route streams a chunk the wired cache is writing (one shared view)", async () => {
  const root = await Deno.makeTempDir({ prefix: "llmgw_model_wiring_" });
  const stop = new AbortController();
  let open = () => {};
  const gate = new Promise<void>((r) => open = r);
  let fetching: Promise<unknown> = Promise.resolve();
  try {
    const w = cachedWiring(root);
    assertOk(w.models && w.peer);
    const repo = "acme/tiny-llm";
    const { snapshot, contents } = syntheticSnapshot(repo, "c".repeat(40), [
      { path: "model.safetensors", size: 2 * MIB, seed: 5 },
    ]);
    const file = snapshot.files[0];
    const origin = new MemoryByteSource("origin", contents, [], "hub");
    origin.pieceBytes = 256 * 1024;
    let held = false;
    // The origin stops after its first piece until the test opens it: the chunk is mid-write.
    const holding: ByteSource = {
      kind: origin.kind,
      name: origin.name,
      async read(r, commit, f, start, end, signal) {
        const stream = await origin.read(r, commit, f, start, end, signal);
        let pieces = 0;
        return stream.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            async transform(piece, c) {
              if (pieces++ === 1) {
                held = true;
                await gate;
              }
              c.enqueue(piece);
            },
          }),
        );
      },
    };
    fetching = w.models.cache.ensureSnapshot(snapshot, [holding], { signal: stop.signal });
    await until("the origin held mid-chunk", () => held);
    const res = await w.peer.handle(
      new Request(`http://h${peerBlobPath(repo, blobKey(file), file.size)}`, {
        headers: { range: "bytes=0-9" },
      }),
      { peerVerified: true, peerCommonName: "node:b" },
    );
    // Without the view shared by the cache and the route this is `range_pending` (503).
    assertEquals(res.status, 206);
    open();
    assertEquals(new Uint8Array(await res.arrayBuffer()), contents.get(file.path)!.slice(0, 10));
    assertEquals(w.peer.stats().rangesStreamed, 1);
    await fetching;
    w.close();
  } finally {
    open();
    stop.abort();
    await fetching.catch(() => {});
    await Deno.remove(root, { recursive: true });
  }
});
