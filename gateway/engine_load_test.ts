import { VLLM_LOAD_NAMES, VLLM_METRICS_TEXT } from "../tests/engine_metrics_fixture.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { clientMetrics, fetchMetrics, scrapeOnce } from "./engine_load.ts";
import { UpstreamClient } from "./upstream_client.ts";
import { EndpointTable } from "./endpoints.ts";

const VLLM = VLLM_LOAD_NAMES;
const TEXT = VLLM_METRICS_TEXT;

Deno.test("scrapeOnce: reads each endpoint through its proxy credential; failures leave the reading alone", async () => {
  const seen: { origin: string; headers: Record<string, string> }[] = [];
  const table = new EndpointTable();
  table.setEndpoints([
    {
      model: "m",
      replica_id: "r1",
      url: "https://a:9181",
      shard: "r1.1/0",
      token: "t".repeat(20),
      load_metrics: VLLM,
    },
    { model: "m", replica_id: "r2", url: "https://b:9181", load_metrics: VLLM },
    { model: "m", replica_id: "r3", url: "https://c:9181" },
  ]);
  await scrapeOnce(table, {
    now: () => 5,
    get: (origin, headers) => {
      seen.push({ origin, headers });
      if (origin === "https://b:9181") return Promise.reject(new TypeError("refused"));
      return Promise.resolve({ status: 200, text: TEXT });
    },
  });
  assertEquals(
    seen.map((s) => s.origin).sort(),
    ["https://a:9181", "https://b:9181"],
    "no names, no scrape",
  );
  assertEquals(seen.find((s) => s.origin === "https://a:9181")!.headers, {
    "x-llmgw-shard": "r1.1/0",
    authorization: `Bearer ${"t".repeat(20)}`,
  });
  const [a, b, c] = table.all();
  assertEquals(a.engineLoad?.running, 5);
  assertEquals([b.engineLoad, c.engineLoad], [null, null]);
});

Deno.test("choose: the engine's own queue steers least outstanding and prefix affinity alike", () => {
  const now = 1_000;
  const t = new EndpointTable({
    now: () => now,
    random: (() => {
      let i = 0;
      return () => [0.1, 0.6][i++ % 2];
    })(),
  });
  t.setEndpoints(
    [
      { model: "m", replica_id: "r1", url: "http://a:1" },
      { model: "m", replica_id: "r2", url: "http://b:1" },
    ],
    ["m"],
    { m: "least_outstanding" },
  );
  const [r1, r2] = t.all();
  // Equal in this gateway; another gateway keeps r1's engine busy.
  r1.engineLoad = { running: 8, waiting: 6, kvUsage: 0.9, at: now };
  r2.engineLoad = { running: 1, waiting: 0, kvUsage: 0.1, at: now };
  for (let i = 0; i < 4; i++) assertEquals(t.choose("m")?.replica_id, "r2");
  // Prefix affinity: a key whose home is the busy replica spills to the other.
  t.setEndpoints(t.all(), ["m"], { m: "prefix_affinity" });
  let homeOnR1: string | null = null;
  for (let i = 0; i < 100 && homeOnR1 === null; i++) {
    r1.engineLoad = null;
    if (t.choose("m", new Set(), `user:${i}`)?.replica_id === "r1") homeOnR1 = `user:${i}`;
  }
  assertOk(homeOnR1 !== null);
  r1.engineLoad = { running: 8, waiting: 6, kvUsage: 0.9, at: now };
  assertEquals(t.choose("m", new Set(), homeOnR1)?.replica_id, "r2");
});

Deno.test("fetchMetrics and clientMetrics: a page read whole, one over 1 MiB not used", async () => {
  const big = `# ${"x".repeat(2 * 1024 * 1024)}\n${TEXT}`;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => new Response(req.headers.get("x-big") === null ? TEXT : big),
  );
  const client = new UpstreamClient();
  try {
    const origin = `http://127.0.0.1:${server.addr.port}`;
    for (const get of [fetchMetrics, clientMetrics(client)]) {
      const signal = AbortSignal.timeout(10_000);
      assertEquals(await get(origin, {}, signal), { status: 200, text: TEXT });
      assertEquals(await get(origin, { "x-big": "1" }, signal), { status: 200, text: "" });
    }
  } finally {
    client.close();
    await server.shutdown();
  }
});
