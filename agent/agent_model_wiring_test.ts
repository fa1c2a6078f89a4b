import { createLogger } from "../log/log.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { AgentModelWiring } from "./agent_model_wiring.ts";
import { PeerServer } from "./peer_server.ts";
import { launch } from "../tests/fake_engine_harness.ts";

const quiet = createLogger("supervisor", () => {});
const none = () => null;

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
    const w = new AgentModelWiring({
      models: {
        cache: { root, rateBytesPerSecond: null, watermarks: { highPercent: 90, lowPercent: 80 } },
        hub: { endpoint: "http://127.0.0.1:1" },
      },
      tls: null,
      log: quiet,
      version: "test",
      // Without TLS no peer is asked, so the received state's sources are never read.
      received: () => (asked++, null),
      applied: none,
    });
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
