/**
 * Security (issue #8): who may call what, how secrets are kept, that they
 * never leak into logs or the API, that a node's identity cannot be taken
 * over, and that the gateway only ever talks to endpoints the control plane
 * published.
 *
 * The auth matrices run on `app.request()` (no socket needed); the cluster,
 * the gateway and the agent's local API also run on loopback sockets, where
 * Host headers, absolute-form targets and chunked bodies matter. Every
 * server, agent and engine process a test starts is stopped in a `finally`.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { registration } from "./registration.ts";
import { portsOf } from "./port_plan.ts";
import { Agent } from "../agent/agent.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import { localTokenPath, readSession } from "../agent/credentials.ts";
import { localApi, type LocalApiView } from "../agent/local_api.ts";
import { engineProxy } from "../agent/engine_proxy.ts";
import { createControlApi } from "../control/api.ts";
import { ControlPlane } from "../control/control_plane.ts";
import { NodeService } from "../control/nodes.ts";
import { AccessTokenService } from "../control/access_tokens.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import type { ControlStore } from "../control/store/store.ts";
import {
  bearer as parseBearer,
  bearerMatches,
  digestMatches,
  hashToken,
  newToken,
  tokenMatches,
  tokensEqual,
} from "../http/tokens.ts";
import { ApiKeyTable } from "../gateway/api_keys.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { startGateway } from "../gateway/server.ts";
import type { ShardReport } from "../supervisor/types.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { shardDirName } from "../supervisor/supervisor.ts";
import { FakeClock } from "./fake_clock.ts";
import { emptyAgentMetrics } from "../agent/metrics.ts";
import { PeerServer } from "../agent/peer_server.ts";
import { CacheLayout } from "../agent/model_cache/cache_layout.ts";
import { CSRF_HEADER, SESSION_COOKIE, UI_ROUTES, uiApp } from "../ui/mod.ts";
import { ASSETS } from "../ui/assets.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A control plane API on a store, with two join tokens and one admin token. */
async function controlApp(store: ControlStore = new MemoryStore(), clock?: FakeClock) {
  const admin = newToken("llmgw_admin");
  const join = newToken("llmgw_join");
  const join2 = newToken("llmgw_join");
  const cp = await ControlPlane.open({ store, reconcileMs: 60_000, clock });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(admin)],
    joinTokenHashes: [await hashToken(join), await hashToken(join2)],
  }, uiApp);
  const call = async (
    method: string,
    path: string,
    authorization: string | null,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const res = await app.request(path, {
      method,
      headers: {
        ...(authorization === null ? {} : { authorization }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: { error?: { code?: string; message?: string } } & Record<string, unknown> = {};
    try {
      json = JSON.parse(text);
    } catch {
      // Metrics are text.
    }
    return { status: res.status, json, text };
  };
  return { cp, app, call, admin, join, join2 };
}

const bearer = (t: string) => `Bearer ${t}`;

// ---------------------------------------------------------------------------
// 1. The auth matrix
// ---------------------------------------------------------------------------

/** Who a route is for: the OpenAPI document's security scheme, or none. */
type Family =
  | "open"
  | "admin"
  | "gateway"
  | "metrics"
  | "join"
  | "node"
  | "local"
  | "agent metrics";

/** The answer a token kind must get on a route family: 401, 403, or through ("ok"). */
type Expect = 401 | 403 | "ok";

/** Kinds that carry no bearer token at all: always 401 outside the open routes. */
const NO_TOKEN = new Set(["none", "empty bearer", "basic scheme"]);

/**
 * Tokens the control plane does not know as its own: unknown, forged, a
 * hash, a gateway API key, revoked or expired. Always 401 outside the open
 * routes, like no token at all.
 */
const UNKNOWN_TO_CONTROL = new Set([
  "unknown admin-like",
  "admin token's hash",
  "unknown join-like",
  "forged node",
  "node n1's hash",
  "gateway API key",
  "API key's hash",
  "agent local",
  "revoked gateway",
  "expired metrics",
  "unknown llmgw1",
]);

/** The kinds each family accepts; every other presented token is 403. */
const ACCEPTED: Record<Family, ReadonlySet<string>> = {
  open: new Set(),
  admin: new Set(["admin", "stored admin"]),
  gateway: new Set(["gateway", "admin", "stored admin"]),
  metrics: new Set(["metrics", "admin", "stored admin"]),
  join: new Set(["join", "second join", "stored join"]),
  node: new Set(["node n1"]),
  local: new Set(["agent local"]),
  // The agent knows metrics tokens only (by hash, from heartbeats): no admin pass there.
  "agent metrics": new Set(["metrics"]),
};

function expected(family: Family, kind: string): Expect {
  if (family === "open") return "ok";
  if (NO_TOKEN.has(kind)) return 401;
  if (family !== "local" && family !== "agent metrics" && UNKNOWN_TO_CONTROL.has(kind)) return 401;
  return ACCEPTED[family].has(kind) ? "ok" : 403;
}

function matches(status: number, want: Expect): boolean {
  return want === "ok" ? status !== 401 && status !== 403 && status < 500 : status === want;
}

/** Whether "METHOD /path" is one of the dashboard's routes (ui/). */
function isUiRoute(route: string): boolean {
  const path = route.split(" ")[1];
  return path === "/ui" || path.startsWith("/ui/");
}

/** Hono's routes of an app, without middleware (`ALL`), as "METHOD /path". */
function routesOf(app: { routes: { method: string; path: string }[] }): string[] {
  return [
    ...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`)),
  ];
}

Deno.test("auth matrix: every control plane route × every kind of token (unknown 401, wrong kind 403)", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const { cp, app, call, admin, join, join2 } = await controlApp(new MemoryStore(), clock);
  const stored = async (kind: "admin" | "gateway" | "metrics" | "join", ttl_ms?: number) =>
    (await cp.tokens.create({ kind, ttl_ms })).token;
  const gateway = await stored("gateway");
  const metrics = await stored("metrics");
  const storedAdmin = await stored("admin");
  const storedJoin = await stored("join");
  const revoked = await stored("gateway");
  await cp.tokens.revoke(revoked.split(".")[1]);
  const expired = await stored("metrics", 60_000);
  clock.advance(60_001);
  const local = newToken("llmgw_local");
  const n1 = (await call(
    "POST",
    "/v1/agent/register",
    bearer(join),
    registration("n1", undefined, { agent_url: "http://127.0.0.1:9", agent_token: local }),
  )).json.node_token as string;
  const n2 = (await call("POST", "/v1/agent/register", bearer(join), registration("n2")))
    .json.node_token as string;
  const created = await call("POST", "/v1/apikeys", bearer(admin), { name: "client" });
  assertEquals(created.status, 201);
  const apiKey = created.json.key as string;
  assertOk(apiKey.startsWith("sk-llmgw_"));
  const n1Hash = await hashToken(n1);

  // The Authorization header each kind sends (null: none).
  const kinds: Record<string, string | null> = {
    "none": null,
    "empty bearer": "Bearer ",
    "basic scheme": `Basic ${btoa(`admin:${admin}`)}`,
    "admin": bearer(admin),
    "unknown admin-like": bearer(newToken("llmgw_admin")),
    "admin token's hash": bearer(await hashToken(admin)),
    "join": bearer(join),
    "second join": bearer(join2),
    "unknown join-like": bearer(newToken("llmgw_join")),
    "node n1": bearer(n1),
    "node n2": bearer(n2),
    "forged node": bearer(newToken("llmgw_node")),
    "node n1's hash": bearer(n1Hash),
    "gateway API key": bearer(apiKey),
    "API key's hash": bearer(await hashToken(apiKey)),
    "agent local": bearer(local),
    "gateway": bearer(gateway),
    "metrics": bearer(metrics),
    "stored admin": bearer(storedAdmin),
    "stored join": bearer(storedJoin),
    "revoked gateway": bearer(revoked),
    "expired metrics": bearer(expired),
    "unknown llmgw1": bearer(`llmgw1.${gateway.split(".")[1]}.${"x".repeat(32)}`),
  };

  // The routes come from the Hono app itself; the OpenAPI document says who
  // each is for. A route missing from either side fails here, so a new route
  // cannot slip past the matrix.
  const doc = (await call("GET", "/openapi.json", bearer(admin))).json as {
    paths: Record<string, Record<string, { security: Record<string, unknown>[] }>>;
  };
  const documented = new Map<string, Family>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const scheme = Object.keys(op.security[0] ?? {})[0];
      const family: Family = scheme === undefined ? "open" : scheme as Family;
      assertOk(
        ["open", "admin", "gateway", "metrics", "join", "node"].includes(family),
        `${path}: scheme ${scheme}`,
      );
      documented.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`, family);
    }
  }
  // The dashboard's HTML routes are outside the document: the UI matrix below covers them.
  const routes = routesOf(app).filter((r) => !isUiRoute(r));
  assertEquals(
    [...routes].sort(),
    [...documented.keys()].sort(),
    "the app's routes and the OpenAPI document",
  );
  // Only liveness, who leads (for load balancers) and the (public) CA certificate are open.
  assertEquals(routes.filter((r) => documented.get(r) === "open").sort(), [
    "GET /healthz",
    "GET /v1/ca",
    "GET /v1/leader",
  ]);
  const count = (f: Family) => routes.filter((r) => documented.get(r) === f).length;
  assertEquals([count("join"), count("node"), count("gateway"), count("metrics")], [1, 3, 1, 1]);
  assertOk(count("admin") >= 22, `${count("admin")} admin routes`);
  // An unknown path under /v1 is behind the admin check too.
  const all: [string, Family][] = [
    ...routes.map((r): [string, Family] => [r, documented.get(r)!]),
    ["GET /v1/no-such-route", "admin"],
  ];

  let fresh = 0;
  const request = (route: string) => {
    const [method, pattern] = route.split(" ");
    let path = pattern.replace(/:\w+/g, "n1");
    let body: unknown = method === "POST" || method === "PUT" ? {} : undefined;
    // Requests a node or join token may pass with: they name node n1, or a fresh node.
    if (pattern === "/v1/agent/register") body = registration(`fresh-${fresh++}`);
    if (pattern === "/v1/agent/heartbeat") body = { node_id: "n1", generation: 0, shards: [] };
    if (pattern === "/v1/agent/desired") path += "?node_id=n1";
    return { method, path, body };
  };
  const snapshot = () =>
    JSON.stringify([
      cp.deployments.list(),
      cp.replicas(),
      cp.inventory.listNodes(),
      cp.apiKeys.list(),
      cp.tokens.list(),
    ]);
  const before = snapshot();
  const failures: string[] = [];
  // Refused kinds first: nothing may change.
  for (const pass of ["refused", "accepted"] as const) {
    for (const [route, family] of all) {
      for (const [kind, header] of Object.entries(kinds)) {
        // Each node renews its own certificate: n2's credential is as good as n1's there.
        const want = route === "POST /v1/agent/certificate" && kind === "node n2"
          ? "ok"
          : expected(family, kind);
        if ((want === "ok") !== (pass === "accepted")) continue;
        const { method, path, body } = request(route);
        const res = await call(method, path, header, body);
        if (!matches(res.status, want)) {
          failures.push(`${route} with ${kind}: ${res.status}, want ${want} (${res.text})`);
        } else if (want !== "ok") {
          assertEquals(res.json.error?.code, want === 401 ? "unauthorized" : "forbidden", route);
          // An error never echoes the token it refused.
          const presented = header?.slice("Bearer ".length) ?? "";
          assertOk(presented === "" || !res.text.includes(presented), `${route} ${kind}`);
        }
      }
    }
    if (pass === "refused") assertEquals(snapshot(), before, "refused requests changed state");
  }
  assertEquals(failures, []);

  // The agent endpoints authenticate before they read the body or query: no
  // token is 401 and another kind 403 whatever the request holds.
  for (
    const [header, want] of [
      [null, 401],
      [bearer(admin), 403],
      [bearer(gateway), 403],
      [bearer(apiKey), 401],
    ] as const
  ) {
    const hb = await app.request("/v1/agent/heartbeat", {
      method: "POST",
      headers: header === null ? {} : { authorization: header },
      body: "{not json",
    });
    assertEquals(hb.status, want, `heartbeat, bad body, ${header}`);
    await hb.body?.cancel();
    const desired = await call("GET", "/v1/agent/desired?generation=banana", header);
    assertEquals(desired.status, want, `desired, bad query, ${header}`);
  }
});

Deno.test("auth matrix: the agent's local API — only its own token passes; none 401, any other 403", async () => {
  const local = newToken("llmgw_local");
  const shard: ShardReport = {
    id: "s0",
    engine: "vllm",
    state: "ready",
    since: 1,
    pid: null,
    port: 8000,
    rendezvous_port: null,
    notice: null,
    serves_http: true,
    progress: null,
    restarts: 0,
    adopted: false,
    last_failure: null,
    spec_hash: "x",
  };
  const view: LocalApiView = {
    status: () => ({
      node_id: "n1",
      generation: 1,
      registered: true,
      last_heartbeat_at: null,
      control_plane_failures: 0,
      shards: [shard],
    }),
    shard: (id) => id === "s0" ? { status: shard, log_tail: ["hello"] } : null,
    metrics: () => emptyAgentMetrics(),
    metricsTokenHashes: () => [metricsHash],
  };
  const metricsToken = newToken("llmgw_metrics");
  const metricsHash = await hashToken(metricsToken);
  const app = localApi(view, local);
  const kinds: Record<string, string | null> = {
    "none": null,
    "empty bearer": "Bearer ",
    "basic scheme": `Basic ${local}`,
    "agent local": bearer(local),
    "another agent's local": bearer(newToken("llmgw_local")),
    "local token's hash": bearer(await hashToken(local)),
    "admin": bearer(newToken("llmgw_admin")),
    "join": bearer(newToken("llmgw_join")),
    "node credential": bearer(newToken("llmgw_node")),
    "gateway API key": bearer(newToken("sk-llmgw")),
    "metrics": bearer(metricsToken),
  };
  const routes = routesOf(app);
  assertEquals(routes.filter((r) => r.endsWith(" /healthz")), ["GET /healthz"]);
  assertOk(routes.length >= 3, routes.join(", "));
  const failures: string[] = [];
  for (const route of [...routes, "GET /v1/no-such-route"]) {
    const [method, pattern] = route.split(" ");
    const family: Family = pattern === "/healthz"
      ? "open"
      : pattern === "/metrics"
      ? "agent metrics"
      : "local";
    for (const [kind, header] of Object.entries(kinds)) {
      const res = await app.request(pattern.replace(/:\w+/g, "s0"), {
        method,
        headers: header === null ? {} : { authorization: header },
      });
      const text = await res.text();
      const want = expected(family, kind);
      if (!matches(res.status, want)) failures.push(`${route} with ${kind}: ${res.status}`);
      if (want === 401) assertStringIncludes(res.headers.get("www-authenticate") ?? "", "Bearer");
      if (want === 403) assertEquals(JSON.parse(text).error.code, "forbidden");
    }
  }
  assertEquals(failures, []);
});

Deno.test("auth matrix: every dashboard route × every kind of caller (sign-in page or 401, wrong kind 403, CSRF on actions)", async () => {
  const { cp, app, admin, join } = await controlApp();
  const origin = "https://127.0.0.1:7070";
  const gateway = (await cp.tokens.create({ kind: "gateway" })).token;
  const metrics = (await cp.tokens.create({ kind: "metrics" })).token;
  const revoked = (await cp.tokens.create({ kind: "admin" })).token;
  await cp.tokens.revoke(revoked.split(".")[1]);
  const n1 = (await cp.nodes.register(registration("n1"), null)).node_token;

  // Every dashboard route the app serves is declared, with who may use it.
  const served = routesOf(app).filter(isUiRoute).sort();
  assertEquals(served, UI_ROUTES.map((r) => `${r.method} ${r.path}`).sort(), "app and UI_ROUTES");
  const access = new Map(UI_ROUTES.map((r) => [`${r.method} ${r.path}`, r.access]));
  assertEquals(
    served.filter((r) => access.get(r) === "open"),
    ["GET /ui", "GET /ui/assets/:name", "GET /ui/sign-in", "POST /ui/sign-in", "POST /ui/sign-out"],
  );

  // The CSRF token of the admin's cookie session, as its pages carry it.
  const page = await (await app.request(`${origin}/ui/`, {
    headers: { cookie: `${SESSION_COOKIE}=${admin}` },
  })).text();
  const csrf = /x-llmgw-csrf&quot;:&quot;([^&]+)&quot;/.exec(page)?.[1];
  assertOk(csrf !== undefined, "the page carries a CSRF token");

  type Caller = { headers: Record<string, string>; want: "ok" | 401 | 403 };
  const callers: Record<string, Caller> = {
    "none": { headers: {}, want: 401 },
    "unknown bearer": { headers: { authorization: bearer(newToken("llmgw_admin")) }, want: 401 },
    "revoked admin cookie": { headers: { cookie: `${SESSION_COOKIE}=${revoked}` }, want: 401 },
    "admin token's hash": { headers: { authorization: bearer(await hashToken(admin)) }, want: 401 },
    "join": { headers: { authorization: bearer(join) }, want: 403 },
    "node n1": { headers: { authorization: bearer(n1) }, want: 403 },
    "gateway": { headers: { authorization: bearer(gateway) }, want: 403 },
    "gateway cookie": { headers: { cookie: `${SESSION_COOKIE}=${gateway}` }, want: 403 },
    "metrics": { headers: { authorization: bearer(metrics) }, want: 403 },
    "admin": { headers: { authorization: bearer(admin) }, want: "ok" },
    "admin cookie": {
      headers: { cookie: `${SESSION_COOKIE}=${admin}`, [CSRF_HEADER]: csrf },
      want: "ok",
    },
    // Refused for the missing CSRF token, after the token is found good.
    "admin cookie, no CSRF token": { headers: { cookie: `${SESSION_COOKIE}=${admin}` }, want: 403 },
  };
  const snapshot = () => JSON.stringify([cp.deployments.list(), cp.inventory.listNodes()]);
  const before = snapshot();
  const failures: string[] = [];
  for (const pass of ["refused", "accepted"] as const) {
    for (const route of served) {
      const [method, pattern] = route.split(" ");
      const kind = access.get(route)!;
      const path = pattern.replace(":name", kind === "open" ? ASSETS.css.name : "n1")
        .replace(/:\w+/g, "n1").replace("*", "no-such-page");
      for (const [name, caller] of Object.entries(callers)) {
        let want: "ok" | 401 | 403 = kind === "open" ? "ok" : caller.want;
        // Only actions check the CSRF token; pages and fragments only read.
        if (name === "admin cookie, no CSRF token" && kind !== "action") want = "ok";
        // Signing out a cookie session is an action on it: its CSRF token is needed.
        if (route === "POST /ui/sign-out" && caller.headers.cookie !== undefined) {
          want = caller.headers[CSRF_HEADER] === undefined ? 403 : "ok";
        }
        if ((want === "ok") !== (pass === "accepted")) continue;
        const res = await app.request(`${origin}${path}`, {
          method,
          headers: {
            origin,
            ...caller.headers,
            ...(method === "POST" ? { "content-type": "application/x-www-form-urlencoded" } : {}),
          },
          body: method === "POST" ? (pattern.endsWith("/scale") ? "replicas=0" : "") : undefined,
        });
        const text = res.headers.get("content-type") === "text/event-stream"
          ? (await res.body?.cancel(), "")
          : await res.text();
        if (!matches(res.status, want)) {
          failures.push(
            `${route} with ${name}: ${res.status}, want ${want} (${text.slice(0, 120)})`,
          );
          continue;
        }
        if (want === 401 && kind === "page") {
          assertStringIncludes(text, 'action="/ui/sign-in"', `${route} ${name}`);
        }
        if (want !== "ok") {
          // n1's GPU class would be in any fleet data.
          assertOk(!text.includes("rtx4090"), `${route} ${name}: no fleet data`);
          for (const t of [admin, gateway, metrics, revoked, n1, join]) {
            assertOk(!text.includes(t), `${route} ${name}: a token in the answer`);
          }
        }
      }
    }
    if (pass === "refused") assertEquals(snapshot(), before, "refused requests changed state");
  }
  assertEquals(failures, []);
});

// ---------------------------------------------------------------------------
// 2. Secrets at rest and their comparison
// ---------------------------------------------------------------------------

/** Every byte a store holds, as text: the SQLite files (with the WAL), or the memory store's lists. */
async function storeContents(store: ControlStore, dir: string | null): Promise<string> {
  if (dir === null) {
    return JSON.stringify([
      await store.listNodes(),
      await store.listApiKeys(),
      await store.listEvents({ limit: 10_000 }),
      await store.listDeployments(),
      await store.listReplicas(),
    ]);
  }
  let text = "";
  for (const e of Deno.readDirSync(dir)) {
    // latin1: every byte one character, so an ASCII secret is found wherever it lies.
    text += new TextDecoder("latin1").decode(Deno.readFileSync(join(dir, e.name)));
  }
  return text;
}

Deno.test("node credentials and API keys are stored hashed (memory and SQLite); admin and join tokens not at all", async () => {
  for (const kind of ["memory", "sqlite"] as const) {
    const dir = kind === "sqlite" ? await Deno.makeTempDir({ prefix: "llmgw_sec_store_" }) : null;
    const store: ControlStore = dir === null
      ? new MemoryStore()
      : SqliteStore.open(join(dir, "llmgw.db"));
    try {
      const { call, admin, join: joinToken } = await controlApp(store);
      const local = newToken("llmgw_local");
      const reg = await call(
        "POST",
        "/v1/agent/register",
        bearer(joinToken),
        registration("n1", undefined, { agent_url: "http://127.0.0.1:9", agent_token: local }),
      );
      const nodeToken = reg.json.node_token as string;
      const key = (await call("POST", "/v1/apikeys", bearer(admin), { name: "k" })).json
        .key as string;
      assertEquals((await call("POST", "/v1/nodes/n1/cordon", bearer(admin))).status, 200);

      const nodes = await store.listNodes();
      assertEquals(nodes[0].token_hash, await hashToken(nodeToken));
      assertEquals((await store.listApiKeys())[0].hash, await hashToken(key));
      const contents = await storeContents(store, dir);
      assertStringIncludes(contents, await hashToken(nodeToken), kind);
      assertStringIncludes(contents, await hashToken(key), kind);
      for (
        const [what, secret] of [
          ["node credential", nodeToken],
          ["API key", key],
          ["admin token", admin],
          ["join token", joinToken],
          // Admin and join tokens come from the environment: not even their hashes are stored.
          ["admin token's hash", await hashToken(admin)],
          ["join token's hash", await hashToken(joinToken)],
        ]
      ) {
        assertOk(!contents.includes(secret), `${kind} store holds the ${what}`);
      }
      // The agent's local API token is the one secret kept as it is: the
      // control plane must present it to fetch logs (docs/control_plane.md).
      // It never leaves through the API (see the cluster test below).
    } finally {
      store.close();
      if (dir !== null) await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("every edge reads Authorization by the one bearer grammar of http/tokens.ts", async () => {
  // The agent's local API, its engine proxy and the gateway's API keys each
  // take exactly the headers http/tokens.ts `bearer` reads as the token, and
  // refuse every other one (the control plane's authorizer calls it directly).
  const token = newToken("llmgw_edge");
  const headers = [
    `Bearer ${token}`,
    `bearer ${token}`,
    `BEARER  ${token}`,
    `Bearer\t${token}`,
    `Bearer ${token} `,
    ` Bearer ${token}`,
    `Bearer${token}`,
    `Bearer ${token} ${token}`,
    `Bearer ${token}x`,
    `Basic ${token}`,
    token,
    "Bearer",
    "",
  ];
  const view: LocalApiView = {
    status: () => ({
      node_id: "n1",
      generation: 1,
      registered: true,
      last_heartbeat_at: null,
      control_plane_failures: 0,
      shards: [],
    }),
    shard: () => null,
    metrics: () => emptyAgentMetrics(),
    metricsTokenHashes: () => [],
  };
  const local = localApi(view, token);
  const proxy = engineProxy({
    token,
    target: () => null,
    fetch: () => Promise.resolve(new Response("{}")),
  });
  const keys = new ApiKeyTable();
  keys.set([{ id: "key-1", hash: await hashToken(token), models: null }]);
  for (const header of headers) {
    const want = parseBearer(header) === token;
    const status = (await local.request("/v1/status", { headers: { authorization: header } }))
      .status;
    assertEquals(status === 200, want, `local API: ${JSON.stringify(header)} -> ${status}`);
    const proxied = await proxy(
      new Request("http://agent:9181/v1/models", { headers: { authorization: header } }),
    );
    // Past the credential, a request naming no shard is 400.
    assertEquals(proxied.status === 400, want, `engine proxy: ${JSON.stringify(header)}`);
    assertEquals((await keys.check(header)) !== null, want, `gateway: ${JSON.stringify(header)}`);
  }
  // The gateway looks keys up by http/tokens.ts's hash: a key stored by any
  // other digest (here, upper-case hex) is not found.
  const upper = new ApiKeyTable();
  upper.set([{ id: "key-2", hash: (await hashToken(token)).toUpperCase(), models: null }]);
  assertEquals(await upper.check(`Bearer ${token}`), null);
});

Deno.test("tokens are compared in constant time or looked up by their hash", async () => {
  // Timing cannot be asserted (tests never measure wall-clock time), so this
  // checks the two halves that make the comparison constant-time:
  // 1. behaviour: only the exact token matches; any other input, of any
  //    length, is false (never a throw from a length mismatch);
  // 2. structure: each check's compiled source hashes the presented token to
  //    a fixed length and compares with node:crypto's timingSafeEqual, or
  //    looks the SHA-256 up in a Map, so no comparison ever runs over the
  //    secret's own bytes with an early exit (`===` on strings does).
  const token = newToken("llmgw_admin");
  const hash = await hashToken(token);
  assertOk(/^[0-9a-f]{64}$/.test(hash));
  assertOk(await tokenMatches(token, hash));
  for (const other of [`${token}x`, token.slice(1), "", "x".repeat(10_000), hash]) {
    assertOk(!(await tokenMatches(other, hash)), other.slice(0, 20));
  }
  for (const badHash of ["", hash.slice(1), `${hash}0`, hash.toUpperCase()]) {
    assertOk(!(await tokenMatches(token, badHash)));
  }
  assertStringIncludes(tokenMatches.toString(), "digestMatches(await hashToken(token)");
  assertStringIncludes(digestMatches.toString(), "timingSafeEqual(a, b)");

  // The local API and the engine proxy (http/tokens.ts): both sides hashed,
  // then timingSafeEqual.
  assertOk(bearerMatches(bearer(token), token));
  for (const h of [bearer(`${token}x`), bearer(token.slice(0, -1)), "", undefined]) {
    assertOk(!bearerMatches(h, token));
  }
  assertStringIncludes(bearerMatches.toString(), "tokensEqual(presented");
  assertStringIncludes(tokensEqual.toString(), "timingSafeEqual(a, b)");

  // Node credentials: tokenMatches for a named node, a hash lookup otherwise.
  assertStringIncludes(NodeService.prototype.authenticate.toString(), "tokenMatches(token");
  assertStringIncludes(NodeService.prototype.nodeForToken.toString(), "hashToken(token)");
  assertStringIncludes(NodeService.prototype.nodeForDigest.toString(), "byTokenHash.get(");

  // Gateway API keys: SHA-256 of the presented key looked up in a Map.
  const keys = new ApiKeyTable();
  keys.set([{ id: "key-1", hash: await hashToken("sk-llmgw_abc"), models: null }]);
  assertEquals(await keys.check(bearer("sk-llmgw_abc")), {
    open: false,
    id: "key-1",
    models: null,
  });
  assertEquals(await keys.check(bearer("sk-llmgw_abd")), null);
  // (Which header it reads and which hash it looks up: the behaviour test above.)
  assertStringIncludes(ApiKeyTable.toString(), "#byHash.get(tokenDigest(key))");

  // The operator-set admin, join and gateway tokens in control/api/auth.ts go
  // through digestMatchesAny: every configured hash compared, no early exit.
  const api = Deno.readTextFileSync(join(ROOT, "control/api/auth.ts"));
  assertOk(/digestMatchesAny\(digest, auth\.adminTokenHashes\)/.test(api));
  const tokens = Deno.readTextFileSync(join(ROOT, "http/tokens.ts"));
  assertOk(/for \(const h of hashes\) found = digestMatches\(digest, h\) \|\| found;/.test(tokens));
  // Stored access tokens: found by id, then tokenMatches on the stored hash.
  assertStringIncludes(
    AccessTokenService.prototype.kindOf.toString(),
    "tokenMatches(parts.credential",
  );

  // And no code that checks a presented credential compares it with === or
  // !== (null checks aside). (The agent comparing tokens it holds itself is
  // no oracle: no caller chooses either side.)
  const offenders: string[] = [];
  for (
    const file of [
      "control/api.ts",
      "control/control_plane.ts",
      "http/tokens.ts",
      "control/api/auth.ts",
      "control/access_tokens.ts",
      "agent/local_api.ts",
      "gateway/api_keys.ts",
      "gateway/app.ts",
      "gateway/dispatch.ts",
    ]
  ) {
    Deno.readTextFileSync(join(ROOT, file)).split("\n").forEach((line, i) => {
      const m =
        /\b\w*(token|secret|apikey|api_key)\w*\s*(?:[!=]==|[!=]=)(?!=)\s*(?!\s|null\b|undefined\b|""|'')/i
          .exec(line);
      if (m !== null) offenders.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assertEquals(offenders, []);
});

// ---------------------------------------------------------------------------
// 3. Secrets never reach logs, events or listings
// ---------------------------------------------------------------------------

/** How the waits here poll: a real control plane, agent, engine and gateway start up. */
const POLL = { timeoutMs: 30_000, intervalMs: 100 };

/** Replaces console output with a capture until `restore()`. */
function captureConsole(lines: string[]): { restore(): void } {
  const names = ["log", "error", "warn", "info", "debug"] as const;
  const saved = names.map((n) => console[n]);
  for (const n of names) {
    console[n] = (...args: unknown[]) => {
      lines.push(args.map((a) => typeof a === "string" ? a : Deno.inspect(a)).join(" "));
    };
  }
  return {
    restore() {
      names.forEach((n, i) => (console[n] = saved[i]));
    },
  };
}

Deno.test("secrets never appear in logs, events, listings or error bodies (control plane + agent + gateway)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_sec_cluster_" });
  const ADMIN = newToken("llmgw_admin");
  const JOIN = newToken("llmgw_join");
  const consoleLines: string[] = [];
  const agentLogs: string[] = [];
  const intruderLogs: string[] = [];
  const gatewayLogs: string[] = [];
  const pids = new Set<number>();
  const captured = captureConsole(consoleLines);
  const agents: Agent[] = [];
  let control: Awaited<ReturnType<typeof startControl>> | null = null;
  let follower: { stop(): Promise<void> } | null = null;
  let gateway: { url: string; close(): Promise<void> } | null = null;
  try {
    control = await startControl({
      hostname: "127.0.0.1",
      port: 0,
      store: SqliteStore.open(join(dir, "llmgw.db")),
      adminTokens: [ADMIN],
      joinTokens: [JOIN],
      thresholds: {
        heartbeat_interval_ms: 300,
        unreachable_after_ms: 5_000,
        lost_after_ms: 10_000,
      },
      reconcileMs: 200,
    });
    const url = control.url;
    const configPath = join(ROOT, "dev/machines/l40s_4x/agent.json");
    const config = resolveConfigPaths(
      parseAgentConfig(Deno.readTextFileSync(configPath), configPath),
      configPath,
    );
    const newAgent = (stateDir: string, sink: string[]) =>
      new Agent({
        controlUrl: url,
        joinToken: JOIN,
        nodeId: "sec-node",
        hostname: "sec-node",
        stateDir,
        discovery: { nvidiaSmi: config.nvidia_smi, sysfsRoot: config.sysfs_root },
        mgmtAddr: "127.0.0.1",
        mgmtInterface: "lo",
        ports: portsOf(import.meta.url),
        listen: { hostname: "127.0.0.1", port: 0 },
        proxyListen: { hostname: "127.0.0.1", port: 0 },
        retry: { initialMs: 100, maxMs: 500, factor: 2 },
        supervisor: {
          tickMs: 100,
          env: {
            PATH: `${join(ROOT, "dev/fake_engine/bin")}:${Deno.env.get("PATH")}`,
            FAKE_ENGINE_LOAD_SECONDS: "0.3",
            FAKE_ENGINE_ACCESS_LOG: "1",
          },
        },
        logSink: (line) => sink.push(line),
      });
    const stateDir = join(dir, "agent");
    const agent = newAgent(stateDir, agentLogs);
    agents.push(agent);
    await agent.start();
    const adminCall = async (method: string, path: string, body?: unknown, token = ADMIN) => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: bearer(token), "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    // Register and heartbeat.
    await until("the node ready", async () => {
      const nodes = JSON.parse((await adminCall("GET", "/v1/nodes")).text).nodes;
      return nodes.length === 1 && nodes[0].state === "ready" ? true : null;
    }, POLL);
    const session = readSession(stateDir, url, "sec-node");
    assertOk(session !== null);
    const nodeToken = session.node_token;
    const localToken = Deno.readTextFileSync(localTokenPath(stateDir)).trim();
    // API keys, and a gateway that follows the control plane and checks them.
    const created = await adminCall("POST", "/v1/apikeys", { name: "ci", models: null });
    assertEquals(created.status, 201);
    const apiKey = JSON.parse(created.text).key as string;
    const table = new EndpointTable();
    const keys = new ApiKeyTable();
    const gwLog = (line: string) => gatewayLogs.push(line);
    follower = followControlPlane(url, ADMIN, table, { intervalMs: 100, keys, log: gwLog });
    gateway = startGateway(table, { hostname: "127.0.0.1", port: 0, keys, log: gwLog });
    // Apply, and wait for the replica.
    const applied = await adminCall("POST", "/v1/deployments", {
      name: "sec",
      model: "org/sec",
      replicas: 1,
      profiles: [{ name: "l40s", engine: "vllm", gpu_class: "l40s-45g", tensor_parallel: 1 }],
    });
    assertEquals(applied.status, 201);
    const replica = await until("the replica ready", async () => {
      const rs = JSON.parse((await adminCall("GET", "/v1/replicas")).text).replicas as {
        id: string;
        state: string;
      }[];
      return rs.length === 1 && rs[0].state === "ready" ? rs[0] : null;
    }, POLL);
    for (const s of agent.status().shards) if (s.pid !== null) pids.add(s.pid);
    // Traffic through the gateway with the key (the engine logs the request).
    const gw = gateway.url;
    const chat = () =>
      fetch(`${gw}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: bearer(apiKey), "content-type": "application/json" },
        body: JSON.stringify({ model: "sec", messages: [{ role: "user", content: "hi" }] }),
      });
    await until("the gateway serves the model", async () => {
      const res = await chat();
      await res.body?.cancel();
      return res.status === 200 ? true : null;
    }, POLL);
    // Logs, through the agent's local API with its token.
    const logs = await until("the request in the shard's log", async () => {
      const r = await adminCall("GET", `/v1/replicas/${replica.id}/logs?shard=0&lines=1000`);
      return r.status === 200 && r.text.includes("/v1/chat/completions") ? r.text : null;
    }, POLL);
    // An intruder with the join token claims the node's id: refused, and says so in its log.
    const intruder = newAgent(join(dir, "intruder"), intruderLogs);
    agents.push(intruder);
    await intruder.start();
    await until(
      "the intruder refused",
      () => Promise.resolve(intruderLogs.some((l) => l.includes("node_taken")) ? true : null),
      POLL,
    );
    await intruder.stop({ stopEngines: true });
    const intruderLocal = Deno.readTextFileSync(localTokenPath(join(dir, "intruder"))).trim();

    // Wrong tokens over real HTTP: their error bodies go into the haystack too.
    const refusals: string[] = [];
    // Known tokens of another kind are 403; tokens the control plane does not know, 401.
    for (const [t, want] of [[apiKey, 401], [JOIN, 403], [nodeToken, 403], [localToken, 401]]) {
      const r = await adminCall("GET", "/v1/nodes", undefined, t as string);
      assertEquals(r.status, want);
      refusals.push(r.text);
    }
    const addr = agent.localAddr!;
    for (const t of [ADMIN, JOIN, nodeToken, apiKey]) {
      const r = await fetch(`http://127.0.0.1:${addr.port}/v1/status`, {
        headers: { authorization: bearer(t) },
      });
      assertEquals(r.status, 403, "the agent's local API refuses another kind of token");
      refusals.push(await r.text());
    }
    const wrongKey = await fetch(`${gw}/v1/models`, { headers: { authorization: bearer(ADMIN) } });
    assertEquals(wrongKey.status, 401, "the gateway takes API keys only");
    refusals.push(await wrongKey.text());

    // Everything the system says about itself.
    const events = (await adminCall("GET", "/v1/events?limit=1000")).text;
    assertStringIncludes(events, "apikey_created");
    assertStringIncludes(events, "node_registered");
    const said = [
      events,
      logs,
      ...await Promise.all(
        [
          "/v1/nodes",
          "/v1/nodes/sec-node",
          "/v1/replicas",
          "/v1/deployments",
          "/v1/apikeys",
          "/v1/endpoints",
          "/metrics",
        ].map(async (p) => (await adminCall("GET", p)).text),
      ),
      await (await fetch(`http://127.0.0.1:${addr.port}/v1/status`, {
        headers: { authorization: bearer(localToken) },
      })).text(),
      ...refusals,
      ...agentLogs,
      ...intruderLogs,
      ...consoleLines,
      ...gatewayLogs,
    ];
    assertOk(agentLogs.some((l) => l.includes('"msg":"registered"')));
    assertOk(agentLogs.some((l) => l.includes("desired state applied")));
    // The engine's own key (the second lock) and the agent's proxy credential.
    const shardDir = join(stateDir, "shards", shardDirName(`${replica.id}.1/0`));
    const engineKey = Deno.readTextFileSync(join(shardDir, "engine_key")).trim();
    assertEquals(Deno.statSync(join(shardDir, "engine_key")).mode! & 0o777, 0o600);
    const proxyToken = Deno.readTextFileSync(join(stateDir, "proxy_token")).trim();
    const secrets: [string, string][] = [
      ["admin token", ADMIN],
      ["join token", JOIN],
      ["node credential", nodeToken],
      ["agent local token", localToken],
      ["intruder's local token", intruderLocal],
      ["gateway API key", apiKey],
      ["engine API key", engineKey],
      ["engine proxy credential", proxyToken],
    ];
    const endpointFeed = said.indexOf(said.find((s) => s.includes('"endpoints"'))!);
    for (const [what, secret] of secrets) {
      assertOk(secret.length >= 32, what);
      // The proxy credential is what gateways need to reach the node's engines:
      // the endpoint feed (admin token only) is the one place it is given out.
      const leaks = said.filter((s, i) =>
        s.includes(secret) && !(what === "engine proxy credential" && i === endpointFeed)
      );
      assertEquals(leaks, [], `the ${what} leaked`);
    }
    // Not even redacted: no secret was handed to a logger in the first place
    // (the agent's redaction is only the second line of defence).
    assertEquals(said.filter((s) => s.includes("[redacted]")), []);
  } finally {
    for (const a of agents) {
      for (const s of a.status().shards) if (s.pid !== null) pids.add(s.pid);
      await a.stop({ stopEngines: true }).catch(() => {});
    }
    await follower?.stop();
    await gateway?.close();
    await control?.close().catch(() => {});
    captured.restore();
    for (const pid of pids) {
      try {
        for (const p of groupMembers(pid)) pids.add(p);
        Deno.kill(-pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// 4. Node identity
// ---------------------------------------------------------------------------

Deno.test("a node's identity cannot be taken over: heartbeat, desired state and re-registration need its own credential", async () => {
  const { cp, call, admin, join: joinToken, join2 } = await controlApp();
  const t1 = (await call("POST", "/v1/agent/register", bearer(joinToken), registration("n1")))
    .json.node_token as string;
  const t2 = (await call("POST", "/v1/agent/register", bearer(joinToken), registration("n2")))
    .json.node_token as string;
  const hb = (nodeId: string, token: string) =>
    call("POST", "/v1/agent/heartbeat", bearer(token), {
      node_id: nodeId,
      generation: 0,
      shards: [],
    });
  // Another node's credential: no heartbeat, no desired state in n1's name.
  assertEquals((await hb("n1", t2)).status, 403);
  assertEquals(
    (await call("GET", "/v1/agent/desired?node_id=n1", bearer(t2))).status,
    403,
  );
  // Without a node id, a credential reads its own node's state only.
  assertEquals((await call("GET", "/v1/agent/desired", bearer(t2))).status, 200);

  // Registering n1 again needs n1's credential, whichever join token is used;
  // nothing else stands in for it.
  for (
    const [why, nodeHeader] of [
      ["no credential", null],
      ["n2's credential", t2],
      ["a join token", joinToken],
      ["the admin token", admin],
      ["n1's credential hash", await hashToken(t1)],
      ["a forged credential", newToken("llmgw_node")],
    ] as const
  ) {
    for (const jt of [joinToken, join2]) {
      const r = await call(
        "POST",
        "/v1/agent/register",
        bearer(jt),
        registration("n1", undefined, { hostname: "evil", mgmt_addr: "203.0.113.9" }),
        nodeHeader === null ? {} : { "x-llmgw-node-token": nodeHeader },
      );
      assertEquals([r.status, r.json.error?.code], [403, "node_taken"], why);
    }
  }
  // n1 is untouched: same address, same credential.
  assertEquals(cp.inventory.getNode("n1")!.mgmt_addr, "127.0.0.1");
  assertEquals(cp.inventory.getNode("n1")!.hostname, "n1");
  assertEquals((await hb("n1", t1)).status, 200);

  // A drain survives re-registration (a cordon is covered in control/api_test.ts).
  assertEquals((await call("POST", "/v1/nodes/n1/drain", bearer(admin))).status, 200);
  const again = await call("POST", "/v1/agent/register", bearer(join2), registration("n1"), {
    "x-llmgw-node-token": t1,
  });
  assertEquals(again.status, 200);
  assertOk(["draining", "drained"].includes(cp.inventory.getNode("n1")!.state));
  // Re-registering rotates the credential: the old one no longer works.
  const t1b = again.json.node_token as string;
  assertOk(t1b !== t1);
  // A rotated credential is unknown now: 401, as a revoked token.
  assertEquals((await hb("n1", t1)).status, 401);
  assertEquals((await call("GET", "/v1/agent/desired", bearer(t1))).status, 401);
  assertEquals((await hb("n1", t1b)).status, 200);
  // And the old credential cannot re-register the node either.
  const stale = await call("POST", "/v1/agent/register", bearer(joinToken), registration("n1"), {
    "x-llmgw-node-token": t1,
  });
  assertEquals(stale.status, 403);
  assertOk(["draining", "drained"].includes(cp.inventory.getNode("n1")!.state));
});

// ---------------------------------------------------------------------------
// 5. The gateway only talks to published endpoints
// ---------------------------------------------------------------------------

/** A tiny upstream that counts what it receives. */
function upstream(name: string) {
  const seen: { method: string; url: string; headers: Record<string, string>; bytes: number }[] =
    [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = new Uint8Array(await req.arrayBuffer());
    seen.push({
      method: req.method,
      url: req.url,
      headers: Object.fromEntries(req.headers),
      bytes: body.length,
    });
    return Response.json({
      id: name,
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: name } }],
    });
  });
  return { seen, port: server.addr.port, url: `http://127.0.0.1:${server.addr.port}`, server };
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let at = 0;
  while (at < bytes.length) at += await conn.write(bytes.subarray(at));
}

/** One HTTP/1.1 exchange on a fresh loopback socket, written byte for byte. */
async function raw(port: number, request: string): Promise<{ status: number; text: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await writeAll(conn, encoder.encode(request));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(16 * 1024);
    while (true) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (e) {
        // The server may reset after answering early (a body it refused to read).
        if (chunks.length > 0) break;
        throw e;
      }
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    const text = decoder.decode(
      chunks.reduce((a, b) => {
        const out = new Uint8Array(a.length + b.length);
        out.set(a);
        out.set(b, a.length);
        return out;
      }, new Uint8Array(0)),
    );
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
    return { status: m === null ? 0 : Number(m[1]), text };
  } finally {
    conn.close();
  }
}

function post(
  target: string,
  headers: Record<string, string>,
  body: string,
): string {
  const lines = [`POST ${target} HTTP/1.1`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  lines.push(`content-length: ${encoder.encode(body).length}`, "connection: close", "", body);
  return lines.join("\r\n");
}

Deno.test("the gateway forwards only to published endpoints, whatever the request names; bodies over the limit are 413", async () => {
  const good = upstream("good");
  const victim = upstream("victim");
  const KEY = newToken("sk-llmgw");
  const keys = new ApiKeyTable();
  keys.set([{ id: "key-1", hash: await hashToken(KEY), models: null }]);
  const table = new EndpointTable();
  table.setEndpoints([{ model: "good", replica_id: "good-r0", url: good.url }], ["good"]);
  const LIMIT = 1024;
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0, keys, maxBodyBytes: LIMIT });
  try {
    const port = Number(new URL(gw.url).port);
    const V = `127.0.0.1:${victim.port}`;
    const auth = { host: `127.0.0.1:${port}`, authorization: bearer(KEY) };
    const chat = (model: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], ...extra });
    const attempts: [string, string][] = [
      ["Host names the victim", post("/v1/chat/completions", { ...auth, host: V }, chat("good"))],
      [
        "absolute-form target at the victim",
        post(`http://${V}/v1/chat/completions`, { ...auth, host: V }, chat("good")),
      ],
      [
        "X-Forwarded-Host and friends",
        post("/v1/chat/completions", {
          ...auth,
          "x-forwarded-host": V,
          "x-forwarded-proto": "http",
          "x-forwarded-for": "127.0.0.1",
          forwarded: `host=${V};proto=http`,
          "x-original-url": `http://${V}/v1/chat/completions`,
          "x-rewrite-url": `http://${V}/v1/chat/completions`,
          "x-real-ip": "127.0.0.1",
        }, chat("good")),
      ],
      ["model is the victim's URL", post("/v1/chat/completions", auth, chat(`http://${V}`))],
      ["model is the victim's address", post("/v1/chat/completions", auth, chat(V))],
      ["model is a path to the victim", post("/v1/completions", auth, chat(`//${V}/v1/x`))],
      [
        "body fields name the victim",
        post(
          "/v1/chat/completions",
          auth,
          chat("good", { base_url: `http://${V}`, api_base: `http://${V}`, url: `http://${V}` }),
        ),
      ],
      ["query names the victim", post(`/v1/chat/completions?url=http://${V}`, auth, chat("good"))],
      ["scheme-relative target", post(`//${V}/v1/chat/completions`, auth, chat("good"))],
      ["dot segments", post(`/v1/chat/completions/../../${V}/v1/x`, auth, chat("good"))],
      [
        "CONNECT to the victim",
        `CONNECT ${V} HTTP/1.1\r\nhost: ${V}\r\nauthorization: ${bearer(KEY)}\r\n` +
        "connection: close\r\n\r\n",
      ],
      [
        "GET absolute-form",
        `GET http://${V}/v1/models HTTP/1.1\r\nhost: ${V}\r\nauthorization: ${
          bearer(KEY)
        }\r\nconnection: close\r\n\r\n`,
      ],
    ];
    for (const [why, request] of attempts) {
      const r = await raw(port, request);
      assertOk(r.status >= 200 && r.status < 500, `${why}: ${r.status} ${r.text.slice(0, 200)}`);
      assertOk(!r.text.includes('"victim"'), `${why}: answered by the victim`);
    }
    // The forwarded ones reached the published endpoint, carrying neither the
    // client's key nor its Host.
    assertOk(good.seen.length >= 5, `${good.seen.length} forwarded`);
    for (const s of good.seen) {
      assertEquals(s.headers.host, `127.0.0.1:${good.port}`);
      assertEquals(s.headers.authorization, undefined);
    }

    // Bodies over the limit: refused before anything goes upstream.
    const forwarded = good.seen.length;
    const big = chat("good", { pad: "x".repeat(2 * LIMIT) });
    const withLength = await raw(port, post("/v1/chat/completions", auth, big));
    assertEquals(withLength.status, 413);
    assertStringIncludes(withLength.text, "request_too_large");
    const bytes = encoder.encode(big);
    let chunked = "POST /v1/chat/completions HTTP/1.1\r\n" +
      `host: 127.0.0.1:${port}\r\nauthorization: ${bearer(KEY)}\r\n` +
      "content-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    for (let at = 0; at < bytes.length; at += 256) {
      const part = decoder.decode(bytes.subarray(at, at + 256));
      chunked += `${encoder.encode(part).length.toString(16)}\r\n${part}\r\n`;
    }
    chunked += "0\r\n\r\n";
    const withoutLength = await raw(port, chunked);
    assertEquals(withoutLength.status, 413);
    assertStringIncludes(withoutLength.text, "request_too_large");
    // A fetch streaming a body of unknown length is refused the same way.
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let at = 0; at < bytes.length; at += 300) c.enqueue(bytes.slice(at, at + 300));
        c.close();
      },
    });
    const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: bearer(KEY), "content-type": "application/json" },
      body: stream,
    });
    assertEquals(streamed.status, 413);
    await streamed.body?.cancel();
    assertEquals(good.seen.length, forwarded, "the upstream saw no oversized body");
    // Just under the limit still goes through.
    const fits = chat("good", { pad: "x".repeat(LIMIT - chat("good", { pad: "" }).length) });
    assertEquals(encoder.encode(fits).length, LIMIT);
    assertEquals((await raw(port, post("/v1/chat/completions", auth, fits))).status, 200);
    assertEquals(good.seen.length, forwarded + 1);
    assertEquals(good.seen.at(-1)!.bytes, LIMIT);

    assertEquals(victim.seen, [], "the victim must never be reached");
  } finally {
    await gw.close();
    await good.server.shutdown();
    await victim.server.shutdown();
  }
});

Deno.test("auth matrix: the agent's peer route — a node certificate of the cluster, never a bearer token", async () => {
  // The route sits beside the local API on its listener, outside the Hono app:
  // its rule is the TLS caller's certificate, so every token kind × every caller.
  const peer = new PeerServer({ layout: new CacheLayout("/nonexistent/llmgw-peer-matrix") });
  const tokens: Record<string, string | null> = {
    "none": null,
    "agent local": bearer(newToken("llmgw_local")),
    "admin": bearer(newToken("llmgw_admin")),
    "node credential": bearer(newToken("llmgw_node")),
    "gateway API key": bearer(newToken("sk-llmgw")),
  };
  const callers = {
    "plain HTTP": null,
    "no client certificate": { peerVerified: false, peerCommonName: null },
    "the control plane's certificate": { peerVerified: true, peerCommonName: "llmgw-control" },
    "a node certificate": { peerVerified: true, peerCommonName: "node:n2" },
  };
  const failures: string[] = [];
  for (const [who, caller] of Object.entries(callers)) {
    for (const [kind, header] of Object.entries(tokens)) {
      const res = await peer.handle(
        new Request(`https://n1:7400/peer/v1/blobs/acme/m/${"ab".repeat(32)}?size=10`, {
          headers: { range: "bytes=0-9", ...(header === null ? {} : { authorization: header }) },
        }),
        caller,
      );
      await res.body?.cancel();
      // Through the door, a blob this agent does not hold is 404 not_held; no token changes that.
      const want = who === "a node certificate" ? 404 : 403;
      if (res.status !== want) failures.push(`${who} with ${kind}: ${res.status}`);
    }
  }
  assertEquals(failures, []);
});
