/**
 * The model routes through the app (issue #25 item 5): `GET /v1/models`
 * lists revisions from deployments and agents' caches, `GET
 * /v1/models/{org}/{name}` one model, and `POST /v1/models/pull` puts a
 * pull into nodes' desired states until their heartbeats report the
 * revision held. Bad input answers 400/404/409 naming what was wrong.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { QWEN } from "../../tests/control_fixture.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { registration } from "../../tests/registration.ts";
import { fixtureFacts } from "../../tests/model_configs.ts";
import { hashToken } from "../../http/tokens.ts";
import type { ModelCacheReport } from "../../protocol/model_cache_report.ts";
import { createControlApi } from "../api.ts";
import { ControlPlane } from "../control_plane.ts";
import { MemoryStore } from "../store/memory_store.ts";

const ADMIN = "admin-secret";
const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const MODEL = QWEN.model;
const DEPLOYMENT = { ...QWEN, pinned: true };

function cacheReport(state: "complete" | "downloading", done: number): ModelCacheReport {
  return {
    room_bytes: 100 * 2 ** 30,
    revisions: [{
      repo: MODEL,
      commit: COMMIT,
      bytes: 1000,
      state,
      bytes_done: done,
      last_used: null,
      pinned: true,
    }],
    omitted: 0,
    evicted: [],
  };
}

const empty: ModelCacheReport = { room_bytes: 0, revisions: [], omitted: 0, evicted: [] };

async function setup(resolves = true) {
  const cp = await ControlPlane.open({
    store: new MemoryStore(),
    clock: new FakeClock(1_700_000_000_000),
    reconcileMs: 3_600_000,
    modelFacts: {
      facts: () => Promise.resolve(fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024])),
    },
    commits: {
      resolveCommit: () =>
        resolves ? Promise.resolve(COMMIT) : Promise.reject(new Error("hub down")),
    },
  });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [],
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };
  for (const id of ["n1", "n2"]) await cp.nodes.register(registration(id), null);
  return { cp, call };
}

Deno.test("models pull: the revision goes into the nodes' desired states until they report it held", async () => {
  const { cp, call } = await setup();
  await cp.deployments.apply(DEPLOYMENT);
  await cp.nodes.heartbeat({ node_id: "n1", generation: 0, shards: [], model_cache: empty });
  await cp.nodes.heartbeat({
    node_id: "n2",
    generation: 0,
    shards: [],
    model_cache: cacheReport("complete", 1000),
  });
  const r = await call("POST", "/v1/models/pull", { deployment: "qwen" });
  assertEquals(r.status, 200, JSON.stringify(r.json));
  assertEquals(r.json, {
    model: MODEL,
    commit: COMMIT,
    requested: ["n1"],
    held: ["n2"],
    no_cache: [],
  });
  await cp.reconcile();
  const desired = await cp.desired.wait("n1", -1, 0);
  assertEquals(desired.models, [
    { model: MODEL, commit: COMMIT, pinned: true, pull: true, requested_at: 1_700_000_000_000 },
  ]);
  // n2 is asked nothing but keeps the pinned revision.
  assertEquals((await cp.desired.wait("n2", -1, 0)).models, [
    { model: MODEL, commit: COMMIT, pinned: true, pull: false },
  ]);
  // Progress shows in the list: n1 downloading, n2 complete.
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: cacheReport("downloading", 400),
  });
  const listed = await call("GET", "/v1/models");
  assertEquals(listed.status, 200);
  const [rev] = listed.json.models;
  assertEquals([rev.model, rev.commit, rev.revision, rev.deployments, rev.pinned, rev.bytes], [
    MODEL,
    COMMIT,
    "main",
    ["qwen"],
    true,
    1000,
  ]);
  assertEquals(
    rev.hosts.map((
      h: { node: string; state: string; bytes_done: number },
    ) => [h.node, h.state, h.bytes_done]),
    [
      ["n1", "downloading", 400],
      ["n2", "complete", 1000],
    ],
  );
  assertEquals(rev.facts.weight_bytes, 15_231_233_024);
  // Held: the pull is done, an event says so, and the desired state keeps only the pin.
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: cacheReport("complete", 1000),
  });
  await cp.reconcile();
  assertEquals((await cp.desired.wait("n1", -1, 0)).models, [
    { model: MODEL, commit: COMMIT, pinned: true, pull: false },
  ]);
  const events = (await cp.events.list()).map((e) => [e.kind, e.subject]);
  assertOk(events.some(([k, s]) => k === "model_pull" && s === "deployment/qwen"));
  assertOk(events.some(([k, s]) => k === "model_pulled" && s === "node/n1"));
  const described = await call("GET", `/v1/models/${MODEL}`);
  assertEquals(described.status, 200);
  assertEquals(described.json.revisions[0].hosts.length, 2);
});

Deno.test("models pull: what cannot be pulled says why", async () => {
  const { cp, call } = await setup(false);
  await cp.deployments.apply(DEPLOYMENT);
  const unresolved = await call("POST", "/v1/models/pull", { deployment: "qwen" });
  assertEquals(unresolved.status, 409);
  assertStringIncludes(unresolved.json.error.message, "not resolved to a commit yet");
  const missing = await call("POST", "/v1/models/pull", { deployment: "nope" });
  assertEquals(missing.status, 404);
  assertStringIncludes(missing.json.error.message, "no deployment nope");
  const bad = await call("POST", "/v1/models/pull", { deployment: "qwen", nodes: [] });
  assertEquals(bad.status, 400);
  assertEquals(bad.json.error.path, "nodes");
  const extra = await call("POST", "/v1/models/pull", { deployment: "qwen", force: true });
  assertEquals(extra.status, 400);
  await cp.deployments.apply({
    ...DEPLOYMENT,
    name: "local",
    model: "/models/qwen",
    served_model_name: "local",
  });
  const local = await call("POST", "/v1/models/pull", { deployment: "local" });
  assertEquals(local.status, 400);
  assertStringIncludes(local.json.error.message, "local path, used in place");
  const notModel = await call("GET", "/v1/models/acme/unknown");
  assertEquals(notModel.status, 404);
  assertEquals((await call("GET", "/v1/models/a..b/x y")).status, 400);
});

Deno.test("models pull: an unknown node is named", async () => {
  const { cp, call } = await setup();
  await cp.deployments.apply(DEPLOYMENT);
  const r = await call("POST", "/v1/models/pull", { deployment: "qwen", nodes: ["n1", "n9"] });
  assertEquals(r.status, 404);
  assertStringIncludes(r.json.error.message, "no node n9 (nodes[1])");
  assertEquals(cp.state.modelPulls.size, 0, "nothing half-done");
  // A node whose agent reports no cache would never say it holds it: not asked, and said.
  const old = await call("POST", "/v1/models/pull", { deployment: "qwen", nodes: ["n1"] });
  assertEquals([old.status, old.json.requested, old.json.no_cache], [200, [], ["n1"]]);
  assertEquals(cp.state.modelPulls.size, 0);
});

Deno.test("models list: a node whose pull failed for good shows failed with its agent's words, until a download or a new pull", async () => {
  const { cp, call } = await setup();
  await cp.deployments.apply(DEPLOYMENT);
  await cp.nodes.register(registration("n3"), null);
  for (const n of ["n1", "n2", "n3"]) {
    await cp.nodes.heartbeat({ node_id: n, generation: 0, shards: [], model_cache: empty });
  }
  assertEquals((await call("POST", "/v1/models/pull", { deployment: "qwen" })).status, 200);
  const gated = `model ${MODEL} is gated: set HF_TOKEN to a token that was granted access`;
  const fail = (node: string, revisions: ModelCacheReport["revisions"]) =>
    cp.nodes.heartbeat({
      node_id: node,
      generation: 0,
      shards: [],
      model_cache: {
        ...empty,
        revisions,
        pulls_failed: [{ repo: MODEL, commit: COMMIT, kind: "gated", message: gated, at: 1 }],
      },
    });
  // n1 failed with nothing on disk; n3 failed after a partial fetch (what the fetch left).
  await fail("n1", []);
  const partial = cacheReport("downloading", 300).revisions.map((r) => ({
    ...r,
    state: "partial" as const,
  }));
  await fail("n3", partial);
  type Host = { node: string; state: string; bytes_done: number; failure?: unknown };
  const hosts = async (path: string) => {
    const r = await call("GET", path);
    assertEquals(r.status, 200, JSON.stringify(r.json));
    const revs = path === "/v1/models" ? r.json.models : r.json.revisions;
    return revs[0].hosts.map((h: Host) => [h.node, h.state, h.bytes_done, h.failure ?? null]);
  };
  const failure = { kind: "gated", message: gated, at: 1_700_000_000_000 };
  const expected = [
    ["n1", "failed", 0, failure],
    ["n2", "requested", 0, null],
    ["n3", "failed", 300, failure],
  ];
  assertEquals(await hosts("/v1/models"), expected);
  assertEquals(await hosts(`/v1/models/${MODEL}`), expected);
  // A replica fetching it on n1 is newer than the failure: downloading, no failure.
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: cacheReport("downloading", 500),
  });
  assertEquals((await hosts("/v1/models"))[0], ["n1", "downloading", 500, null]);
  // Pulled again, n3 is asked afresh: requested, its partial copy as reported.
  assertEquals(
    (await call("POST", "/v1/models/pull", { deployment: "qwen", nodes: ["n3"] })).json.requested,
    ["n3"],
  );
  assertEquals((await hosts("/v1/models"))[2], ["n3", "partial", 300, null]);
});
