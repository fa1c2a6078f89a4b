/**
 * Property tests (issue #8, "Bad input"): every HTTP endpoint of the control
 * plane (admin API and agent protocol), the agent's local API and the
 * gateway, fed random and malformed requests in-process (`app.fetch`, no
 * sockets): random bytes, truncated JSON, wrong types, huge strings, deep
 * nesting, prototype-pollution keys, valid bodies with one field broken,
 * random methods, odd headers and authorization, random query strings and
 * path segments on the known route prefixes, mostly with the right token (so
 * validation, not auth, is what is exercised) and sometimes without.
 *
 * Properties:
 * - no handler throws, and no malformed request gets a 5xx (the only 5xx
 *   allowed are the documented ones that depend on something other than the
 *   input: a gateway model with no ready replica or an unreachable one, and a
 *   control plane asked for logs from an agent it cannot reach);
 * - every 4xx body is JSON with an error message, in the API's own shape;
 * - a refused (4xx) request changes nothing: the state read through the admin
 *   API and straight from the store (control plane), the view (agent) and the
 *   endpoint table's counters and marks (gateway) are the same after it.
 *
 * `LLMGW_FUZZ_RUNS=20000 deno test -A tests/http_fuzz_test.ts` hunts longer.
 */
import { emptyAgentMetrics } from "../agent/metrics.ts";
import fc from "fast-check";
import { assertEquals, assertOk } from "./assert.ts";
import { registration } from "./registration.ts";
import { createControlApi } from "../control/api.ts";
import { ControlPlane } from "../control/control_plane.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { hashToken } from "../http/tokens.ts";
import { localApi, type LocalApiView } from "../agent/local_api.ts";
import type { ShardReport } from "../supervisor/types.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { createGateway } from "../gateway/app.ts";
import { ApiKeyTable } from "../gateway/api_keys.ts";

// ---------------------------------------------------------------------------
// Generators shared by all three servers.

/** A fuzzed request, before it becomes a `Request`. */
interface Fuzzed {
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: string | Uint8Array | undefined;
}

const HUGE = "x".repeat(100_000);
const PROTO_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "__defineGetter__",
];

/** Raw bodies no generator would likely hit by chance. */
const RAW_BODIES: string[] = [
  "",
  " ",
  "null",
  "0",
  "-1",
  "true",
  '"a string"',
  "[]",
  "[{}]",
  "{}",
  "{",
  "}",
  '{"a":1,}',
  '{"a":1} trailing',
  "\ufeff{}",
  '{"a":1,"a":2}',
  '{"replicas": 1e400, "generation": -1e400}',
  '{"name": "\\ud800", "model": "\\udfff"}',
  '{"model": "\\u0000"}',
  "[".repeat(100_000) + "]".repeat(100_000),
  '{"a":'.repeat(50_000) + "1" + "}".repeat(50_000),
  "[".repeat(100_000),
  '{"__proto__": {"polluted": true, "admin": true}}',
  '{"constructor": {"prototype": {"polluted": true}}}',
  '{"__proto__": null, "labels": {"__proto__": "x"}}',
  '{"labels": {"constructor": {"prototype": {"polluted": true}}}}',
  '{"fabric_overrides": {"__proto__": {"polluted": "x"}}}',
  '{"model": {"__proto__": "llama"}, "__proto__": {"model": "llama"}}',
  `{"name": "${HUGE}"}`,
  `{"model": "${HUGE}"}`,
];

const latin1Char = fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) =>
  String.fromCharCode(c)
);
/** A valid header value (a ByteString without CR, LF or NUL), often odd. */
const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: latin1Char, maxLength: 60 }),
  fc.constantFrom("", " ", "\t", "ÿÿÿ", "a".repeat(8_000), "null", "undefined", "0", "-1"),
);

const hostileScalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    1e308,
    -1e308,
    Number.MAX_SAFE_INTEGER + 2,
    "",
    " ",
    "null",
    "0",
    "-1",
    "1e309",
    "NaN",
    HUGE,
    "\u0000",
    "\ud800",
    "../../etc/passwd",
    "a".repeat(300),
    "n1",
    "llama",
    "qwen",
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.integer(),
  fc.double(),
);
const hostileKey = fc.oneof(fc.constantFrom(...PROTO_KEYS), fc.string({ maxLength: 12 }));
/** Any JSON-ish value, often hostile. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileScalar },
  { weight: 1, arbitrary: fc.array(hostileScalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(hostileKey, hostileScalar, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], {}, [[]], [null], { a: {} }) },
);

/** Sets an own property, even `__proto__` (an assignment would change the prototype). */
function defineOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** Every path into `value` (objects and arrays), down to `depth`. */
function pathsOf(
  value: unknown,
  depth = 4,
  prefix: (string | number)[] = [],
): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (depth === 0 || typeof value !== "object" || value === null) return out;
  for (const [k, v] of Object.entries(value)) {
    out.push(...pathsOf(v, depth - 1, [...prefix, Array.isArray(value) ? Number(k) : k]));
  }
  return out;
}

type Mutation = {
  at: number;
  op: "set" | "delete" | "extra" | "duplicate" | "wrap";
  value: unknown;
  key: string;
};

/** `base` with one thing broken: a field replaced, removed, added, duplicated or wrapped. */
function mutate(base: unknown, m: Mutation): unknown {
  const doc = JSON.parse(JSON.stringify(base)) as unknown;
  const paths = pathsOf(doc);
  const path = paths[m.at % paths.length];
  if (path.length === 0) {
    if (m.op === "wrap") return [doc];
    if (m.op === "extra" && typeof doc === "object" && doc !== null) {
      defineOwn(doc as Record<string, unknown>, m.key, m.value);
      return doc;
    }
    return m.op === "set" ? m.value : doc;
  }
  let parent = doc as Record<string | number, unknown>;
  for (const p of path.slice(0, -1)) parent = parent[p] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  const here = parent[last];
  switch (m.op) {
    case "set":
      parent[last] = m.value;
      break;
    case "delete":
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
      break;
    case "extra":
      if (typeof here === "object" && here !== null && !Array.isArray(here)) {
        defineOwn(here as Record<string, unknown>, m.key, m.value);
      } else parent[last] = m.value;
      break;
    case "duplicate":
      if (Array.isArray(parent)) parent.push(structuredClone(here));
      else if (Array.isArray(here)) here.push(structuredClone(here[0] ?? m.value));
      else parent[last] = [here, here];
      break;
    case "wrap":
      parent[last] = [here];
      break;
  }
  return doc;
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  op: fc.constantFrom("set", "delete", "extra", "duplicate", "wrap"),
  value: hostileValue,
  key: hostileKey,
});

/** A body for a route whose well-formed body looks like `base` (or has none). */
function bodyArb(base: unknown): fc.Arbitrary<string | Uint8Array | undefined> {
  const valid = base ?? {};
  const text = JSON.stringify(valid);
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
    { weight: 2, arbitrary: hostileValue.map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.nat({ max: text.length }).map((n) => text.slice(0, n)) },
    { weight: 6, arbitrary: mutationArb.map((m) => JSON.stringify(mutate(valid, m))) },
    { weight: 2, arbitrary: fc.constantFrom(...RAW_BODIES) },
    { weight: 1, arbitrary: fc.constant(text) },
  );
}

const SEGMENTS = [
  "",
  ".",
  "..",
  "%2e%2e",
  "%2F",
  "%",
  "%zz",
  "%E0%A4%A",
  "%00",
  "%C0%AF",
  "a%20b",
  "a".repeat(300),
  "NODE",
  "-bad",
  "ü",
  "🙂",
  "key-0000000",
  "key-ffffffff",
  ...PROTO_KEYS,
];
const segmentArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...SEGMENTS),
  fc.string({ maxLength: 30 }).map(encodeURIComponent),
  fc.string({ maxLength: 30 }),
);

const QUERY_KEYS = [
  "node_id",
  "generation",
  "wait_ms",
  "after",
  "subject",
  "limit",
  "shard",
  "lines",
  "model",
  "x",
  "__proto__",
  "constructor",
];
const queryValueArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "",
    "0",
    "1",
    "-1",
    "1.5",
    "1e3",
    "1e400",
    "NaN",
    "Infinity",
    "0x10",
    "%201",
    "99999999999999999999",
    "true",
    "null",
    "[]",
    "%",
    "%zz",
    "%E0%A4%A",
    "%00",
    "a".repeat(300),
    "n1",
    "qwen-r0",
  ),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
  fc.string({ maxLength: 20 }).filter((s) => !s.includes("#")),
);
const queryArb: fc.Arbitrary<string> = fc.array(
  fc.tuple(fc.constantFrom(...QUERY_KEYS), queryValueArb, fc.boolean()),
  { maxLength: 4 },
).map((pairs) =>
  pairs.length === 0
    ? ""
    : "?" + pairs.map(([k, v, bare]) => bare && v === "" ? k : `${k}=${v}`).join("&")
);

const METHODS = [
  "GET",
  "POST",
  "PUT",
  "DELETE",
  "PATCH",
  "OPTIONS",
  "HEAD",
  "FOO",
  "post",
  "M-SEARCH",
];

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=zzz",
  "",
  ";;;",
  "application/json\t",
];

const EXTRA_HEADER_NAMES = [
  "x-llmgw-node-token",
  "x-forwarded-for",
  "x-forwarded-host",
  "host",
  "accept",
  "accept-encoding",
  "cookie",
  "content-length",
  "transfer-encoding",
  "connection",
  "te",
  "upgrade",
  "expect",
  "x-request-id",
];

/** Headers: a content type, an authorization made from the route's right token, odd others. */
function headersArb(
  rightAuth: string | null,
  otherTokens: readonly string[],
): fc.Arbitrary<[string, string][]> {
  const right = rightAuth === null ? [] : [rightAuth];
  const auth: fc.Arbitrary<string | undefined> = fc.oneof(
    { weight: right.length === 0 ? 0 : 12, arbitrary: fc.constant(rightAuth ?? undefined) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "",
        "Bearer",
        "Bearer ",
        "Basic YTpi",
        `Bearer ${"A".repeat(16_384)}`,
        "Bearer a b",
        ...right.map((r) => r.replace("Bearer ", "bearer ")),
        ...right.map((r) => `${r} extra`),
        ...right.map((r) => `${r}x`),
        ...right.map((r) => r.replace("Bearer ", "")),
        ...otherTokens.map((t) => `Bearer ${t}`),
      ),
    },
    { weight: 1, arbitrary: headerValue.map((v) => `Bearer ${v}`) },
    { weight: 1, arbitrary: headerValue },
  );
  return fc.tuple(
    fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined }),
    fc.option(headerValue, { nil: undefined }),
    auth,
    fc.array(
      fc.tuple(
        fc.oneof(fc.constantFrom(...EXTRA_HEADER_NAMES), fc.stringMatching(/^x-[a-z0-9-]{1,20}$/)),
        fc.oneof(headerValue, fc.constantFrom("-1", "abc", "99999999999", "1e3", "chunked")),
      ),
      { maxLength: 3 },
    ),
  ).map(([ct, oddCt, a, extra]) => {
    const h: [string, string][] = [];
    if (ct !== undefined) h.push(["content-type", oddCt !== undefined && ct === "" ? oddCt : ct]);
    if (a !== undefined) h.push(["authorization", a]);
    return [...h, ...extra];
  });
}

/** One route: method, path template (`:name` placeholders), right token, a well-formed body. */
interface Route {
  method: string;
  path: string;
  auth: string | null;
  body?: unknown;
  /** Bodies for this route, instead of {@link bodyArb} of `body`. */
  bodies?: fc.Arbitrary<string | Uint8Array | undefined>;
}

/**
 * Requests on `routes`: mostly the route's method and right token, its
 * placeholders filled with a valid value or a random segment, sometimes
 * extra segments, a query string, a body (valid, broken or garbage).
 */
function requestArb(
  routes: readonly Route[],
  values: Record<string, string>,
  otherTokens: readonly string[],
): fc.Arbitrary<Fuzzed> {
  // One arbitrary per route, built once (a `chain` would rebuild them for every request).
  return fc.oneof(...routes.map((route) =>
    fc.record({
      method: fc.oneof(
        { weight: 5, arbitrary: fc.constant(route.method) },
        { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
      ),
      fills: fc.array(
        fc.oneof({ weight: 2, arbitrary: fc.constant<string | null>(null) }, {
          weight: 1,
          arbitrary: segmentArb,
        }),
        { minLength: 4, maxLength: 4 },
      ),
      extra: fc.oneof(
        { weight: 5, arbitrary: fc.constant<string[]>([]) },
        { weight: 1, arbitrary: fc.array(segmentArb, { minLength: 1, maxLength: 2 }) },
      ),
      query: fc.oneof({ weight: 1, arbitrary: fc.constant("") }, {
        weight: 2,
        arbitrary: queryArb,
      }),
      headers: headersArb(route.auth, otherTokens),
      body: route.bodies ?? bodyArb(route.body),
    }).map(({ method, fills, extra, query, headers, body }): Fuzzed => {
      let i = 0;
      const path = route.path.replace(/:([a-z]+)/g, (_, name: string) => {
        const fill = fills[i++ % fills.length];
        return fill ?? values[name];
      }) + extra.map((s) => `/${s}`).join("");
      return { method, path, query, headers, body };
    })
  ));
}

function toRequest(f: Fuzzed, signal?: AbortSignal): Request {
  const headers = new Headers();
  for (const [k, v] of f.headers) headers.append(k, v);
  const bodyless = f.method.toUpperCase() === "GET" || f.method.toUpperCase() === "HEAD";
  return new Request(`http://localhost${f.path}${f.query}`, {
    method: f.method,
    headers,
    body: bodyless ? undefined : f.body as BodyInit | undefined,
    signal,
  });
}

/** For failure messages: the request, with long parts cut. */
function describe(f: Fuzzed): string {
  const cut = (s: string) => s.length > 200 ? `${s.slice(0, 200)}…(${s.length})` : s;
  const body = f.body === undefined
    ? "(none)"
    : typeof f.body === "string"
    ? cut(f.body)
    : `${f.body.length} bytes`;
  return `${f.method} ${cut(f.path + f.query)} headers=${
    cut(JSON.stringify(f.headers))
  } body=${body}`;
}

/**
 * Sends `f` to `handler`; a rejected promise fails the property (a handler
 * must never throw). With `letGoAfterMs`, the client goes away after that
 * long: a long poll of /v1/agent/desired that matched is let go early.
 */
async function send(
  handler: (r: Request) => Response | Promise<Response>,
  f: Fuzzed,
  letGoAfterMs?: number,
): Promise<{ status: number; text: string; res: Response }> {
  const abort = new AbortController();
  const timer = letGoAfterMs === undefined
    ? undefined
    : setTimeout(() => abort.abort(), letGoAfterMs);
  try {
    let res: Response;
    try {
      res = await handler(toRequest(f, abort.signal));
    } catch (e) {
      throw new Error(`the handler threw ${e} for ${describe(f)}`);
    }
    return { status: res.status, text: await res.text(), res };
  } finally {
    clearTimeout(timer);
  }
}

function parseJson(text: string, f: Fuzzed): Record<string, unknown> {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`a 4xx body is not JSON: ${text.slice(0, 200)} for ${describe(f)}`);
  }
}

/** Runs of a property: `n`, or `LLMGW_FUZZ_RUNS` for a longer hunt. */
function runs(n: number): number {
  try {
    const v = Number(Deno.env.get("LLMGW_FUZZ_RUNS"));
    return v > 0 ? v : n;
  } catch {
    return n;
  }
}

/** The process-wide prototypes are as they were (no request polluted them). */
function assertUnpolluted(): void {
  const probe = {} as Record<string, unknown>;
  assertEquals(probe.polluted, undefined, "Object.prototype was polluted");
  assertEquals(probe.admin, undefined, "Object.prototype was polluted");
  assertEquals(Object.keys(Object.prototype), []);
}

// ---------------------------------------------------------------------------
// The control plane.

const ADMIN = "fuzz-admin-token";
const JOIN = "fuzz-join-token";

/** A registration with a label and an engine version, for selectors and plugins to see. */
const fuzzRegistration = (nodeId: string) =>
  registration(nodeId, undefined, { labels: { zone: "a" }, engine_versions: { vllm: "0.8.0" } });

const DEPLOYMENT = {
  name: "qwen",
  model: "Qwen/Qwen2.5-7B-Instruct",
  replicas: 1,
  profiles: [{
    name: "tp2",
    engine: "vllm",
    gpu_class: "rtx4090-24g",
    tensor_parallel: 2,
    engine_args: ["--max-model-len", "4096"],
    env: { A: "b" },
    node_selector: { zone: "a" },
  }],
};

function shardReport(id: string, port: number) {
  return {
    id,
    state: "ready",
    since: 1,
    pid: 1,
    port,
    serves_http: true,
    progress: { percent: 100, done: 1, total: 1 },
    restarts: 0,
    adopted: false,
    last_failure: { at: 1, reason: "x", exit_code: 1, signal: null, log_tail: ["a"] },
    spec_hash: "x",
  };
}

/**
 * A control plane with one ready node `n1`, one deployment `qwen` whose
 * replica is ready, and one API key; the reconciler is not started (no timers).
 */
async function controlWorld() {
  const store = new MemoryStore();
  const cp = await ControlPlane.open({
    store,
    reconcileMs: 60_000,
    // No node changes state with the clock while a property runs.
    thresholds: { unreachable_after_ms: 3_600_000, lost_after_ms: 7_200_000 },
  });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [await hashToken(JOIN)],
  });
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await res.json();
    assertOk(res.status < 300, `${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const { node_token: nodeToken } = await call(
    "POST",
    "/v1/agent/register",
    JOIN,
    fuzzRegistration("n1"),
  );
  await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT);
  await cp.reconcile();
  const desired = await call("GET", "/v1/agent/desired?node_id=n1", nodeToken);
  const heartbeat = {
    node_id: "n1",
    generation: desired.generation,
    // The ports an agent would have allocated: a block of 10 per shard.
    shards: desired.shards.map((s: { id: string }, i: number) =>
      shardReport(s.id, 20_000 + 10 * i)
    ),
  };
  await call("POST", "/v1/agent/heartbeat", nodeToken, heartbeat);
  const { id: keyId } = await call("POST", "/v1/apikeys", ADMIN, { name: "k", models: ["qwen"] });
  assertEquals(cp.readyEndpoints().length, 1);
  return { store, cp, app, nodeToken: nodeToken as string, keyId: keyId as string, heartbeat };
}
type ControlWorld = Awaited<ReturnType<typeof controlWorld>>;

/** Everything observable: through the admin API and straight from the store. */
async function controlSnapshot(w: ControlWorld): Promise<string> {
  const get = async (path: string, token = ADMIN) => {
    const res = await w.app.request(path, { headers: { authorization: `Bearer ${token}` } });
    return [res.status, await res.json()];
  };
  const api = [];
  for (
    const path of [
      "/v1/nodes",
      "/v1/deployments",
      "/v1/replicas",
      "/v1/events?limit=1000",
      "/v1/apikeys",
      "/v1/endpoints",
    ]
  ) api.push(await get(path));
  api.push(await get("/v1/agent/desired?node_id=n1", w.nodeToken));
  const store = [
    await w.store.listNodes(),
    await w.store.listDeployments(),
    await w.store.listReplicas(),
    await w.store.listApiKeys(),
    await w.store.listEvents({ limit: 10_000 }),
  ];
  return JSON.stringify({ api, store });
}

function controlRoutes(nodeToken: string, heartbeat: unknown): Route[] {
  const admin = `Bearer ${ADMIN}`;
  const node = `Bearer ${nodeToken}`;
  return [
    { method: "GET", path: "/healthz", auth: null },
    {
      method: "POST",
      path: "/v1/agent/register",
      auth: `Bearer ${JOIN}`,
      body: fuzzRegistration("n2"),
    },
    { method: "POST", path: "/v1/agent/heartbeat", auth: node, body: heartbeat },
    { method: "GET", path: "/v1/agent/desired", auth: node },
    { method: "GET", path: "/v1/nodes", auth: admin },
    { method: "GET", path: "/v1/nodes/:node", auth: admin },
    { method: "POST", path: "/v1/nodes/:node/cordon", auth: admin },
    { method: "POST", path: "/v1/nodes/:node/drain", auth: admin },
    { method: "POST", path: "/v1/nodes/:node/uncordon", auth: admin },
    {
      method: "POST",
      path: "/v1/nodes/:node/labels",
      auth: admin,
      body: { labels: { zone: "b" } },
    },
    {
      method: "PUT",
      path: "/v1/nodes/:node/fabrics",
      auth: admin,
      body: { fabric_overrides: { "ib-a": "ib-b" } },
    },
    { method: "GET", path: "/v1/deployments", auth: admin },
    { method: "POST", path: "/v1/deployments", auth: admin, body: DEPLOYMENT },
    { method: "DELETE", path: "/v1/deployments/:name", auth: admin },
    { method: "POST", path: "/v1/deployments/:name/scale", auth: admin, body: { replicas: 2 } },
    { method: "GET", path: "/v1/replicas", auth: admin },
    { method: "GET", path: "/v1/replicas/:replica/logs", auth: admin },
    { method: "GET", path: "/v1/events", auth: admin },
    { method: "GET", path: "/v1/endpoints", auth: admin },
    { method: "GET", path: "/v1/apikeys", auth: admin },
    { method: "POST", path: "/v1/apikeys", auth: admin, body: { name: "k2", models: ["qwen"] } },
    { method: "DELETE", path: "/v1/apikeys/:key", auth: admin },
    { method: "POST", path: "/v1/plan", auth: admin, body: { ...DEPLOYMENT, name: "other" } },
    { method: "GET", path: "/metrics", auth: admin },
    { method: "GET", path: "/openapi.json", auth: admin },
  ];
}

/** Checks one answer of the control plane; true when it was refused (4xx). */
function checkControlAnswer(f: Fuzzed, status: number, text: string): boolean {
  const what = `${status} ${text.slice(0, 300)} for ${describe(f)}`;
  if (status >= 500) {
    // The only 5xx: logs of a replica whose node's agent serves no local API.
    const code = f.method.toUpperCase() === "HEAD"
      ? "agent_"
      : (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "";
    assertOk(
      status === 502 && /\/v1\/replicas\/[^/]+\/logs$/.test(f.path) && code.startsWith("agent_"),
      `5xx: ${what}`,
    );
    return false;
  }
  if (status < 400) return false;
  if (f.method.toUpperCase() === "HEAD") return true;
  const body = parseJson(text, f) as {
    error?: { code?: unknown; message?: unknown; path?: unknown };
  };
  assertOk(typeof body.error?.code === "string" && body.error.code !== "", `no code: ${what}`);
  assertOk(
    typeof body.error.message === "string" && body.error.message !== "",
    `no message: ${what}`,
  );
  assertOk(body.error.path === null || typeof body.error.path === "string", `bad path: ${what}`);
  return true;
}

/** Placeholders for what differs between rebuilt worlds (the node credential, the key id). */
const NODE_TOKEN = "@node-token@";
const KEY_ID = "@key-id@";

function substitute(f: Fuzzed, w: ControlWorld): Fuzzed {
  const sub = (s: string) => s.replaceAll(NODE_TOKEN, w.nodeToken).replaceAll(KEY_ID, w.keyId);
  return { ...f, path: sub(f.path), headers: f.headers.map(([k, v]) => [k, sub(v)]) };
}

Deno.test("control plane: fuzzed requests on every route get no 5xx, JSON 4xx, and refusals change nothing", async () => {
  let world = await controlWorld();
  try {
    const arb = requestArb(
      controlRoutes(NODE_TOKEN, world.heartbeat),
      { node: "n1", name: "qwen", replica: "qwen-r0", key: KEY_ID },
      [ADMIN, JOIN, NODE_TOKEN],
    );
    let refused = 0;
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(arb, async (fuzzed) => {
        const w = world;
        const f = substitute(fuzzed, w);
        const before = await controlSnapshot(w);
        const { status, text } = await send((r) => w.app.fetch(r), f, 50);
        if (checkControlAnswer(f, status, text)) {
          refused++;
          assertEquals(await controlSnapshot(w), before, `state changed by ${describe(f)}`);
        } else if (status < 400) {
          accepted++;
          if (!["GET", "HEAD"].includes(f.method.toUpperCase())) {
            // What was accepted does not poison the control plane: a reconcile
            // pass and every read still work.
            await w.cp.reconcile();
            assertOk(JSON.parse(await controlSnapshot(w)).api.every(([s]: [number]) => s === 200));
            // The next request starts from the same world again.
            w.cp.stop();
            world = await controlWorld();
          }
        }
        assertUnpolluted();
      }),
      { numRuns: runs(1000) },
    );
    // Most fuzzed requests are refused; some are well-formed (a valid body, an existing id).
    assertOk(refused > 200, `only ${refused} refused`);
    assertOk(accepted > 0, "no request was accepted");
  } finally {
    world.cp.stop();
  }
});

// ---------------------------------------------------------------------------
// The agent's local API.

const LOCAL_TOKEN = "fuzz-local-token-0123456789";

function localView(): LocalApiView {
  const shard: ShardReport = {
    id: "r1/s0",
    engine: "vllm",
    state: "ready",
    since: 1,
    pid: 123,
    port: 8000,
    rendezvous_port: null,
    notice: null,
    serves_http: true,
    progress: null,
    restarts: 0,
    adopted: false,
    last_failure: null,
    spec_hash: "abc",
  };
  const tail = Array.from({ length: 300 }, (_, i) => `line ${i}`);
  return {
    status: () => ({
      node_id: "n1",
      generation: 4,
      registered: true,
      last_heartbeat_at: null,
      control_plane_failures: 0,
      shards: [shard],
    }),
    shard: (id) => id === shard.id ? { status: shard, log_tail: tail } : null,
    metrics: () => emptyAgentMetrics(),
    metricsTokenHashes: () => [],
  };
}

Deno.test("agent local API: fuzzed requests get no 5xx, JSON 4xx, and change nothing", async () => {
  const view = localView();
  const app = localApi(view, LOCAL_TOKEN);
  const snapshot = () => JSON.stringify([view.status(), view.shard("r1/s0")]);
  const initial = snapshot();
  const auth = `Bearer ${LOCAL_TOKEN}`;
  const arb = requestArb(
    [
      { method: "GET", path: "/healthz", auth: null },
      { method: "GET", path: "/v1/status", auth },
      { method: "GET", path: "/v1/shards/:shard/logs", auth },
    ],
    { shard: encodeURIComponent("r1/s0") },
    [ADMIN, LOCAL_TOKEN.slice(1)],
  );
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(arb, async (f) => {
      const { status, text, res } = await send((r) => app.fetch(r), f);
      const what = `${status} ${text.slice(0, 300)} for ${describe(f)}`;
      assertOk(status < 500, `5xx: ${what}`);
      if (status >= 400) {
        refused++;
        if (status === 401) assertOk(res.headers.get("www-authenticate")?.startsWith("Bearer"));
        if (f.method.toUpperCase() !== "HEAD") {
          const body = parseJson(text, f) as { error?: { code?: unknown; message?: unknown } };
          assertOk(typeof body.error?.code === "string" && body.error.code !== "", what);
          assertOk(typeof body.error.message === "string" && body.error.message !== "", what);
        }
      } else if (status === 200 && /\/logs$/.test(f.path) && f.method.toUpperCase() !== "HEAD") {
        const lines = (JSON.parse(text) as { lines: string[] }).lines;
        assertOk(lines.length >= 1 && lines.length <= 300, what);
      }
      assertEquals(snapshot(), initial, `the view changed after ${describe(f)}`);
      assertUnpolluted();
    }),
    { numRuns: runs(1500) },
  );
  assertOk(refused > 100, `only ${refused} refused`);
});

// ---------------------------------------------------------------------------
// The gateway.

const API_KEY = "sk-llmgw_fuzz-key";
/** Known models: `llama` and `qwen` have no ready endpoint, `dead`'s is unreachable. */
const KNOWN_MODELS = ["llama", "qwen", "dead"];
/** Port 1 on loopback: nothing listens there, and nothing unprivileged can. */
const DEAD_URL = "http://127.0.0.1:1";

type GatewayKind = "open" | "keys" | "unsynced";

async function gatewayWorld(kind: GatewayKind) {
  const table = new EndpointTable({ random: () => 0.5 });
  if (kind !== "unsynced") {
    table.setEndpoints([{ model: "dead", replica_id: "dead-r0", url: DEAD_URL }], KNOWN_MODELS);
  }
  const keys = new ApiKeyTable();
  if (kind === "keys") {
    keys.set([{ id: "k1", hash: await hashToken(API_KEY), models: ["llama", "dead"] }]);
  }
  const gateway = createGateway(table, { keys, maxBodyBytes: 64 * 1024, maxRetries: 1 });
  const snapshot = () =>
    JSON.stringify({
      endpoints: table.all().map((e) => [e.key, e.outstanding, e.dispatched, e.suspectSince]),
      ready: table.readyModels(),
      known: [...KNOWN_MODELS, "nope"].map((m) => table.isKnown(m)),
      loaded: table.loaded,
      keys: keys.enabled,
    });
  return { table, gateway, snapshot };
}

const MODEL_NAMES = [...KNOWN_MODELS, "nope", "", "LLAMA", " llama", ...PROTO_KEYS];

/** A gateway body: a well-formed one for `base` with its model swapped, and maybe one thing broken. */
function gatewayBodies(
  base: Record<string, unknown>,
): fc.Arbitrary<string | Uint8Array | undefined> {
  return fc.oneof(
    { weight: 2, arbitrary: bodyArb(base) },
    {
      weight: 3,
      arbitrary: fc.tuple(
        fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom<unknown>(...KNOWN_MODELS) },
          { weight: 2, arbitrary: fc.constantFrom<unknown>(...MODEL_NAMES) },
          { weight: 1, arbitrary: hostileValue },
        ),
        fc.option(mutationArb, { nil: undefined }),
      ).map(([model, m]) => {
        const doc = { ...base, model };
        return JSON.stringify(m === undefined ? doc : mutate(doc, m));
      }),
    },
  );
}

function gatewayRoutes(auth: string | null): Route[] {
  const chat = {
    model: "llama",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
    max_tokens: 8,
  };
  return [
    { method: "GET", path: "/v1/models", auth },
    { method: "POST", path: "/v1/chat/completions", auth, bodies: gatewayBodies(chat) },
    {
      method: "POST",
      path: "/v1/completions",
      auth,
      bodies: gatewayBodies({ model: "llama", prompt: "hi", max_tokens: 8 }),
    },
    {
      method: "POST",
      path: "/v1/embeddings",
      auth,
      bodies: gatewayBodies({ model: "llama", input: ["hi", "there"] }),
    },
    {
      method: "POST",
      path: "/v1/responses",
      auth,
      bodies: gatewayBodies({ model: "llama", input: "hi" }),
    },
    { method: "GET", path: "/v1/models/llama", auth },
    { method: "GET", path: "/metrics", auth: null },
  ];
}

/** Deno.serve's connection info: none (in-process), a loopback client or a remote one. */
const remoteArb: fc.Arbitrary<string | null> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.constantFrom("127.0.0.1", "::1", "127.8.9.10") },
  { weight: 1, arbitrary: fc.constantFrom("203.0.113.7", "10.0.0.1", "::ffff:10.0.0.1") },
);

function serveInfo(remote: string | null): Deno.ServeHandlerInfo | undefined {
  if (remote === null) return undefined;
  return {
    remoteAddr: { transport: "tcp", hostname: remote, port: 40_000 },
    completed: Promise.resolve(),
  } as Deno.ServeHandlerInfo;
}

function requestedModel(f: Fuzzed): unknown {
  if (typeof f.body !== "string") return undefined;
  try {
    const body = JSON.parse(f.body);
    return typeof body === "object" && body !== null && !Array.isArray(body)
      ? body.model
      : undefined;
  } catch {
    return undefined;
  }
}

Deno.test("gateway: fuzzed requests get no 500, OpenAI-shaped 4xx, and refusals change nothing", async () => {
  const worlds = {
    open: await gatewayWorld("open"),
    keys: await gatewayWorld("keys"),
    unsynced: await gatewayWorld("unsynced"),
  };
  try {
    const arb = fc.tuple(
      fc.constantFrom<GatewayKind>("open", "keys", "unsynced"),
      remoteArb,
      fc.oneof(
        requestArb(gatewayRoutes(`Bearer ${API_KEY}`), {}, [ADMIN, "sk-llmgw_other"]),
        requestArb(gatewayRoutes(null), {}, [API_KEY]),
      ),
    );
    let refused = 0;
    let upstream = 0;
    await fc.assert(
      fc.asyncProperty(arb, async ([kind, remote, f]) => {
        const w = worlds[kind];
        const before = w.snapshot();
        const { status, text, res } = await send((r) => w.gateway.fetch(r, serveInfo(remote)), f);
        const what = `${status} ${text.slice(0, 300)} for ${kind} gateway, ${remote}: ${
          describe(f)
        }`;
        assertOk(status !== 500, `500: ${what}`);
        if (status >= 400 && f.method.toUpperCase() !== "HEAD") {
          const body = parseJson(text, f) as {
            error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown };
          };
          const e = body.error;
          assertOk(typeof e?.message === "string" && e.message !== "", `no message: ${what}`);
          assertOk(typeof e.type === "string" && e.type !== "", `no type: ${what}`);
          assertOk(e.param === null || typeof e.param === "string", `bad param: ${what}`);
          assertOk(e.code === null || typeof e.code === "string", `bad code: ${what}`);
        }
        if (status >= 500) {
          // Only a well-formed request for a known model, which the gateway cannot serve now.
          const model = requestedModel(f);
          assertOk(
            typeof model === "string" && (kind === "unsynced" || KNOWN_MODELS.includes(model)),
            `5xx for a request naming no known model: ${what}`,
          );
          if (status === 503) assertOk(res.headers.get("retry-after") !== null, what);
          else assertOk(status === 502 && model === "dead", `unexpected 5xx: ${what}`);
          upstream++;
        } else if (status >= 400) {
          refused++;
          assertEquals(w.snapshot(), before, `state changed by ${describe(f)}`);
        }
        // Nothing stays counted once the answer is read.
        assertOk(w.table.all().every((e) => e.outstanding === 0), `left outstanding: ${what}`);
        assertUnpolluted();
      }),
      { numRuns: runs(1500) },
    );
    assertOk(refused > 100, `only ${refused} refused`);
    assertOk(upstream > 0, "no request reached the model routing");
    // Metrics label by deployed names only: made-up model names do not multiply the series.
    for (const w of Object.values(worlds)) {
      const text = await (await w.gateway.fetch(new Request("http://localhost/metrics"))).text();
      for (const m of text.matchAll(/model="((?:[^"\\]|\\.)*)"/g)) {
        assertOk(m[1] === "" || KNOWN_MODELS.includes(m[1]), `metrics label model=${m[1]}`);
      }
    }
  } finally {
    for (const w of Object.values(worlds)) w.gateway.close();
  }
});

// ---------------------------------------------------------------------------
// Examples kept from the fuzzing, and the inputs too big to generate often.

async function controlCall(
  w: ControlWorld,
  method: string,
  path: string,
  token: string | null,
  body?: string | unknown,
  headers: Record<string, string> = {},
) {
  const res = await w.app.request(path, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      "content-type": "application/json",
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) };
}

Deno.test("control plane: a repeated GPU index is a 400 naming it, not a 500 after a half-done write", async () => {
  const w = await controlWorld();
  try {
    const before = await controlSnapshot(w);
    // Found by the fuzzer: the inventory refused the GPUs (500) after the node was stored.
    const reg = fuzzRegistration("n2");
    reg.gpus = [...reg.gpus, reg.gpus[5]];
    const r = await controlCall(w, "POST", "/v1/agent/register", JOIN, reg);
    assertEquals([r.status, r.json.error.code, r.json.error.path], [
      400,
      "invalid_request",
      "gpus[8].index",
    ]);
    assertOk(r.json.error.message.includes("GPU index 5 appears twice"), r.json.error.message);
    const hb = await controlCall(w, "POST", "/v1/agent/heartbeat", w.nodeToken, {
      ...w.heartbeat,
      gpus: [reg.gpus[0], reg.gpus[1], reg.gpus[0]],
    });
    assertEquals([hb.status, hb.json.error.code, hb.json.error.path], [
      400,
      "invalid_request",
      "gpus[2].index",
    ]);
    assertEquals(await controlSnapshot(w), before);
    // The node registers once its report is right.
    reg.gpus.pop();
    assertEquals((await controlCall(w, "POST", "/v1/agent/register", JOIN, reg)).status, 200);
  } finally {
    w.cp.stop();
  }
});

Deno.test("control plane: bodies over the limit, deep nesting and prototype keys are refused or inert", async () => {
  const w = await controlWorld();
  try {
    const before = await controlSnapshot(w);
    const huge = JSON.stringify({ name: "x".repeat(5 * 1024 * 1024) });
    const deep = "[".repeat(200_000) + "]".repeat(200_000);
    const bodyRoutes = controlRoutes(w.nodeToken, w.heartbeat).filter((r) => r.body !== undefined);
    for (const route of bodyRoutes) {
      const token = route.auth!.slice("Bearer ".length);
      const path = route.path.replace(":node", "n1").replace(":name", "qwen");
      const big = await controlCall(w, route.method, path, token, huge);
      assertEquals([big.status, big.json.error.code], [413, "too_large"], `${path} huge`);
      for (
        const body of [
          deep,
          '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000),
          '{"__proto__": {"polluted": true}}',
        ]
      ) {
        const r = await controlCall(w, route.method, path, token, body);
        assertEquals(
          [r.status, r.json.error.code],
          [400, "invalid_request"],
          `${path} ${body.slice(0, 20)}`,
        );
      }
    }
    assertEquals(await controlSnapshot(w), before);
    assertUnpolluted();
  } finally {
    w.cp.stop();
  }
});

Deno.test("control plane: names like __proto__ and constructor are stored as plain data", async () => {
  const w = await controlWorld();
  try {
    const ok = async (method: string, path: string, body: unknown) => {
      const r = await controlCall(w, method, path, ADMIN, body);
      assertOk(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.json)}`);
      return r.json;
    };
    const labels = await ok("POST", "/v1/nodes/n1/labels", {
      labels: { constructor: "x", toString: "y", valueOf: null },
    });
    assertEquals(labels.label_overrides, { constructor: "x", toString: "y" });
    await ok("PUT", "/v1/nodes/n1/fabrics", {
      fabric_overrides: { constructor: "x", hasOwnProperty: null },
    });
    await ok("POST", "/v1/deployments", {
      ...DEPLOYMENT,
      name: "proto",
      served_model_name: "__proto__",
      profiles: [{
        ...DEPLOYMENT.profiles[0],
        // Own keys, as JSON.parse makes them (a literal's __proto__ would set the prototype).
        env: JSON.parse('{"__proto__": "x", "constructor": "y"}'),
        node_selector: { constructor: "x", toString: "y" },
      }],
    });
    await ok("POST", "/v1/apikeys", { name: "__proto__", models: ["__proto__", "constructor"] });
    await w.cp.reconcile();
    const snap = JSON.parse(await controlSnapshot(w));
    assertOk(snap.api.every(([status]: [number]) => status === 200));
    const node = await ok("GET", "/v1/nodes/n1", undefined);
    assertEquals([node.labels.constructor, node.labels.toString], ["x", "y"]);
    assertUnpolluted();
  } finally {
    w.cp.stop();
  }
});

Deno.test("gateway: bodies over the limit and deep nesting get OpenAI errors", async () => {
  const w = await gatewayWorld("open");
  try {
    const post = async (body: string) => {
      const res = await w.gateway.fetch(
        new Request("http://localhost/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        }),
      );
      return { status: res.status, json: JSON.parse(await res.text()) };
    };
    const before = w.snapshot();
    const cases: [string, number, string | null][] = [
      [JSON.stringify({ model: "llama", prompt: "x".repeat(64 * 1024) }), 413, "request_too_large"],
      ["[".repeat(20_000) + "]".repeat(20_000), 400, "invalid_json"],
      ['{"a":'.repeat(5_000) + "1" + "}".repeat(5_000), 400, "missing_model"],
      ['{"__proto__": {"model": "llama"}}', 400, "missing_model"],
      ['{"model": "constructor"}', 404, "model_not_found"],
      ['{"model": "__proto__"}', 404, "model_not_found"],
    ];
    for (const [body, status, code] of cases) {
      const r = await post(body);
      assertEquals([r.status, r.json.error.code], [status, code], body.slice(0, 40));
    }
    assertEquals(w.snapshot(), before);
    assertUnpolluted();
  } finally {
    w.gateway.close();
  }
});
