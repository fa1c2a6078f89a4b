/** The gateway's key check and its loopback-only rule while no key exists (design §12). */
import { assertEquals } from "../tests/assert.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { EndpointTable } from "./endpoints.ts";
import { createGateway } from "./app.ts";

const from = (hostname: string): Deno.ServeHandlerInfo<Deno.NetAddr> => ({
  remoteAddr: { transport: "tcp", hostname, port: 40000 },
  completed: Promise.resolve(),
});

const sha256 = async (text: string) =>
  [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");

Deno.test("without keys the gateway serves loopback clients only, unless open to the network", async () => {
  const table = new EndpointTable();
  table.setEndpoints([], ["m"]);
  const closed = createGateway(table);
  const open = createGateway(table, { openToNetwork: true });
  const models = () => new Request("http://gw/v1/models");
  assertEquals((await closed.fetch(models(), from("127.0.0.1"))).status, 200);
  assertEquals((await closed.fetch(models(), from("::1"))).status, 200);
  const refused = await closed.fetch(models(), from("10.0.0.7"));
  assertEquals(refused.status, 403);
  assertEquals((await refused.json()).error.code, "gateway_not_open");
  const post = await closed.fetch(
    new Request("http://gw/v1/chat/completions", { method: "POST", body: '{"model":"m"}' }),
    from("192.0.2.1"),
  );
  assertEquals(post.status, 403);
  assertEquals((await open.fetch(models(), from("10.0.0.7"))).status, 200);
});

Deno.test("with keys, any address with a valid key is served and a missing or wrong key is 401", async () => {
  const table = new EndpointTable();
  table.setEndpoints([], ["m"]);
  const keys = new ApiKeyTable();
  keys.set([{ id: "k1", hash: await sha256("sk-good"), models: null }]);
  const gw = createGateway(table, { keys });
  const models = (authorization?: string) =>
    new Request("http://gw/v1/models", {
      headers: authorization ? { authorization } : {},
    });
  assertEquals((await gw.fetch(models("Bearer sk-good"), from("10.0.0.7"))).status, 200);
  assertEquals((await gw.fetch(models(), from("127.0.0.1"))).status, 401);
  assertEquals((await gw.fetch(models("Bearer sk-bad"), from("10.0.0.7"))).status, 401);
  assertEquals((await gw.fetch(models("Basic sk-good"), from("10.0.0.7"))).status, 401);
});
