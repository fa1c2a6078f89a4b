/**
 * Gateway API keys end to end (design §12): created through the admin API,
 * stored hashed, followed by the gateway, enforced per model.
 */
import { assertEquals, assertOk } from "./assert.ts";
import { until } from "./until.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { ApiKeyTable } from "../gateway/api_keys.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";

Deno.test("API keys: none configured → open; then every request needs a key allowed for its model", async () => {
  const store = new MemoryStore();
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store,
    adminTokens: ["admin-token"],
    joinTokens: ["join-token"],
  });
  const table = new EndpointTable();
  const keys = new ApiKeyTable();
  const follower = followControlPlane(control.url, "admin-token", table, { intervalMs: 50, keys });
  const gateway = startGateway(table, { hostname: "127.0.0.1", port: 0, keys });
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${control.url}${path}`, {
      method,
      headers: { authorization: "Bearer admin-token", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const models = (key?: string) =>
    fetch(`${gateway.url}/v1/models`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const chat = (model: string, key?: string) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(key ? { authorization: `Bearer ${key}` } : {}),
      },
      body: JSON.stringify({ model, messages: [] }),
    });
  try {
    await follower.synced;
    const open = await models();
    assertEquals(open.status, 200);
    await open.body?.cancel();
    const created =
      await (await admin("POST", "/v1/apikeys", { name: "team-a", models: ["llama-8b"] })).json();
    assertOk(created.key.startsWith("sk-llmgw_"));
    // The store holds only the hash.
    const [stored] = await store.listApiKeys();
    assertOk(stored.hash !== created.key && !JSON.stringify(stored).includes(created.key));
    const listed = await (await admin("GET", "/v1/apikeys")).json();
    assertEquals(listed.api_keys.map((k: { id: string; hash?: string }) => [k.id, k.hash]), [[
      created.id,
      undefined,
    ]]);
    await until("the gateway to follow the new key", () => keys.enabled, { timeoutMs: 5_000 });
    const none = await models();
    assertEquals([none.status, (await none.json()).error.code], [401, "invalid_api_key"]);
    const wrong = await chat("llama-8b", "sk-llmgw_not-a-key");
    assertEquals(wrong.status, 401);
    await wrong.body?.cancel();
    // Allowed model with no ready replica: 503; a model the key may not use: as if it did not exist.
    for (const name of ["llama-8b", "qwen-7b"]) {
      const res = await admin("POST", "/v1/deployments", {
        name,
        model: `org/${name}`,
        profiles: [{ name: "p", engine: "vllm", gpu_class: "l40s-45g", tensor_parallel: 1 }],
      });
      assertEquals(res.status, 201);
      await res.body?.cancel();
    }
    await until("qwen-7b known to the gateway", () => table.isKnown("qwen-7b"), {
      timeoutMs: 5_000,
    });
    const allowed = await chat("llama-8b", created.key);
    assertEquals(allowed.status, 503);
    await allowed.body?.cancel();
    const forbidden = await chat("qwen-7b", created.key);
    assertEquals([forbidden.status, (await forbidden.json()).error.code], [404, "model_not_found"]);
    const openToo = await chat("qwen-7b");
    assertEquals(openToo.status, 401);
    await openToo.body?.cancel();
    const withKey = await models(created.key);
    assertEquals([withKey.status, (await withKey.json()).data], [200, []]);
    assertEquals((await admin("DELETE", `/v1/apikeys/${created.id}`)).status, 200);
    await until("the gateway to drop the deleted key", () => !keys.enabled, { timeoutMs: 5_000 });
    const reopened = await models();
    assertEquals(reopened.status, 200);
    await reopened.body?.cancel();
  } finally {
    await follower.stop();
    await gateway.close();
    await control.close();
  }
});
