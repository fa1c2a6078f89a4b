/** Following the control plane (plan §12): updates, auth, and keeping the last set on failure. */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { EndpointTable } from "./endpoints.ts";
import { followControlPlane } from "./follow.ts";

Deno.test("followControlPlane: polls with the token, updates, and keeps the last set when down", async () => {
  let up = true;
  let endpoints = [{ model: "a", replica_id: "r1", url: "http://127.0.0.1:9" }];
  const auth: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    auth.push(req.headers.get("authorization"));
    if (!up) return new Response("down", { status: 503 });
    const path = new URL(req.url).pathname;
    if (path === "/v1/endpoints") return Response.json({ endpoints });
    if (path === "/v1/deployments") {
      return Response.json({
        deployments: [{ spec: { served_model_name: "a" } }, { spec: { served_model_name: "b" } }],
      });
    }
    return new Response("no", { status: 404 });
  });
  const table = new EndpointTable();
  const logs: string[] = [];
  const follower = followControlPlane(
    `http://127.0.0.1:${server.addr.port}`,
    "tok",
    table,
    { intervalMs: 20, log: (l) => logs.push(l) },
  );
  try {
    await follower.synced;
    assertEquals(table.readyModels(), ["a"]);
    assertOk(table.isKnown("b"), "served names of all deployments are known");
    assertEquals(new Set(auth), new Set(["Bearer tok"]));
    endpoints = [...endpoints, { model: "b", replica_id: "r2", url: "http://127.0.0.1:10" }];
    const until = async (pred: () => boolean) => {
      const deadline = Date.now() + 5_000;
      while (!pred() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assertOk(pred());
    };
    await until(() => table.readyModels().length === 2);
    up = false;
    await until(() => follower.lastError !== null);
    await new Promise((r) => setTimeout(r, 60));
    assertEquals(table.readyModels(), ["a", "b"], "an unreachable control plane empties nothing");
    assertEquals(logs.length, 1, "one note when polling starts failing");
    up = true;
    await until(() => follower.lastError === null);
  } finally {
    await follower.stop();
    await server.shutdown();
  }
});

Deno.test("followControlPlane: a refused connection keeps the table and stop() ends the loop", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const table = new EndpointTable();
  table.setEndpoints([{ model: "a", replica_id: "r", url: "http://x:1" }]);
  const f = followControlPlane(`http://127.0.0.1:${port}`, "t", table, { intervalMs: 10 });
  await new Promise((r) => setTimeout(r, 50));
  await f.stop();
  assertOk(f.lastError !== null);
  assertEquals(f.lastSyncAt, null);
  assertEquals(table.readyModels(), ["a"]);
});
