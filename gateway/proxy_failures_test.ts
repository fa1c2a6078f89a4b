/**
 * The gateway (design §12) against REAL fake engines (tests/gateway_fixture.ts): retries before the first byte, upstream death mid-answer, client disconnects.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { EndpointTable } from "./endpoints.ts";
import { startGateway } from "./server.ts";
import { chat, freePort, post, withGateway } from "../tests/gateway_fixture.ts";

Deno.test("gateway: an endpoint refusing connections is retried on another", async () => {
  const closed = { model: "demo", replica_id: "dead", url: `http://127.0.0.1:${freePort()}` };
  await withGateway(
    [{ model: "demo" }],
    ([a], table) => table.setEndpoints([closed, a.spec("r1")]),
    // Both endpoints are always drawn; the tie goes to the first drawn: index 0, the closed one.
    { random: () => 0 },
    async (gw, _engines, table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo"));
      assertEquals(r.status, 200);
      await r.body?.cancel();
      const [dead, live] = table.all();
      assertEquals([dead.dispatched, live.dispatched], [1, 1]);
      assertOk(dead.suspectSince !== null, "the refusing endpoint is suspect");
      assertEquals([dead.outstanding, live.outstanding], [0, 0]);
      // Now the suspect is skipped outright.
      const again = await post(gw, "/v1/embeddings", { model: "demo", input: "x" });
      assertEquals(again.status, 200);
      await again.body?.cancel();
      assertEquals([dead.dispatched, live.dispatched], [1, 2]);
      // Per-replica metrics: the failed attempt and the two answered ones.
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_requests_total{model="demo",replica="dead",outcome="upstream_unreachable"} 1',
      );
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_requests_total{model="demo",replica="r1",outcome="ok"} 2',
      );
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_request_duration_seconds_count{model="demo",replica="r1"} 2',
      );
    },
  );
});

Deno.test("gateway: no endpoint reachable gives 502 after bounded retries", async () => {
  const table = new EndpointTable();
  const dead = [1, 2, 3, 4].map((i) => ({
    model: "demo",
    replica_id: `d${i}`,
    url: `http://127.0.0.1:${freePort()}`,
  }));
  table.setEndpoints(dead);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await post(gw, "/v1/chat/completions", chat("demo"));
    assertEquals(r.status, 502);
    assertEquals((await r.json()).error.code, "upstream_unreachable");
    assertEquals(table.all().reduce((n, e) => n + e.dispatched, 0), 3, "1 try + 2 retries");
  } finally {
    await gw.close();
  }
});

Deno.test("gateway: an upstream killed mid-stream ends the SSE stream with an error event", async () => {
  await withGateway(
    [{ model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    {},
    async (gw, [engine], table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo", true));
      assertEquals(r.status, 200);
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = (await reader.read()).value ?? "";
      engine.kill();
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      const events = text.split("\n\n").filter((e) => e.trim() !== "");
      const last = events[events.length - 1];
      assertOk(last.startsWith("data: {"), last);
      const err = JSON.parse(last.slice("data: ".length)).error;
      assertEquals(err.type, "server_error");
      assertOk(!text.includes("[DONE]"));
      const [e] = table.all();
      assertOk(e.suspectSince !== null, "marked suspect");
      assertEquals(e.outstanding, 0);
    },
  );
});

Deno.test("gateway: after an engine dies mid-stream, nothing is retried and the next requests go to the other replica", async () => {
  await withGateway(
    [
      { model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } },
      { model: "demo" },
    ],
    ([a, b], table) => table.setEndpoints([a.spec("dies"), b.spec("lives")]),
    // The first draw picks the first endpoint: the stream starts on "dies".
    { random: () => 0 },
    async (gw, [dying], table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo", true));
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = (await reader.read()).value ?? "";
      const [dies, lives] = table.all();
      assertEquals([dies.dispatched, lives.dispatched], [1, 0]);
      dying.kill();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      assertStringIncludes(text, "upstream_stream_error");
      assertEquals(lives.dispatched, 0, "bytes were sent: the request was not retried elsewhere");
      for (let i = 0; i < 4; i++) {
        const next = await post(gw, "/v1/chat/completions", chat("demo"));
        assertEquals(next.status, 200);
        await next.body?.cancel();
      }
      assertEquals([dies.dispatched, lives.dispatched], [1, 4], "the suspect gets nothing");
    },
  );
});

Deno.test("gateway: a client disconnect cancels the upstream request", async () => {
  await withGateway(
    [{ model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    {},
    async (gw, [engine], table) => {
      const ac = new AbortController();
      const r = await post(gw, "/v1/chat/completions", chat("demo", true), { signal: ac.signal });
      const reader = r.body!.getReader();
      await reader.read();
      assertEquals(await engine.running(), 1);
      ac.abort();
      await reader.cancel().catch(() => {});
      await until(
        "the engine's running count back to 0",
        async () => (await engine.running()) === 0,
      );
      await until("outstanding back to 0", () => table.all()[0].outstanding === 0);
      assertEquals(table.all()[0].suspectSince, null, "a client leaving is not the engine's fault");
    },
  );
});

Deno.test("gateway: a whole answer broken off mid-body is a 502 and the replica turns suspect", async () => {
  // A raw engine stand-in: promises 100 bytes, sends 10, hangs up.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      await conn.read(new Uint8Array(65536));
      await conn.write(
        new TextEncoder().encode(
          "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n" +
            '{"id":"x",',
        ),
      );
      conn.close();
    }
  })().catch(() => {});
  const table = new EndpointTable();
  table.setEndpoints([{
    model: "m",
    replica_id: "r",
    url: `http://127.0.0.1:${listener.addr.port}`,
  }]);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await post(gw, "/v1/chat/completions", { model: "m", messages: [] });
    assertEquals(r.status, 502);
    assertEquals((await r.json()).error.code, "upstream_error");
    assertOk(table.all()[0].suspectSince !== null);
    // Counted as a broken answer, not as an unreachable replica.
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assertStringIncludes(
      metrics,
      'llmgw_gateway_requests_total{model="m",outcome="mid_stream_failure"} 1',
    );
    assertOk(!metrics.includes('outcome="upstream_unreachable"'));
  } finally {
    await gw.close();
    listener.close();
    await serving;
    for (const c of conns) {
      try {
        c.close();
      } catch {
        // Closed above.
      }
    }
  }
});

Deno.test("gateway: an engine proxy running no engine of the shard (a scale-down not yet heard of) is retried on another", async () => {
  // A node's engine proxy whose shard was stopped: its own refusal, marked as such.
  const proxy = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      Response.json({ error: { code: "unknown_shard", message: "no engine" } }, {
        status: 404,
        headers: { "x-llmgw-proxy-refused": "unknown_shard" },
      }),
  );
  try {
    const stopped = {
      model: "demo",
      replica_id: "stopped",
      url: `http://127.0.0.1:${proxy.addr.port}`,
      shard: "demo-r1.1/0",
    };
    await withGateway(
      [{ model: "demo" }],
      ([a], table) => table.setEndpoints([stopped, a.spec("r0")]),
      { random: () => 0 },
      async (gw, _engines, table) => {
        const r = await post(gw, "/v1/chat/completions", chat("demo"));
        assertEquals(r.status, 200);
        await r.body?.cancel();
        const [gone, live] = table.all();
        assertEquals([gone.dispatched, live.dispatched], [1, 1]);
        assertOk(gone.suspectSince !== null, "the refusing endpoint is suspect");
      },
    );
  } finally {
    await proxy.shutdown();
  }
});

/** The value of one sample of a gateway metric, or undefined. */
