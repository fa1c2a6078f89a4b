/** Serving the gateway (design §12): its first answers, and following a control plane. */
import { until } from "../tests/until.ts";
import { assertEquals, assertRejects } from "../tests/assert.ts";
import { EndpointTable } from "./endpoints.ts";
import { startFollowingGateway, startGateway } from "./server.ts";

Deno.test("before the first sync every model answers 503 with Retry-After", async () => {
  const gw = startGateway(new EndpointTable(), { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      body: '{"model":"any"}',
    });
    assertEquals(r.status, 503);
    assertEquals(r.headers.get("retry-after"), "5");
    assertEquals((await r.json()).error.type, "server_error");
  } finally {
    await gw.close();
  }
});

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("a following gateway serves the control plane's endpoints and keys until closed", async () => {
  const keyHash = await sha256Hex("sk-test");
  const auth = new Set<string | null>();
  const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    auth.add(req.headers.get("authorization"));
    const path = new URL(req.url).pathname;
    if (path === "/v1/endpoints") {
      return Response.json({
        endpoints: [{ model: "m", replica_id: "r1", url: "http://127.0.0.1:9" }],
        api_keys: [{ id: "k1", hash: keyHash, models: null }],
        models: ["m"],
      });
    }
    return new Response("no", { status: 404 });
  });
  const gw = startFollowingGateway({
    hostname: "127.0.0.1",
    port: 0,
    controlUrl: `http://127.0.0.1:${control.addr.port}`,
    token: "gateway-tok",
    intervalMs: 60_000,
  });
  try {
    let synced = false;
    gw.synced.then(() => synced = true);
    await until("the first sync", () => synced);
    assertEquals([...auth], ["Bearer gateway-tok"]);
    const anonymous = await fetch(`${gw.url}/v1/models`);
    assertEquals(anonymous.status, 401, "the followed key is required");
    await anonymous.body?.cancel();
    const models = await fetch(`${gw.url}/v1/models`, {
      headers: { authorization: "Bearer sk-test" },
    });
    assertEquals(models.status, 200);
    assertEquals((await models.json()).data.map((m: { id: string }) => m.id), ["m"]);
  } finally {
    await gw.close();
    await control.shutdown();
  }
  await assertRejects(() => fetch(`${gw.url}/v1/models`), TypeError);
});
