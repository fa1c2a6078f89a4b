/**
 * Following the control plane (design §12): updates, auth, answers checked
 * against protocol/gateway_protocol.ts, and keeping the last set on any
 * failure.
 */
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { until } from "../tests/until.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { EndpointTable } from "./endpoints.ts";
import { fetchSnapshot, followControlPlane } from "./follow.ts";

const HASH = "a".repeat(64);

/** Every deployment's served name, as the endpoint list carries them. */
const MODELS = ["a", "b"];

/** A fetch answering each path with the body `answers` holds for it now. */
function answering(answers: Record<string, unknown>): typeof fetch {
  return (input) => {
    const path = new URL(String(input)).pathname;
    return Promise.resolve(
      path in answers ? Response.json(answers[path]) : new Response("no", { status: 404 }),
    );
  };
}

Deno.test("followControlPlane: polls with the token, updates, and keeps the last set when down", async () => {
  let up = true;
  let endpoints = [{ model: "a", replica_id: "r1", url: "http://127.0.0.1:9" }];
  const auth: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    auth.push(req.headers.get("authorization"));
    if (!up) return new Response("down", { status: 503 });
    const path = new URL(req.url).pathname;
    if (path === "/v1/endpoints") return Response.json({ endpoints, api_keys: [], models: MODELS });
    return new Response("no", { status: 404 });
  });
  const table = new EndpointTable();
  const logs: string[] = [];
  const clock = new FakeClock();
  const follower = followControlPlane(
    `http://127.0.0.1:${server.addr.port}`,
    "tok",
    table,
    { intervalMs: 20, log: (l) => logs.push(l), clock },
  );
  try {
    await until("the first sync", () => follower.lastSyncAt !== null);
    assertEquals(follower.lastSyncAt, clock.now());
    assertEquals(table.readyModels(), ["a"]);
    assertOk(table.isKnown("b"), "served names of all deployments are known");
    assertEquals(new Set(auth), new Set(["Bearer tok"]));
    endpoints = [...endpoints, { model: "b", replica_id: "r2", url: "http://127.0.0.1:10" }];
    await until("the second endpoint", () => table.readyModels().length === 2);
    up = false;
    const downAt = auth.length;
    await until("polls while down", () => follower.lastError !== null && auth.length >= downAt + 6);
    assertEquals(table.readyModels(), ["a", "b"], "an unreachable control plane empties nothing");
    assertEquals(logs.length, 1, "one note when polling starts failing");
    const lastSync = follower.lastSyncAt;
    clock.advance(60_000);
    await until("a poll after the clock moved", () => auth.length >= downAt + 8);
    assertEquals(follower.lastSyncAt, lastSync, "a failed poll is no sync");
    up = true;
    await until("recovery", () => follower.lastSyncAt === clock.now());
    assertEquals(follower.lastError, null);
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
  await until("a failed poll", () => f.lastError !== null);
  await f.stop();
  assertEquals(f.lastSyncAt, null);
  assertEquals(table.readyModels(), ["a"]);
});

Deno.test("fetchSnapshot: endpoints, served names and API keys from valid answers", async () => {
  const snap = await fetchSnapshot("http://control:1/", "t", {
    fetch: answering({
      "/v1/endpoints": {
        endpoints: [{ model: "a", replica_id: "r1", url: "http://10.0.0.1:8000", extra: 1 }],
        api_keys: [{ id: "key-1", hash: HASH, models: ["a"] }, {
          id: "key-2",
          hash: HASH.replace("a", "b"),
          models: null,
        }],
        models: MODELS,
        from_the_future: true,
      },
    }),
  });
  assertEquals(snap, {
    endpoints: [{ model: "a", replica_id: "r1", url: "http://10.0.0.1:8000" }],
    models: ["a", "b"],
    apiKeys: [
      { id: "key-1", hash: HASH, models: ["a"] },
      { id: "key-2", hash: HASH.replace("a", "b"), models: null },
    ],
    // An older control plane sends no routing: every model gets the default.
    routing: {},
  });
});

Deno.test("fetchSnapshot: a bad answer is refused whole, naming the path and the field", async () => {
  const endpoint = { model: "a", replica_id: "r1", url: "http://10.0.0.1:8000" };
  const cases: [string, Record<string, unknown>, string][] = [
    ["bad url", {
      "/v1/endpoints": {
        endpoints: [endpoint, { ...endpoint, url: "ftp://x" }],
        api_keys: [],
        models: MODELS,
      },
    }, "GET /v1/endpoints: Cannot use the endpoint list: endpoints[1].url: must be an engine's"],
    ["bad key hash", {
      "/v1/endpoints": {
        endpoints: [],
        api_keys: [{ id: "k", hash: "xyz", models: null }],
        models: MODELS,
      },
    }, "api_keys[0].hash: must be a SHA-256 digest"],
    // A gateway with no key is open: a missing key list must not read as "no keys".
    ["missing keys", { "/v1/endpoints": { endpoints: [], models: MODELS } }, "api_keys: "],
    [
      "served names missing",
      { "/v1/endpoints": { endpoints: [], api_keys: [] } },
      "GET /v1/endpoints: Cannot use the endpoint list: models: ",
    ],
    [
      "an empty served name",
      { "/v1/endpoints": { endpoints: [], api_keys: [], models: ["a", ""] } },
      "models[1]: ",
    ],
  ];
  for (const [name, answers, message] of cases) {
    const e = await assertRejects(
      () => fetchSnapshot("http://control:1", "t", { fetch: answering(answers) }),
      Error,
    );
    assertStringIncludes(e.message, message, name);
  }
  const notJson: typeof fetch = () => Promise.resolve(new Response("<html>"));
  await assertRejects(
    () => fetchSnapshot("http://control:1", "t", { fetch: notJson }),
    Error,
    "the answer is not JSON",
  );
});

Deno.test("fetchSnapshot: a refused poll says the control plane's error code and message", async () => {
  const refused: typeof fetch = () =>
    Promise.resolve(
      Response.json({ error: { code: "unauthorized", message: "token revoked" } }, {
        status: 401,
      }),
    );
  await assertRejects(
    () => fetchSnapshot("http://control:1", "t", { fetch: refused }),
    Error,
    "GET /v1/endpoints: HTTP 401: unauthorized: token revoked",
  );
  // A proxy's page is no error body: the status alone.
  const page: typeof fetch = () => Promise.resolve(new Response("<html>", { status: 502 }));
  const e = await assertRejects(
    () => fetchSnapshot("http://control:1", "t", { fetch: page }),
    Error,
  );
  assertEquals(e.message, "GET /v1/endpoints: HTTP 502");
});

Deno.test("followControlPlane: a bad answer keeps the last endpoints and keys", async () => {
  const answers: Record<string, unknown> = {
    "/v1/endpoints": {
      endpoints: [{ model: "a", replica_id: "r1", url: "http://127.0.0.1:9" }],
      api_keys: [{ id: "key-1", hash: HASH, models: null }],
      models: MODELS,
    },
  };
  const table = new EndpointTable();
  const keys = new ApiKeyTable();
  const logs: string[] = [];
  const f = followControlPlane("http://control:1", "t", table, {
    intervalMs: 10,
    fetch: answering(answers),
    keys,
    log: (l) => logs.push(l),
  });
  try {
    await until("the first sync", () => f.lastSyncAt !== null);
    assertOk(keys.enabled);
    answers["/v1/endpoints"] = { endpoints: [], api_keys: [{ id: "key-1", hash: "oops" }] };
    const error = await until("the refused answer", () => f.lastError);
    assertStringIncludes(error, "api_keys[0].hash");
    assertEquals(table.readyModels(), ["a"]);
    assertOk(keys.enabled, "the keys stay: an empty key table would open the gateway");
    assertStringIncludes(logs[0], "keeping the last known endpoints");
  } finally {
    await f.stop();
  }
});
