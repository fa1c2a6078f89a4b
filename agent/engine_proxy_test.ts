import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { engineProxy, PROXY_ROUTES, SHARD_HEADER } from "./engine_proxy.ts";

const TOKEN = "llmgw_proxy_0123456789abcdef0123456789";

/** A proxy whose engine is a recorder; shard s1 runs on port 20000 with key k1. */
function setup() {
  const sent: { url: string; headers: Headers; method: string }[] = [];
  const handler = engineProxy({
    token: TOKEN,
    target: (id) => id === "s1" ? { port: 20_000, key: "k1-engine-key" } : null,
    fetch: (url, init) => {
      sent.push({ url, headers: new Headers(init.headers), method: init.method ?? "GET" });
      return Promise.resolve(
        new Response('{"ok":true}', {
          status: 200,
          headers: { "content-type": "application/json", connection: "close", "x-engine": "1" },
        }),
      );
    },
  });
  const call = (method: string, path: string, auth: string | null, shard: string | null = "s1") =>
    handler(
      new Request(`http://agent:9181${path}`, {
        method,
        headers: {
          ...(auth === null ? {} : { authorization: auth }),
          ...(shard === null ? {} : { [SHARD_HEADER]: shard }),
        },
        body: method === "POST" ? "{}" : undefined,
      }),
    );
  return { call, sent };
}

Deno.test("engine proxy: none 401, another token 403, before anything is forwarded", async () => {
  const { call, sent } = setup();
  for (
    const [auth, want] of [
      [null, 401],
      ["Bearer ", 401],
      [`Basic ${btoa(`x:${TOKEN}`)}`, 401],
      ["Bearer llmgw_admin_not-the-proxy-credential", 403],
      [`Bearer ${TOKEN}x`, 403],
    ] as const
  ) {
    for (const route of PROXY_ROUTES) {
      const [method, path] = route.split(" ");
      const res = await call(method, path, auth);
      assertEquals(res.status, want, `${route} with ${auth}`);
      const text = await res.text();
      assertOk(!text.includes(TOKEN), "an error never echoes a credential");
    }
  }
  assertEquals(sent, []);
});

Deno.test("engine proxy: only llmgw's routes are forwarded, with the engine's key", async () => {
  const { call, sent } = setup();
  // What an engine serves besides the OpenAI routes stays closed to the network.
  for (
    const [method, path] of [
      ["POST", "/tokenize"],
      ["POST", "/pause"],
      ["POST", "/update_weights"],
      ["GET", "/server_info"],
      ["POST", "/invocations"],
      ["GET", "/v1/chat/completions"],
      ["DELETE", "/v1/models"],
      ["POST", "/v1/chat/completions/../../pause"],
    ]
  ) {
    const res = await call(method, path, `Bearer ${TOKEN}`);
    assertEquals(res.status, 404, `${method} ${path}`);
    assertStringIncludes((await res.json()).error.code, "route_not_allowed");
  }
  assertEquals(sent, []);
  const res = await call("POST", "/v1/chat/completions?x=1", `Bearer ${TOKEN}`);
  assertEquals(res.status, 200);
  assertEquals(await res.json(), { ok: true });
  assertEquals(res.headers.get("x-engine"), "1");
  assertEquals(res.headers.get("connection"), null, "hop-by-hop headers stay on their hop");
  assertEquals(sent.length, 1);
  assertEquals(sent[0].url, "http://127.0.0.1:20000/v1/chat/completions?x=1");
  assertEquals(sent[0].headers.get("authorization"), "Bearer k1-engine-key");
  assertEquals(sent[0].headers.get(SHARD_HEADER), null);
});

Deno.test("engine proxy: the Responses API is forwarded, its per-response routes are not", async () => {
  const { call, sent } = setup();
  const res = await call("POST", "/v1/responses", `Bearer ${TOKEN}`);
  assertEquals(res.status, 200);
  await res.body?.cancel();
  assertEquals(sent.map((s) => [s.method, s.url, s.headers.get("authorization")]), [
    ["POST", "http://127.0.0.1:20000/v1/responses", "Bearer k1-engine-key"],
  ]);
  // Stored responses (retrieve, cancel, delete) are not routed by model: not llmgw's.
  for (
    const [method, path] of [
      ["GET", "/v1/responses/resp_1"],
      ["POST", "/v1/responses/resp_1/cancel"],
      ["DELETE", "/v1/responses/resp_1"],
      ["GET", "/v1/responses"],
    ]
  ) {
    const refused = await call(method, path, `Bearer ${TOKEN}`);
    assertEquals(refused.status, 404, `${method} ${path}`);
    assertEquals(refused.headers.get("x-llmgw-proxy-refused"), "route_not_allowed");
    await refused.body?.cancel();
  }
  assertEquals(sent.length, 1);
});

Deno.test("engine proxy: an unknown or unnamed shard, and an engine that does not answer", async () => {
  const { call } = setup();
  assertEquals((await call("GET", "/v1/models", `Bearer ${TOKEN}`, "nope")).status, 404);
  assertEquals((await call("GET", "/v1/models", `Bearer ${TOKEN}`, null)).status, 400);
  const unknown = await call("GET", "/v1/models", `Bearer ${TOKEN}`, "nope");
  assertEquals(unknown.headers.get("x-llmgw-proxy-refused"), "unknown_shard");
  // Refused before any connection (Deno's error, with its cause): the gateway may try another.
  const refused = new TypeError("fetch failed", {
    cause: new Error(
      "client error (Connect): tcp connect error: Connection refused (os error 111)",
    ),
  });
  const down = (error: Error) =>
    engineProxy({
      token: TOKEN,
      target: () => ({ port: 1, key: null }),
      fetch: () => Promise.reject(error),
    })(
      new Request("http://agent/v1/models", {
        headers: { authorization: `Bearer ${TOKEN}`, [SHARD_HEADER]: "s1" },
      }),
    );
  const res = await down(refused);
  assertEquals(res.status, 502);
  assertEquals(res.headers.get("x-llmgw-proxy-refused"), "engine_refused");
  assertStringIncludes((await res.json()).error.message, "refused the connection");
  // Broken after connecting: not known to be unsent, so not marked retryable.
  const broken = await down(new TypeError("connection reset by peer"));
  assertEquals(broken.status, 502);
  const body = await broken.json();
  assertEquals(body.error.code, "engine_unreachable");
  assertStringIncludes(body.error.message, "connection reset");
});
