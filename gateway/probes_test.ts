/** The gateway's /healthz and /readyz (design §12), alone and on a gateway following a control plane. */
import { assertEquals } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { EndpointTable } from "./endpoints.ts";
import { readiness } from "./probes.ts";
import { createGateway } from "./app.ts";
import { startFollowingGateway } from "./server.ts";

Deno.test("readiness: synced at least once, and some model with a ready replica", () => {
  const view = (loaded: boolean, models: string[]) => ({ loaded, readyModels: () => models });
  assertEquals(readiness(view(false, [])), {
    status: "not_ready",
    reason: "the gateway has not synced its endpoints from the control plane yet",
  });
  assertEquals(readiness(view(false, ["m"])).status, "not_ready");
  assertEquals(readiness(view(true, [])), {
    status: "not_ready",
    reason: "no model has a ready replica",
  });
  assertEquals(readiness(view(true, ["m"])), { status: "ready" });
});

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("/healthz and /readyz need no key and no loopback address", async () => {
  const keys = new ApiKeyTable();
  keys.set([{ id: "k1", hash: await sha256Hex("sk-1"), models: null }]);
  const table = new EndpointTable();
  table.setEndpoints([{ model: "m", replica_id: "r", url: "http://127.0.0.1:9" }]);
  const remote = {
    remoteAddr: { transport: "tcp", hostname: "10.1.2.3", port: 40000 },
  } as Deno.ServeHandlerInfo;
  for (const gw of [createGateway(table, { keys }), createGateway(table)]) {
    try {
      for (const path of ["/healthz", "/readyz"]) {
        const r = await gw.fetch(new Request(`http://gw${path}`), remote);
        assertEquals(r.status, 200, path);
        assertEquals(r.headers.get("cache-control"), "no-store");
        await r.body?.cancel();
      }
      // The API itself still wants a key (or, with none configured, a loopback client).
      const models = await gw.fetch(new Request("http://gw/v1/models"), remote);
      assertEquals([401, 403].includes(models.status), true, String(models.status));
      await models.body?.cancel();
    } finally {
      gw.close();
    }
  }
});

Deno.test("/readyz follows the first sync and the ready set; /healthz is 200 throughout", async () => {
  // The control plane's answer, switched by the test: down, no ready replica, one ready.
  let phase: "down" | "none_ready" | "ready" = "down";
  let polls = 0;
  const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    polls++;
    if (phase === "down") return new Response("unavailable", { status: 503 });
    return Response.json({
      endpoints: phase === "ready"
        ? [{ model: "m", replica_id: "r1", url: "http://127.0.0.1:9" }]
        : [],
      api_keys: [],
      models: ["m"],
    });
  });
  const gw = startFollowingGateway({
    hostname: "127.0.0.1",
    port: 0,
    controlUrl: `http://127.0.0.1:${control.addr.port}`,
    token: "gateway-tok",
    intervalMs: 20,
  });
  const probe = async (path: string) => {
    const r = await fetch(`${gw.url}${path}`);
    return { status: r.status, body: await r.json() };
  };
  try {
    await until("a failed poll", () => polls >= 1);
    assertEquals(await probe("/healthz"), { status: 200, body: { status: "ok" } });
    assertEquals(await probe("/readyz"), {
      status: 503,
      body: {
        status: "not_ready",
        reason: "the gateway has not synced its endpoints from the control plane yet",
      },
    });
    phase = "none_ready";
    const none = await until("synced, nothing ready", async () => {
      const r = await probe("/readyz");
      return r.body.reason === "no model has a ready replica" && r;
    });
    assertEquals(none.status, 503);
    phase = "ready";
    await until("ready", async () => (await probe("/readyz")).status === 200);
    assertEquals((await probe("/readyz")).body, { status: "ready" });
    // The control plane going away keeps the last known endpoints: still ready.
    phase = "down";
    const seen = polls;
    await until("two more failed polls", () => polls >= seen + 2);
    assertEquals((await probe("/readyz")).status, 200);
    assertEquals((await probe("/healthz")).status, 200);
  } finally {
    await gw.close();
    await control.shutdown();
  }
});
