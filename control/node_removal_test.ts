import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, reportAll } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { hashToken } from "../http/tokens.ts";
import { createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { removeNode } from "./node_removal.ts";
import type { ModelPull } from "./model_pull_record.ts";

const ADMIN = "admin-secret";
const JOIN = "join-secret";

async function setup() {
  const store = new MemoryStore();
  const clock = new FakeClock(1_700_000_000_000);
  const cp = await ControlPlane.open({ store, clock, reconcileMs: 3_600_000 });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [await hashToken(JOIN)],
  });
  const call = async (method: string, path: string, token = ADMIN, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: JSON.parse(text) };
  };
  return { cp, store, clock, call };
}

Deno.test("DELETE /v1/nodes/:id: refused while the node holds replicas or is in service; then removed everywhere", async () => {
  const { cp, store, clock, call } = await setup();
  const registered = await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  assertEquals(registered.status, 200);
  const token = registered.json.node_token as string;
  await cp.nodes.register(registration("n2"), null);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const holder = cp.replicas()[0].shards[0].node;
  const other = holder === "n1" ? "n2" : "n1";
  await reportAll(cp, holder, "ready");

  // Unknown: 404 naming the node, not a deployment.
  const missing = await call("DELETE", "/v1/nodes/nope");
  assertEquals(missing.status, 404);
  assertStringIncludes(missing.json.error.message, "no node nope");

  // In service: 409, with what to do.
  const live = await call("DELETE", `/v1/nodes/${other}`);
  assertEquals(live.status, 409, live.text);
  assertStringIncludes(live.json.error.message, `node ${other} is ready and in service`);
  assertStringIncludes(live.json.error.message, `llmgw drain ${other}`);

  // Holding a replica, even cordoned: 409 naming it.
  await cp.nodes.setIntent(holder, "cordoned");
  const held = await call("DELETE", `/v1/nodes/${holder}`);
  assertEquals(held.status, 409, held.text);
  assertStringIncludes(held.json.error.message, "holds 1 replica (qwen-r0)");

  // Cordoned and empty: removed from the inventory, the store, and the fleet.
  await cp.nodes.setIntent(other, "cordoned");
  const removed = await call("DELETE", `/v1/nodes/${other}`);
  assertEquals(removed.status, 200, removed.text);
  assertEquals(removed.json.id, other);
  assertEquals(cp.nodes.list().map((n) => n.id), [holder]);
  assertEquals((await store.listNodes()).map((n) => n.id), [holder]);
  assertEquals((await call("GET", `/v1/nodes/${other}`)).status, 404);
  const events = (await call("GET", `/v1/events?subject=node/${other}`)).json.events;
  assertOk(events.some((e: { kind: string }) => e.kind === "node_removed"), JSON.stringify(events));

  // A lost node that held nothing goes without a cordon; the one holding a
  // replica goes once the reconciler has moved it off.
  clock.advance(61_000);
  await cp.reconcile();
  assertEquals(cp.nodes.get(holder).state, "lost");
  await cp.reconcile();
  const lost = await call("DELETE", `/v1/nodes/${holder}`);
  assertEquals(lost.status, 200, lost.text);
  assertEquals(cp.nodes.list(), []);

  // Its agent, still running, is refused its old credential and registers again as new.
  if (holder === "n1") {
    const hb = await call("POST", "/v1/agent/heartbeat", token, {
      node_id: "n1",
      generation: 0,
      shards: [],
    });
    assertEquals(hb.status, 401, hb.text);
  }
  const again = await call("POST", "/v1/agent/register", JOIN, registration("n1"));
  assertEquals(again.status, 200, again.text);
  assertEquals(cp.nodes.get("n1").state, "ready");
});

Deno.test("a node is removed everywhere in memory even when the store refuses to cancel its pulls; the next sweep cancels them", async () => {
  const store = new (class extends MemoryStore {
    refusing = false;
    override putModelPull(p: ModelPull): Promise<void> {
      return this.refusing ? Promise.reject(new Error("connection lost")) : super.putModelPull(p);
    }
  })();
  const clock = new FakeClock(1_700_000_000_000);
  const cp = await ControlPlane.open({ store, clock, reconcileMs: 3_600_000 });
  await cp.nodes.register(registration("n1"), null);
  // A pull asked of n1, as the store had it before it went away.
  const commit = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
  const id = `${QWEN.model}@${commit}`;
  const part = { node: "n1", state: "requested" as const, requested_at: 0, finished_at: null };
  const pull = {
    id,
    model: QWEN.model,
    commit,
    nodes: [{ ...part, reason: null }],
    created_at: 0,
    updated_at: 0,
    finished_at: null,
  };
  await store.putModelPull(pull);
  cp.state.modelPulls.set(id, structuredClone(pull));
  await cp.nodes.setIntent("n1", "cordoned");
  store.refusing = true;
  const removed = await removeNode(cp.state, "n1");
  assertEquals(removed.id, "n1");
  assertEquals(cp.nodes.list(), []);
  assertEquals(cp.state.inventory.getNode("n1"), undefined);
  assertEquals(cp.state.nodes.has("n1"), false);
  assertEquals(await store.listNodes(), []);
  await cp.state.flushEvents();
  const events = await cp.events.list({ limit: 100 });
  assertOk(events.some((e) => e.kind === "node_removed" && e.subject === "node/n1"));
  // Still asked, in memory as in the store, until the next sweep.
  const parts = async () => [
    cp.state.modelPulls.get(id)?.nodes.map((n) => [n.state, n.reason]),
    (await store.listModelPulls())[0]?.nodes.map((n) => [n.state, n.reason]),
  ];
  assertEquals(await parts(), [[["requested", null]], [["requested", null]]]);
  // The store back: a pass within the minute does not sweep; the first one after it does.
  store.refusing = false;
  await cp.reconcile();
  assertEquals((await parts())[0], [["requested", null]]);
  clock.advance(60_000);
  await cp.reconcile();
  assertEquals(await parts(), [[["cancelled", "node removed"]], [["cancelled", "node removed"]]]);
  assertEquals(cp.state.modelPulls.get(id)?.finished_at, clock.now());
});
