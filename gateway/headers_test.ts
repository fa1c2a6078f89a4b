/** Hop-by-hop headers and Host are not forwarded (design §12), checked through the proxy. */
import { assertEquals } from "../tests/assert.ts";
import { EndpointTable } from "./endpoints.ts";
import { addForwarded, forwardHeaders } from "./headers.ts";
import { startGateway } from "./server.ts";

Deno.test("forwardHeaders drops hop-by-hop, Proxy-*, Connection-named and listed headers", () => {
  const h = new Headers({
    connection: "keep-alive, x-private",
    "keep-alive": "timeout=5",
    te: "trailers",
    trailer: "x",
    upgrade: "h2c",
    "proxy-authorization": "Basic x",
    "proxy-foo": "1",
    "x-private": "1",
    host: "gw",
    authorization: "Bearer k",
    "content-type": "application/json",
  });
  assertEquals(
    [...forwardHeaders(h, ["host"]).keys()].sort(),
    ["authorization", "content-type"],
  );
});

Deno.test("addForwarded appends the client to X-Forwarded-For and keeps a front proxy's host and scheme", () => {
  const fresh = new Headers();
  addForwarded(fresh, { clientAddress: "10.0.0.9", host: "gw:8080", proto: "http" });
  assertEquals(Object.fromEntries(fresh), {
    "x-forwarded-for": "10.0.0.9",
    "x-forwarded-host": "gw:8080",
    "x-forwarded-proto": "http",
  });
  const behindLb = new Headers({
    "x-forwarded-for": "198.51.100.1",
    "x-forwarded-host": "api.example.com",
    "x-forwarded-proto": "https",
  });
  addForwarded(behindLb, { host: "gw:8080", proto: "http" });
  assertEquals(Object.fromEntries(behindLb), {
    "x-forwarded-for": "198.51.100.1",
    "x-forwarded-host": "api.example.com",
    "x-forwarded-proto": "https",
  });
});

Deno.test("the proxy forwards end-to-end headers only, both ways", async () => {
  let seen: Headers | undefined;
  const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen = req.headers;
    return new Response('{"ok":true}', {
      headers: { "content-type": "application/json", "x-engine": "1", "keep-alive": "timeout=9" },
    });
  });
  const table = new EndpointTable();
  table.setEndpoints([{
    model: "m",
    replica_id: "r",
    url: `http://127.0.0.1:${upstream.addr.port}`,
  }]);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-request-id": "abc",
        "proxy-authorization": "Basic secret",
        te: "trailers",
        "x-forwarded-for": "203.0.113.7",
      },
      body: '{"model":"m","prompt":"x"}',
    });
    assertEquals(await r.json(), { ok: true });
    assertEquals(r.headers.get("x-engine"), "1");
    assertEquals(r.headers.get("keep-alive"), null);
    assertEquals(seen?.get("x-request-id"), "abc");
    assertEquals(seen?.get("proxy-authorization"), null);
    assertEquals(seen?.get("te"), null);
    assertEquals(seen?.get("host"), `127.0.0.1:${upstream.addr.port}`, "the upstream's own Host");
    // The client's address is appended to the chain; the host it asked for travels too.
    assertEquals(seen?.get("x-forwarded-for"), "203.0.113.7, 127.0.0.1");
    assertEquals(seen?.get("x-forwarded-host"), new URL(gw.url).host);
    assertEquals(seen?.get("x-forwarded-proto"), "http");
  } finally {
    await gw.close();
    await upstream.shutdown();
  }
});
