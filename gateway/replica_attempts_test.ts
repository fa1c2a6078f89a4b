/**
 * The gateway's rules for agents' engine proxies that are down (design §12,
 * issue #23 item 4): a refused connection marks the node's proxy down and the
 * request goes to another replica; with every replica behind a down proxy
 * the request is held, served when a proxy is back, and answered 503 when
 * the hold runs out. The proxies are small loopback servers standing in for
 * agents; every one is shut down by the test.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { type EndpointSpec, EndpointTable } from "./endpoints.ts";
import { createGateway, type GatewayOptions } from "./app.ts";
import { ProxyHealth } from "./proxy_health.ts";
import { GatewayMetrics } from "./metrics.ts";
import { SHARD_HEADER } from "../protocol/engine_proxy_protocol.ts";

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A stand-in agent proxy on `port`: answers every request with the shard it names. */
function serveProxy(port: number): Deno.HttpServer {
  return Deno.serve(
    { hostname: "127.0.0.1", port, onListen: () => {} },
    (req) => Response.json({ shard: req.headers.get(SHARD_HEADER) }),
  );
}

/** An endpoint behind the proxy at `port`. */
function viaProxy(replica: string, port: number): EndpointSpec {
  return {
    model: "m",
    replica_id: replica,
    url: `http://127.0.0.1:${port}`,
    shard: `${replica}.1/0`,
    token: "proxy-token",
  };
}

function chat(signal?: AbortSignal): Request {
  return new Request("http://gateway/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    signal,
  });
}

function gateway(table: EndpointTable, options: GatewayOptions) {
  return createGateway(table, options);
}

Deno.test("a refused connection marks the node's proxy down: its other replicas are skipped, others serve", async () => {
  const down = freePort();
  const upPort = freePort();
  const up = serveProxy(upPort);
  // random 0: the first two drawn are a1 and a2 (a1 wins the tie); b only as a retry.
  const table = new EndpointTable({ random: () => 0 });
  table.setEndpoints([viaProxy("a1", down), viaProxy("a2", down), viaProxy("b", upPort)]);
  const health = new ProxyHealth();
  const gw = gateway(table, { proxyHealth: health });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await gw.fetch(chat());
      assertEquals(r.status, 200);
      assertEquals((await r.json()).shard, "b.1/0");
    }
    const [a1, a2, b] = table.all();
    // One refusal for the whole node: a2, on the same proxy, was never dialled.
    assertEquals([a1.dispatched, a2.dispatched, b.dispatched], [1, 0, 3]);
    assertEquals(health.downOrigins(), [`http://127.0.0.1:${down}`]);
  } finally {
    gw.close();
    await up.shutdown();
  }
});

Deno.test("every replica behind a down proxy: the request is held and served when the proxy is back", async () => {
  const port = freePort();
  const table = new EndpointTable();
  table.setEndpoints([viaProxy("a", port)]);
  const health = new ProxyHealth();
  const metrics = new GatewayMetrics();
  const lines: string[] = [];
  const gw = gateway(table, {
    proxyHealth: health,
    metrics,
    hold: { holdMs: 20_000, retryMs: 50 },
    log: (l) => lines.push(l),
  });
  const held = () => /^llmgw_gateway_held_requests (\d+)$/m.exec(metrics.render())?.[1];
  let proxy: Deno.HttpServer | undefined;
  try {
    const answer = gw.fetch(chat());
    // The agent comes back once the request has tried it a few times and is waiting
    // (between two tries it is dialling, not held: wait for both).
    let polls = 0;
    while ((table.all()[0].dispatched < 3 || held() !== "1") && polls++ < 500) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assertEquals(health.downOrigins(), [`http://127.0.0.1:${port}`], "marked down first");
    assertEquals(held(), "1", "the gauge shows the held request");
    proxy = serveProxy(port);
    const r = await answer;
    assertEquals(r.status, 200);
    assertEquals((await r.json()).shard, "a.1/0");
    assertEquals(health.downOrigins(), [], "up again after its answer");
    assertOk(table.all()[0].dispatched >= 3, "tried, held, tried again");
    assertEquals(lines.length, 1, `one log line for the endpoint, not one per try: ${lines}`);
    assertEquals(held(), "0");
  } finally {
    gw.close();
    await proxy?.shutdown();
  }
});

Deno.test("a hold that runs out is a 503 with Retry-After, naming no node; a full queue answers at once", async () => {
  const table = new EndpointTable();
  table.setEndpoints([viaProxy("a", freePort()), viaProxy("b", freePort())]);
  const gw = gateway(table, { hold: { holdMs: 300, retryMs: 50, maxHeld: 1 } });
  try {
    const first = gw.fetch(chat());
    const second = await gw.fetch(chat());
    // The one place is taken by the first request: the second is not held.
    assertEquals(second.status, 503);
    assertStringIncludes((await second.json()).error.message, "holds as many requests");
    const r = await first;
    assertEquals(r.status, 503);
    assertEquals(r.headers.get("retry-after"), "5");
    const e = (await r.json()).error;
    assertEquals([e.code, e.type], ["replica_unreachable", "server_error"]);
    assertStringIncludes(e.message, "none came back within 0.3 s");
    assertOk(!e.message.includes("127.0.0.1"), `a node's address reached the client: ${e.message}`);
    const tries = table.all().reduce((n, x) => n + x.dispatched, 0);
    // Bounded: a few rounds over two replicas in 300 ms, not a busy loop.
    assertOk(tries >= 3 && tries <= 2 * 20, `${tries} tries`);
  } finally {
    gw.close();
  }
});

Deno.test("a client leaving while held gets 499 and nothing stays counted", async () => {
  const table = new EndpointTable();
  table.setEndpoints([viaProxy("a", freePort())]);
  const gw = gateway(table, { hold: { holdMs: 20_000, retryMs: 50 } });
  try {
    const ctl = new AbortController();
    const answer = gw.fetch(chat(ctl.signal));
    let polls = 0;
    while (table.all()[0].dispatched === 0 && polls++ < 200) {
      await new Promise((r) => setTimeout(r, 10));
    }
    ctl.abort();
    const r = await answer;
    assertEquals(r.status, 499);
    await r.body?.cancel();
    assertEquals(table.all()[0].outstanding, 0);
  } finally {
    gw.close();
  }
});

Deno.test("an engine reached directly (no proxy) is not held: 502 at once", async () => {
  const table = new EndpointTable();
  table.setEndpoints([{ model: "m", replica_id: "d", url: `http://127.0.0.1:${freePort()}` }]);
  const gw = gateway(table, { hold: { holdMs: 20_000 } });
  try {
    const r = await gw.fetch(chat());
    assertEquals(r.status, 502);
    assertEquals((await r.json()).error.code, "upstream_unreachable");
  } finally {
    gw.close();
  }
});
