import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { reportAll } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import { InvalidInputError } from "./errors.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { hashToken } from "../http/tokens.ts";

const ADMIN = "admin-secret";
const JOIN = "join-secret";

async function setup() {
  const store = new MemoryStore();
  const cp = await ControlPlane.open({ store, reconcileMs: 60_000 });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [await hashToken(JOIN)],
  });
  const call = (
    method: string,
    path: string,
    token: string | null,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.request(path, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  return { cp, call };
}

const DEPLOYMENT = {
  name: "qwen",
  model: "Qwen/Qwen2.5-7B-Instruct",
  replicas: 2,
  profiles: [{ name: "tp2", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 2 }],
};

Deno.test("an agent registers, gets its desired shards and reports them ready", async () => {
  const { cp, call } = await setup();
  const reg = await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  assertEquals(reg.status, 200);
  const { node_token } = await reg.json();
  assertEquals((await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT)).status, 201);
  await cp.reconcile();
  const desired = await (await call("GET", "/v1/agent/desired?node_id=n1&generation=0", node_token))
    .json();
  assertEquals(desired.shards.map((s: { id: string }) => s.id), ["qwen-r0.1/0", "qwen-r1.1/0"]);
  assertEquals(desired.shards[0].launch.gpus.map((g: { index: number }) => g.index), [0, 1]);
  // The agent allocates ports: blocks of 10 from its range.
  const shards = desired.shards.map((s: { id: string }, i: number) => ({
    id: s.id,
    state: "ready",
    since: Date.now(),
    pid: 1,
    port: 20_000 + 10 * i,
    serves_http: true,
    progress: null,
    restarts: 0,
    adopted: false,
    last_failure: null,
    spec_hash: "x",
    // The plugin's load metric names reach gateways with the endpoint (the second shard's
    // agent is older and sends none).
    ...(i === 0
      ? {
        load_metrics: {
          running: ["vllm:num_requests_running"],
          waiting: ["vllm:num_requests_waiting"],
          kv_cache_usage: ["vllm:kv_cache_usage_perc"],
        },
      }
      : {}),
  }));
  const hb = await call("POST", "/v1/agent/heartbeat", node_token, {
    node_id: "n1",
    generation: desired.generation,
    shards,
  });
  assertEquals(hb.status, 200);
  const replicas = (await (await call("GET", "/v1/replicas", ADMIN)).json()).replicas;
  assertEquals(replicas.map((r: { state: string }) => r.state), ["ready", "ready"]);
  assertEquals(cp.readyEndpoints().map((e) => e.url), [
    "http://127.0.0.1:20000",
    "http://127.0.0.1:20010",
  ]);
  const [first, second] = cp.readyEndpoints();
  assertEquals(first.load_metrics?.running, ["vllm:num_requests_running"]);
  assertEquals(second.load_metrics, undefined);
});

Deno.test("the desired state long-polls until it changes", async () => {
  const { cp, call } = await setup();
  const { node_token } = await (await call("POST", "/v1/agent/register", JOIN, registration("n1")))
    .json();
  const first = await (await call("GET", "/v1/agent/desired?node_id=n1&generation=0", node_token))
    .json();
  // A minute-long poll: only the change can answer it within this test.
  let answered = false;
  const waiting = Promise.resolve(call(
    "GET",
    `/v1/agent/desired?node_id=n1&generation=${first.generation}&wait_ms=60000`,
    node_token,
  )).then((res) => {
    answered = true;
    return res;
  });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assertOk(!answered, "the poll waits while nothing changes");
  await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT);
  await cp.reconcile();
  // One turn of the event loop: the change wakes the poll, no timer can have fired.
  await new Promise((resolve) => setTimeout(resolve, 0));
  assertOk(answered, "answered on the change, not at the timeout");
  const changed = await (await waiting).json();
  assertOk(changed.generation > first.generation);
  assertEquals(changed.shards.length, 2);
});

Deno.test("a node id is bound to its credential; a cordon survives re-registration", async () => {
  const { call } = await setup();
  const { node_token } = await (await call("POST", "/v1/agent/register", JOIN, registration("n1")))
    .json();
  const thief = await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  assertEquals(thief.status, 403);
  assertStringIncludes((await thief.json()).error.message, "needs its node credential");
  assertEquals((await call("POST", "/v1/nodes/n1/cordon", ADMIN)).status, 200);
  const again = await call("POST", "/v1/agent/register", JOIN, registration("n1"), {
    "x-llmgw-node-token": node_token,
  });
  assertEquals(again.status, 200);
  const node = await (await call("GET", "/v1/nodes/n1", ADMIN)).json();
  assertEquals(node.state, "cordoned");
});

Deno.test("bad and unauthorised requests get 4xx JSON errors and change nothing", async () => {
  const { cp, call } = await setup();
  const cases: [string, string, string | null, unknown, number, string][] = [
    ["GET", "/v1/nodes", null, undefined, 401, "unauthorized"],
    ["GET", "/v1/nodes", JOIN, undefined, 403, "forbidden"],
    ["POST", "/v1/agent/register", ADMIN, registration("n1"), 403, "forbidden"],
    ["POST", "/v1/agent/register", JOIN, "{not json", 400, "invalid_json"],
    [
      "POST",
      "/v1/agent/register",
      JOIN,
      { ...registration("n1"), gpus: "many" },
      400,
      "invalid_request",
    ],
    ["POST", "/v1/deployments", ADMIN, { ...DEPLOYMENT, replicas: -1 }, 400, "invalid_request"],
    [
      "POST",
      "/v1/deployments",
      ADMIN,
      { ...DEPLOYMENT, profiles: [{ ...DEPLOYMENT.profiles[0], engine: "nope" }] },
      400,
      "invalid_request",
    ],
    ["POST", "/v1/deployments/qwen/scale", ADMIN, { replicas: 2 }, 404, "not_found"],
    ["POST", "/v1/deployments/BAD/scale", ADMIN, { replicas: 2 }, 400, "invalid_request"],
    ["GET", "/v1/events?limit=banana", ADMIN, undefined, 400, "invalid_request"],
    ["GET", "/v1/agent/desired?node_id=n9", "whatever", undefined, 401, "unauthorized"],
    ["GET", "/v1/agent/desired?node_id=n9", ADMIN, undefined, 403, "forbidden"],
    ["GET", "/nowhere", ADMIN, undefined, 404, "not_found"],
  ];
  for (const [method, path, token, body, status, code] of cases) {
    const res = await call(method, path, token, body);
    const json = await res.json();
    assertEquals([res.status, json.error?.code], [status, code], `${method} ${path}`);
    assertOk(typeof json.error.message === "string" && json.error.message.length > 0);
  }
  assertEquals(cp.deployments.list(), []);
  assertEquals(cp.inventory.listNodes(), []);
  const invalid =
    await (await call("POST", "/v1/deployments", ADMIN, { ...DEPLOYMENT, replicas: -1 })).json();
  assertEquals(invalid.error.path, "replicas");
});

Deno.test("healthz needs no token", async () => {
  const { call } = await setup();
  assertEquals((await call("GET", "/healthz", null)).status, 200);
});

Deno.test("metrics, the OpenAPI document and the placement dry run", async () => {
  const { cp, call } = await setup();
  await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT);
  await cp.reconcile();
  assertEquals((await call("GET", "/metrics", null)).status, 401);
  const metrics = await (await call("GET", "/metrics", ADMIN)).text();
  assertStringIncludes(metrics, 'llmgw_nodes{state="ready"} 1');
  assertStringIncludes(metrics, 'llmgw_gpus{class="rtx4090-24g",status="allocated"} 4');
  assertStringIncludes(metrics, 'llmgw_gpus{class="rtx4090-24g",status="free"} 4');
  assertStringIncludes(metrics, "llmgw_placements_total 2");
  assertStringIncludes(metrics, 'route="/v1/deployments"');
  const doc = await (await call("GET", "/openapi.json", ADMIN)).json();
  assertEquals(doc.openapi, "3.1.0");
  assertOk(
    doc.paths["/v1/deployments"].post.requestBody.content["application/json"].schema.properties
      .profiles,
  );
  // The dry run places on what is left (4 free GPUs: two tp2 replicas) and changes nothing.
  const dry = await (await call("POST", "/v1/plan", ADMIN, {
    ...DEPLOYMENT,
    name: "other",
    served_model_name: "o",
    replicas: 3,
  })).json();
  assertEquals(dry.replicas.map((r: { status: string }) => r.status), [
    "placed",
    "placed",
    "unschedulable",
  ]);
  assertEquals(cp.replicas().length, 2);
});

Deno.test("operator labels apply over the agent's, survive re-registration, and steer node selectors", async () => {
  const { cp, call } = await setup();
  const { node_token } = await (await call("POST", "/v1/agent/register", JOIN, registration("n1")))
    .json();
  const set = await call("POST", "/v1/nodes/n1/labels", ADMIN, {
    labels: { zone: "b", team: "ml" },
  });
  assertEquals((await set.json()).label_overrides, { zone: "b", team: "ml" });
  await call("POST", "/v1/agent/register", JOIN, registration("n1"), {
    "x-llmgw-node-token": node_token,
  });
  assertEquals(cp.inventory.getNode("n1")!.labels, { zone: "b", team: "ml" });
  await call("POST", "/v1/nodes/n1/labels", ADMIN, { labels: { team: null } });
  assertEquals(cp.inventory.getNode("n1")!.labels, { zone: "b" });
  const bad = await call("POST", "/v1/nodes/n1/labels", ADMIN, { labels: { "bad key!": "x" } });
  assertEquals(bad.status, 400);
  const selective = {
    ...DEPLOYMENT,
    profiles: [{ ...DEPLOYMENT.profiles[0], node_selector: { zone: "a" } }],
  };
  await call("POST", "/v1/deployments", ADMIN, selective);
  await cp.reconcile();
  assertStringIncludes(cp.replicas()[0].explanation!.summary, "not matching the node selector");
});

Deno.test("fabric overrides rename or exclude a node's reported fabrics, and refuse a clash", async () => {
  const { cp, call } = await setup();
  const reg = { ...registration("n1", "dgx_h100_8x_nics") };
  await call("POST", "/v1/agent/register", JOIN, reg);
  assertEquals(cp.inventory.getNode("n1")!.fabrics.map((f) => f.fabric), ["ib-compute"]);
  const renamed = await call("PUT", "/v1/nodes/n1/fabrics", ADMIN, {
    fabric_overrides: { "ib-compute": "ib-east" },
  });
  assertEquals(renamed.status, 200);
  assertEquals(cp.inventory.getNode("n1")!.fabrics.map((f) => f.fabric), ["ib-east"]);
  await call("PUT", "/v1/nodes/n1/fabrics", ADMIN, { fabric_overrides: { "ib-compute": null } });
  assertEquals(cp.inventory.getNode("n1")!.fabrics, []);
  const bad = await call("PUT", "/v1/nodes/n1/fabrics", ADMIN, {
    fabric_overrides: { "bad name": "x" },
  });
  assertEquals(bad.status, 400);
  await call("PUT", "/v1/nodes/n1/fabrics", ADMIN, { fabric_overrides: {} });
  assertEquals(cp.inventory.getNode("n1")!.fabrics.map((f) => f.fabric), ["ib-compute"]);
});

Deno.test("scaling a deployment up and down adds and removes replicas and frees their GPUs", async () => {
  const { cp, call } = await setup();
  await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT);
  await cp.reconcile();
  assertEquals(cp.replicas().map((r) => r.id), ["qwen-r0", "qwen-r1"]);
  assertEquals(
    (await call("POST", "/v1/deployments/qwen/scale", ADMIN, { replicas: 4 })).status,
    200,
  );
  await cp.reconcile();
  assertEquals(cp.replicas().filter((r) => r.profile !== null).length, 4);
  assertEquals(cp.inventory.freeGpus("n1"), []);
  await call("POST", "/v1/deployments/qwen/scale", ADMIN, { replicas: 1 });
  await cp.reconcile();
  assertEquals(cp.replicas().map((r) => r.id), ["qwen-r0"]);
  assertEquals(cp.inventory.freeGpus("n1"), [2, 3, 4, 5, 6, 7]);
});

Deno.test("draining moves replicas off and then reports the node drained", async () => {
  const { cp, call } = await setup();
  await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  await call("POST", "/v1/agent/register", JOIN, registration("n2"));
  await call("POST", "/v1/deployments", ADMIN, { ...DEPLOYMENT, replicas: 1 });
  await cp.reconcile();
  const first = cp.replicas()[0].shards[0].node;
  // No grace before the original stops (control/rollout_step_test.ts covers it).
  cp.state.retireGraceMs = 0;
  await call("POST", `/v1/nodes/${first}/drain`, ADMIN);
  await cp.reconcile();
  // Capacity elsewhere: the replacement starts first; the original stops once it is ready.
  const replacement = cp.replicas().find((r) => r.id !== "qwen-r0")!;
  const moved = replacement.shards[0].node;
  assertOk(moved !== first, "the replacement is placed off the draining node");
  assertEquals(cp.replicas().length, 2, "the original serves until its replacement is ready");
  await reportAll(cp, moved, "ready");
  await cp.reconcile();
  assertEquals(cp.replicas().map((r) => r.id), [replacement.id]);
  await cp.reconcile();
  const events = (await (await call("GET", "/v1/events?limit=100", ADMIN)).json()).events as {
    kind: string;
    subject: string;
  }[];
  assertOk(events.some((e) => e.kind === "node_drained" && e.subject === `node/${first}`));
});

Deno.test("every admin endpoint: no token 401, a join token 403, bad JSON 400; state unchanged", async () => {
  const { cp, call } = await setup();
  await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  await call("POST", "/v1/deployments", ADMIN, DEPLOYMENT);
  await cp.reconcile();
  const before = JSON.stringify([
    cp.deployments.list(),
    cp.replicas(),
    cp.inventory.listNodes(),
    cp.apiKeys.list(),
  ]);
  const routes: [string, string, boolean][] = [
    ["GET", "/v1/nodes", false],
    ["GET", "/v1/nodes/n1", false],
    ["POST", "/v1/nodes/n1/cordon", false],
    ["POST", "/v1/nodes/n1/uncordon", false],
    ["POST", "/v1/nodes/n1/drain", false],
    ["POST", "/v1/nodes/n1/labels", true],
    ["PUT", "/v1/nodes/n1/fabrics", true],
    ["GET", "/v1/deployments", false],
    ["POST", "/v1/deployments", true],
    ["DELETE", "/v1/deployments/qwen", false],
    ["POST", "/v1/deployments/qwen/scale", true],
    ["GET", "/v1/replicas", false],
    ["GET", "/v1/replicas/qwen-r0/logs", false],
    ["POST", "/v1/plan", true],
    ["GET", "/v1/events", false],
    ["GET", "/v1/endpoints", false],
    ["GET", "/v1/apikeys", false],
    ["POST", "/v1/apikeys", true],
    ["DELETE", "/v1/apikeys/key-00000000", false],
    ["GET", "/metrics", false],
    ["GET", "/openapi.json", false],
  ];
  for (const [method, path, hasBody] of routes) {
    const none = await call(method, path, null, hasBody ? {} : undefined);
    assertEquals(none.status, 401, `${method} ${path} without a token`);
    await none.body?.cancel();
    const join = await call(method, path, JOIN, hasBody ? {} : undefined);
    assertEquals(join.status, 403, `${method} ${path} with a join token`);
    await join.body?.cancel();
    if (hasBody) {
      const bad = await call(method, path, ADMIN, "{oops");
      assertEquals(bad.status, 400, `${method} ${path} with malformed JSON`);
      assertEquals((await bad.json()).error.code, "invalid_json");
    }
  }
  // The agent endpoints refuse an admin token and a wrong node credential.
  for (
    const [method, path, body] of [
      ["POST", "/v1/agent/heartbeat", { node_id: "n1", generation: 0, shards: [] }],
      ["GET", "/v1/agent/desired?node_id=n1", undefined],
    ] as const
  ) {
    const res = await call(method, path, ADMIN, body);
    assertEquals(res.status, 403, `${method} ${path} with an admin token`);
    await res.body?.cancel();
  }
  assertEquals(
    JSON.stringify([
      cp.deployments.list(),
      cp.replicas(),
      cp.inventory.listNodes(),
      cp.apiKeys.list(),
    ]),
    before,
  );
});

Deno.test("after a restart, /v1/endpoints is 503 settling until the nodes holding shards report", async () => {
  const store = new MemoryStore();
  const first = await ControlPlane.open({ store, reconcileMs: 60_000 });
  const hashes = {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [await hashToken(JOIN)],
  };
  const app1 = createControlApi(first, hashes);
  const reg = await app1.request("/v1/agent/register", {
    method: "POST",
    headers: { authorization: `Bearer ${JOIN}`, "content-type": "application/json" },
    body: JSON.stringify(registration("n1")),
  });
  const { node_token } = await reg.json();
  await first.deployments.apply({ ...DEPLOYMENT, replicas: 1 } as never);
  await first.reconcile();
  assertOk(first.endpointsSettled(), "a first start has nothing to wait for");

  // The same store, a new control plane: the placement is back, the reports are not.
  const second = await ControlPlane.open({ store, reconcileMs: 60_000 });
  const app2 = createControlApi(second, hashes);
  const endpoints = () =>
    app2.request("/v1/endpoints", { headers: { authorization: `Bearer ${ADMIN}` } });
  const settling = await endpoints();
  assertEquals(settling.status, 503);
  assertEquals((await settling.json()).error.code, "settling");
  const hb = await app2.request("/v1/agent/heartbeat", {
    method: "POST",
    headers: { authorization: `Bearer ${node_token}`, "content-type": "application/json" },
    body: JSON.stringify({ node_id: "n1", generation: 0, shards: [] }),
  });
  assertEquals(hb.status, 200);
  assertEquals((await endpoints()).status, 200);
  // And without any report, the wait ends with the unreachable threshold.
  const third = await ControlPlane.open({ store, reconcileMs: 60_000 });
  assertOk(!third.endpointsSettled(third.state.startedAt + 1));
  assertOk(
    third.endpointsSettled(third.state.startedAt + third.inventory.thresholds.unreachable_after_ms),
  );
});

Deno.test("a shard's failure becomes a shard_failed event with the end of its log, once", async () => {
  const { cp, call } = await setup();
  const { node_token } = await (await call("POST", "/v1/agent/register", JOIN, registration("n1")))
    .json();
  await call("POST", "/v1/deployments", ADMIN, { ...DEPLOYMENT, replicas: 1 });
  await cp.reconcile();
  const desired = await (await call("GET", "/v1/agent/desired?node_id=n1&generation=0", node_token))
    .json();
  const tail = Array.from({ length: 30 }, (_, i) => `log line ${i}`);
  const failed = {
    id: desired.shards[0].id,
    state: "failed",
    since: Date.now(),
    pid: null,
    port: 20_000,
    serves_http: false,
    progress: null,
    restarts: 0,
    adopted: false,
    last_failure: {
      at: Date.now(),
      reason: "not ready within the load timeout of 600 s",
      exit_code: null,
      signal: null,
      log_tail: tail,
    },
    spec_hash: "x",
  };
  for (let i = 0; i < 2; i++) {
    const hb = await call("POST", "/v1/agent/heartbeat", node_token, {
      node_id: "n1",
      generation: desired.generation,
      shards: [failed],
    });
    assertEquals(hb.status, 200);
  }
  const events = (await (await call("GET", "/v1/events?limit=100", ADMIN)).json()).events as {
    kind: string;
    subject: string;
    message: string;
  }[];
  const failures = events.filter((e) => e.kind === "shard_failed");
  assertEquals(failures.length, 1, "the same failure reported twice is one event");
  assertEquals(failures[0].subject, "replica/qwen-r0");
  assertStringIncludes(failures[0].message, "not ready within the load timeout");
  assertStringIncludes(failures[0].message, "log line 29");
  assertOk(!failures[0].message.includes("log line 9\n"), "only the last 20 lines");
});

Deno.test("a registration with a repeated GPU index is refused before anything is written", async () => {
  const { cp } = await setup();
  const reg = registration("n1");
  const twice = { ...reg, gpus: [...reg.gpus, reg.gpus[0]] };
  let code = "";
  try {
    await cp.nodes.register(twice, null);
  } catch (e) {
    assertOk(e instanceof InvalidInputError, String(e));
    code = e.code;
  }
  assertEquals(code, "invalid_request");
  assertEquals(cp.inventory.listNodes().length, 0);
  assertEquals(await cp.nodes.nodeForToken("anything"), null);
  // The same node registers fine afterwards: nothing half-written blocks it.
  assertOk((await cp.nodes.register(reg, null)).node_token.startsWith("llmgw_node_"));
});
