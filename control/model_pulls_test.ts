/**
 * Pulls survive a control plane restart (issue #25 leftovers): a pull asked
 * of two nodes, one done before the restart, is stored; the control plane
 * opened again on the same store (SQLite; PostgreSQL with a failover to a
 * second instance) asks the other node again in its desired state until it
 * reports the revision held, and lists the pull. Finished pulls are kept a
 * bounded count and time; a removed node's part is cancelled; a node whose
 * agent reports the pull failed for good is failed, once, across a restart.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN } from "../tests/control_fixture.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import { postgresAvailable, startPostgres } from "../tests/postgres_server.ts";
import { registration } from "../tests/registration.ts";
import type { ModelCacheReport, PullFailureReport } from "../protocol/model_cache_report.ts";
import { hashToken } from "../http/tokens.ts";
import { createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import { LeaderLease } from "./leader_lease.ts";
import { cancelPull } from "./model_pull_cancel.ts";
import type { ModelPull } from "./model_pull_record.ts";
import { FINISHED_PULL_TTL_MS, FINISHED_PULLS_KEPT } from "./model_pull_sweep.ts";
import {
  OPERATOR_CANCEL_REASON,
  pullDeploymentModel,
  pullViews,
  requestPull,
} from "./model_pulls.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { PostgresStore } from "./store/postgres_store.ts";
import { SqliteStore } from "./store/sqlite_store.ts";
import type { ControlStore } from "./store/store.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const MODEL = QWEN.model;
/** Qwen with no replica: the pulls here are the only reason a node holds it. */
const DEPLOYMENT = { ...QWEN, replicas: 0 };
const PULLED = [{ model: MODEL, commit: COMMIT, pinned: false, pull: true }];

function cache(held: boolean): ModelCacheReport {
  return {
    room_bytes: 100 * 2 ** 30,
    revisions: held
      ? [{
        repo: MODEL,
        commit: COMMIT,
        bytes: 1000,
        state: "complete",
        bytes_done: 1000,
        last_used: null,
        pinned: false,
      }]
      : [],
    omitted: 0,
    evicted: [],
  };
}

function openPlane(store: ControlStore, clock: FakeClock, epoch = 0): Promise<ControlPlane> {
  return ControlPlane.open({
    store,
    clock,
    epoch,
    reconcileMs: 3_600_000,
    modelFacts: {
      facts: () => Promise.resolve(fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024])),
    },
    commits: { resolveCommit: () => Promise.resolve(COMMIT) },
  });
}

async function heartbeat(
  cp: ControlPlane,
  node: string,
  held: boolean,
  failed: PullFailureReport[] = [],
): Promise<void> {
  const { generation } = await cp.desired.wait(node, -1, 0);
  const model_cache = { ...cache(held), ...(failed.length > 0 ? { pulls_failed: failed } : {}) };
  await cp.nodes.heartbeat({ node_id: node, generation, shards: [], model_cache });
}

/** The `requested_at` of each model of `node`'s desired state: a pull's request. */
const requests = async (cp: ControlPlane, node: string) =>
  ((await cp.desired.wait(node, -1, 0)).models ?? []).map((m) => m.requested_at);

/** The models of `node`'s desired state (absent when none), less their requests ({@link requests}). */
const models = async (cp: ControlPlane, node: string) =>
  ((await cp.desired.wait(node, -1, 0)).models ?? []).map(({ requested_at, ...m }) => {
    assertEquals(
      typeof requested_at === "number",
      m.pull,
      "a pull, and only a pull, names its request",
    );
    return m;
  });

/** A store opened on the same place each time, and its release; `epoch` for the control plane. */
type Opener = () => Promise<{ store: ControlStore; epoch: number; close: () => Promise<void> }>;

/** The scenario, on whatever store `open` gives. */
async function pullSurvivesRestart(open: Opener): Promise<void> {
  const clock = new FakeClock();
  const first = await open();
  let cp = await openPlane(first.store, clock, first.epoch);
  try {
    for (const id of ["n1", "n2"]) await cp.nodes.register(registration(id), null);
    for (const id of ["n1", "n2"]) await heartbeat(cp, id, false);
    await cp.deployments.apply(DEPLOYMENT);
    const answer = await pullDeploymentModel(cp.state, { deployment: "qwen" });
    assertEquals(answer.requested, ["n1", "n2"]);
    clock.advance(60_000);
    await heartbeat(cp, "n1", true);
    await cp.reconcile();
    assertEquals(await models(cp, "n1"), []);
    assertEquals(await models(cp, "n2"), PULLED);
  } finally {
    await cp.stop();
    await first.close();
  }

  // Restarted (or another instance took over) on the same store: n2 is still asked.
  clock.advance(60_000);
  const second = await open();
  cp = await openPlane(second.store, clock, second.epoch);
  try {
    assertEquals(await models(cp, "n2"), PULLED);
    assertEquals(await models(cp, "n1"), []);
    const [pulling] = pullViews(cp.state);
    assertEquals([pulling.id, pulling.state], [`${MODEL}@${COMMIT}`, "pulling"]);
    assertEquals(pulling.nodes.map((n) => [n.node, n.state]), [["n1", "done"], [
      "n2",
      "requested",
    ]]);
    await heartbeat(cp, "n2", true);
    await cp.reconcile();
    assertEquals(await models(cp, "n2"), []);
    await cp.state.flushEvents();
    const events = await cp.events.list({ limit: 100 });
    assertOk(events.some((e) => e.kind === "model_pulled" && e.subject === "node/n2"));
  } finally {
    await cp.stop();
    await second.close();
  }

  // Finished, it stays listed across a restart, asked of nobody.
  const third = await open();
  cp = await openPlane(third.store, clock, third.epoch);
  try {
    const [done] = pullViews(cp.state);
    assertEquals(done.state, "done");
    assertEquals(done.finished_at, clock.now() - 0);
    assertEquals(await models(cp, "n2"), []);
  } finally {
    await cp.stop();
    await third.close();
  }
}

Deno.test("a pull survives a restart of the control plane on the same SQLite store", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-pulls-" });
  try {
    await pullSurvivesRestart(() => {
      const store = SqliteStore.open(`${dir}/llmgw.db`);
      return Promise.resolve({ store, epoch: 0, close: () => Promise.resolve(store.close()) });
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const pg = postgresAvailable();

Deno.test({
  name: "a pull survives a failover to another control plane on the same PostgreSQL database",
  ignore: !pg.ok,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startPostgres();
    try {
      const url = await server.createDatabase("pulls");
      let instance = 0;
      await pullSurvivesRestart(async () => {
        // Each open is another instance: it takes the lease the last one released.
        const holder = `cp${++instance}`;
        const store = await PostgresStore.open(url, { log: () => {} });
        const lease = new LeaderLease({ store, holder, address: "", leaseMs: 600_000 });
        const term = await lease.tryAcquire();
        assertOk(term !== null, `${holder} took over`);
        store.setEpoch(term.epoch, holder);
        return {
          store,
          epoch: term.epoch,
          close: async () => {
            await lease.release(term);
            await store.close();
          },
        };
      });
    } finally {
      await server.stop();
    }
  },
});

Deno.test("finished pulls are kept a bounded count and time", async () => {
  const clock = new FakeClock();
  const store = new MemoryStore();
  const cp = await openPlane(store, clock);
  await cp.nodes.register(registration("n1"), null);
  await heartbeat(cp, "n1", false);
  const commit = (i: number) => i.toString(16).padStart(40, "0");
  for (let i = 0; i < FINISHED_PULLS_KEPT + 5; i++) {
    await cp.state.locked(() => requestPull(cp.state, MODEL, commit(i), ["n1"]));
    await cancelPull(cp.state, { pull: `${MODEL}@${commit(i)}` });
    clock.advance(1_000);
  }
  const kept = await store.listModelPulls();
  assertEquals(kept.length, FINISHED_PULLS_KEPT);
  // The newest are kept.
  assertOk(!kept.some((p) => p.commit === commit(4)));
  assertOk(kept.some((p) => p.commit === commit(FINISHED_PULLS_KEPT + 4)));
  const [newest] = pullViews(cp.state);
  assertEquals([newest.commit, newest.state], [commit(FINISHED_PULLS_KEPT + 4), "cancelled"]);
  assertEquals(newest.nodes[0].reason, OPERATOR_CANCEL_REASON);
  // A day on, the next finished pull takes the old ones with it.
  clock.advance(FINISHED_PULL_TTL_MS);
  await cp.state.locked(() => requestPull(cp.state, MODEL, COMMIT, ["n1"]));
  await cancelPull(cp.state, { pull: `${MODEL}@${COMMIT}` });
  assertEquals((await store.listModelPulls()).map((p) => p.commit), [COMMIT]);
  assertEquals(cp.state.modelPulls.size, 1);
  // With nothing finishing, a heartbeat a day later sweeps it too.
  clock.advance(FINISHED_PULL_TTL_MS);
  await heartbeat(cp, "n1", false);
  assertEquals(await store.listModelPulls(), []);
  assertEquals(cp.state.modelPulls.size, 0);
});

Deno.test("GET /v1/models/pulls lists them; POST /v1/models/pulls/cancel stops asking, naming what was wrong", async () => {
  const clock = new FakeClock();
  const cp = await openPlane(new MemoryStore(), clock);
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken("admin")],
    joinTokenHashes: [],
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: { authorization: "Bearer admin", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };
  for (const id of ["n1", "n2", "n3"]) await cp.nodes.register(registration(id), null);
  for (const id of ["n1", "n2", "n3"]) await heartbeat(cp, id, false);
  await cp.deployments.apply(DEPLOYMENT);
  await call("POST", "/v1/models/pull", { deployment: "qwen", nodes: ["n1", "n2"] });
  const id = `${MODEL}@${COMMIT}`;
  const listed = await call("GET", "/v1/models/pulls");
  assertEquals(listed.status, 200);
  assertEquals(listed.json.pulls.map((p: { id: string; state: string }) => [p.id, p.state]), [
    [id, "pulling"],
  ]);

  const one = await call("POST", "/v1/models/pulls/cancel", { pull: id, nodes: ["n2"] });
  assertEquals(one.status, 200, JSON.stringify(one.json));
  assertEquals(
    one.json.nodes.map((n: { node: string; state: string; reason: string | null }) => [
      n.node,
      n.state,
      n.reason,
    ]),
    [["n1", "requested", null], ["n2", "cancelled", "cancelled by an operator"]],
  );
  await cp.reconcile();
  assertEquals(await models(cp, "n2"), []);
  assertEquals(await models(cp, "n1"), PULLED);
  const events = await cp.events.list({ limit: 100 });
  assertOk(events.some((e) => e.kind === "model_pull_cancelled" && e.subject === "node/n2"));

  assertEquals([one.json.cancelled, one.json.unchanged], [["n2"], []]);

  // Bad input names what was wrong; nothing changes.
  const bad = await call("POST", "/v1/models/pulls/cancel", { pull: MODEL });
  assertEquals(bad.status, 400);
  assertOk(
    JSON.stringify(bad.json).includes("must be a pull, org/name@commit"),
    JSON.stringify(bad.json),
  );
  const tooShort = await call("POST", "/v1/models/pulls/cancel", { pull: `${MODEL}@4b1c2a` });
  assertEquals(tooShort.status, 400, "a prefix has 7 digits at least");
  const unknown = await call("POST", "/v1/models/pulls/cancel", {
    pull: `${MODEL}@${"f".repeat(40)}`,
  });
  assertEquals(unknown.status, 404);
  const unknownPrefix = await call("POST", "/v1/models/pulls/cancel", { pull: `${MODEL}@fffffff` });
  assertEquals(unknownPrefix.status, 404);
  const stranger = await call("POST", "/v1/models/pulls/cancel", { pull: id, nodes: ["n3"] });
  assertEquals(stranger.status, 404);
  assertOk(JSON.stringify(stranger.json).includes("node n3 (nodes[0]) was never asked"));
  // Naming only a node no longer asked: 409 saying so.
  const again = await call("POST", "/v1/models/pulls/cancel", { pull: id, nodes: ["n2"] });
  assertEquals(again.status, 409, JSON.stringify(again.json));
  assertEquals(
    again.json.error.message,
    `Cannot cancel pull ${id}: n2 was cancelled already (cancelled by an operator)`,
  );
  assertEquals(await models(cp, "n1"), PULLED);

  // The rest, by the short id llmgw models pulls shows: finished, cancelled, still listed;
  // n2, named too, is said to be cancelled already.
  const rest = await call("POST", "/v1/models/pulls/cancel", {
    pull: `${MODEL}@4b1c2a9`,
    nodes: ["n1", "n2"],
  });
  assertEquals([rest.status, rest.json.id, rest.json.state], [200, id, "cancelled"]);
  assertEquals([rest.json.cancelled, rest.json.unchanged], [
    ["n1"],
    ["n2 was cancelled already (cancelled by an operator)"],
  ]);
  assertEquals((await call("GET", "/v1/models/pulls")).json.pulls[0].finished_at, clock.now());
  const finished = await call("POST", "/v1/models/pulls/cancel", { pull: id });
  assertEquals(finished.status, 409);
  assertEquals(
    finished.json.error.message,
    `Cannot cancel pull ${id}: no node is asked for it any more`,
  );

  // A prefix two pulls of the model share is ambiguous: 409 naming both.
  const twin = "4b1c2a9" + "0".repeat(33);
  await cp.state.locked(() => requestPull(cp.state, MODEL, twin, ["n3"]));
  await cp.state.locked(() => requestPull(cp.state, MODEL, COMMIT, ["n3"]));
  const ambiguous = await call("POST", "/v1/models/pulls/cancel", { pull: `${MODEL}@4b1c2a9` });
  assertEquals(ambiguous.status, 409, JSON.stringify(ambiguous.json));
  assertStringIncludes(ambiguous.json.error.message, `${MODEL}@${twin}, ${id}`);
  const longer = await call("POST", "/v1/models/pulls/cancel", { pull: `${MODEL}@4b1c2a9d` });
  assertEquals([longer.status, longer.json.id], [200, id]);
});

Deno.test("a pull failed for good on a node: failed with the agent's words, one event, not asked again until pulled again; kept across a restart", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-pulls-" });
  const clock = new FakeClock();
  const gated: PullFailureReport = {
    repo: MODEL,
    commit: COMMIT,
    kind: "gated",
    message: `model ${MODEL} is gated: set HF_TOKEN to a token that was granted access`,
    at: 5,
  };
  const nodeStates = (cp: ControlPlane) =>
    pullViews(cp.state)[0].nodes.map((n) => [n.node, n.state, n.kind ?? null, n.reason]);
  const failedEvents = async (cp: ControlPlane) => {
    await cp.state.flushEvents();
    return (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "model_pull_failed");
  };
  try {
    let store = SqliteStore.open(`${dir}/llmgw.db`);
    let cp = await openPlane(store, clock);
    try {
      for (const id of ["n1", "n2"]) await cp.nodes.register(registration(id), null);
      for (const id of ["n1", "n2"]) await heartbeat(cp, id, false);
      await cp.deployments.apply(DEPLOYMENT);
      await pullDeploymentModel(cp.state, { deployment: "qwen" });
      clock.advance(1_000);
      // The agent sends it at every heartbeat until its desired state drops the pull.
      await heartbeat(cp, "n2", false, [gated]);
      await heartbeat(cp, "n2", false, [gated]);
      await cp.reconcile();
      assertEquals(await models(cp, "n2"), []);
      assertEquals(await models(cp, "n1"), PULLED);
      assertEquals(nodeStates(cp), [
        ["n1", "requested", null, null],
        ["n2", "failed", "gated", gated.message],
      ]);
      assertEquals(pullViews(cp.state)[0].state, "pulling");
      const [event, ...more] = await failedEvents(cp);
      assertEquals(more, [], "one event");
      assertEquals(event.subject, "node/n2");
      assertOk(event.message.includes("(gated): model Qwen/Qwen2.5-7B-Instruct is gated"));
    } finally {
      await cp.stop();
      store.close();
    }

    store = SqliteStore.open(`${dir}/llmgw.db`);
    cp = await openPlane(store, clock);
    try {
      // Restarted: still failed, still not asked; n1 still is.
      assertEquals(await models(cp, "n2"), []);
      assertEquals(await models(cp, "n1"), PULLED);
      assertEquals(nodeStates(cp)[1], ["n2", "failed", "gated", gated.message]);
      // n1 fails too: the pull is over, failed.
      await heartbeat(cp, "n1", false, [{ ...gated, kind: "revision_not_found" }]);
      const [over] = pullViews(cp.state);
      assertEquals([over.state, over.finished_at], ["failed", clock.now()]);
      // A rollout's pre-pull does not ask again what failed since it began...
      const since = clock.now();
      const quiet = await cp.state.locked(() =>
        requestPull(cp.state, MODEL, COMMIT, ["n1", "n2"], since)
      );
      assertEquals(quiet.requested, []);
      // ...an operator's pull does, from a clean slate.
      clock.advance(1_000);
      await heartbeat(cp, "n2", false); // restarted: not asked before its agent reports a cache
      const again = await pullDeploymentModel(cp.state, { deployment: "qwen", nodes: ["n2"] });
      assertEquals(again.requested, ["n2"]);
      await cp.reconcile();
      assertEquals(await models(cp, "n2"), PULLED);
      assertEquals(nodeStates(cp)[1], ["n2", "requested", null, null]);
      assertEquals((await failedEvents(cp)).length, 2);
    } finally {
      await cp.stop();
      store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A memory store whose pull writes fail while `failing` is set (PostgreSQL lost, leadership gone). */
class FlakyPullStore extends MemoryStore {
  failing = false;
  failingDeletes = false;
  override putModelPull(p: ModelPull): Promise<void> {
    return this.failing ? Promise.reject(new Error("connection lost")) : super.putModelPull(p);
  }
  override deleteModelPull(id: string): Promise<boolean> {
    return this.failingDeletes
      ? Promise.reject(new Error("connection lost"))
      : super.deleteModelPull(id);
  }
}

Deno.test("a finished pull the store will not delete stays till the next sweep; the cancel that set the sweep off still answers", async () => {
  const clock = new FakeClock();
  const store = new FlakyPullStore();
  const cp = await openPlane(store, clock);
  await cp.nodes.register(registration("n1"), null);
  await heartbeat(cp, "n1", false);
  const old = "0".repeat(40);
  await cp.state.locked(() => requestPull(cp.state, MODEL, old, ["n1"]));
  await cancelPull(cp.state, { pull: `${MODEL}@${old}` });
  clock.advance(FINISHED_PULL_TTL_MS + 1);
  await cp.state.locked(() => requestPull(cp.state, MODEL, COMMIT, ["n1"]));
  store.failingDeletes = true;
  const answer = await cancelPull(cp.state, { pull: `${MODEL}@${COMMIT}` });
  assertEquals(answer.cancelled, ["n1"]);
  // The old one is still listed, in memory as in the store: nothing disagrees.
  assertEquals(pullViews(cp.state).map((p) => p.commit).sort(), [old, COMMIT].sort());
  assertEquals((await store.listModelPulls()).length, 2);
  store.failingDeletes = false;
  clock.advance(FINISHED_PULL_TTL_MS + 1);
  await heartbeat(cp, "n1", false);
  assertEquals(cp.state.modelPulls.size, 0);
  assertEquals(await store.listModelPulls(), []);
});

Deno.test("a pull write the store refuses changes nothing in memory: request, cancel, fail, settle", async () => {
  const clock = new FakeClock();
  const store = new FlakyPullStore();
  const cp = await openPlane(store, clock);
  for (const id of ["n1", "n2"]) await cp.nodes.register(registration(id), null);
  for (const id of ["n1", "n2"]) await heartbeat(cp, id, false);
  await cp.deployments.apply(DEPLOYMENT);
  const id = `${MODEL}@${COMMIT}`;
  const states = () =>
    pullViews(cp.state).flatMap((p) => p.nodes.map((n) => `${n.node} ${n.state}`));
  const refused = async (what: string, f: () => Promise<unknown>) => {
    store.failing = true;
    const error = await f().then(() => null, (e: Error) => e.message);
    store.failing = false;
    assertEquals(error, "connection lost", what);
    await cp.reconcile();
  };

  await refused("request", () => pullDeploymentModel(cp.state, { deployment: "qwen" }));
  assertEquals([cp.state.modelPulls.size, await models(cp, "n1")], [0, []]);
  await pullDeploymentModel(cp.state, { deployment: "qwen" });
  await cp.reconcile();

  await refused("cancel", () => cancelPull(cp.state, { pull: id, nodes: ["n2"] }));
  assertEquals(states(), ["n1 requested", "n2 requested"]);
  assertEquals(await models(cp, "n2"), PULLED);

  const gated = { repo: MODEL, commit: COMMIT, kind: "gated", message: "gated", at: 1 };
  await refused("fail", () => heartbeat(cp, "n2", false, [gated]));
  assertEquals(states(), ["n1 requested", "n2 requested"]);
  assertEquals(await models(cp, "n2"), PULLED);

  await refused("settle", () => heartbeat(cp, "n1", true));
  assertEquals(states(), ["n1 requested", "n2 requested"]);
  assertEquals((await store.listModelPulls())[0].nodes.map((n) => n.state), [
    "requested",
    "requested",
  ]);

  // The store back, the same reports go through.
  await heartbeat(cp, "n1", true);
  await heartbeat(cp, "n2", false, [gated]);
  assertEquals(states(), ["n1 done", "n2 failed"]);
});

Deno.test("a node whose pull failed and that holds the revision later (a replica fetched it) is done", async () => {
  const clock = new FakeClock();
  const store = new MemoryStore();
  const cp = await openPlane(store, clock);
  await cp.nodes.register(registration("n1"), null);
  await heartbeat(cp, "n1", false);
  await cp.deployments.apply(DEPLOYMENT);
  await pullDeploymentModel(cp.state, { deployment: "qwen" });
  const failure = {
    repo: MODEL,
    commit: COMMIT,
    kind: "insufficient_disk",
    message: "full",
    at: 1,
  };
  await heartbeat(cp, "n1", false, [failure]);
  assertEquals(pullViews(cp.state)[0].state, "failed");
  clock.advance(5_000);
  await heartbeat(cp, "n1", true);
  const [pull] = pullViews(cp.state);
  assertEquals(pull.state, "done");
  assertEquals(pull.nodes, [{
    node: "n1",
    state: "done",
    requested_at: pull.created_at,
    finished_at: clock.now(),
    reason: null,
  }]);
  assertEquals((await store.listModelPulls())[0].nodes[0].state, "done");
  await cp.state.flushEvents();
  const pulled = (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "model_pulled");
  assertEquals(pulled.map((e) => e.message), [
    `holds ${MODEL}@4b1c2a9, fetched since its pull failed (by a replica)`,
  ]);
});

Deno.test("a failure the agent reports of an earlier request does not fail the operator's new one; an older agent's report still fails it", async () => {
  const clock = new FakeClock();
  const cp = await openPlane(new MemoryStore(), clock);
  try {
    await cp.nodes.register(registration("n1"), null);
    await heartbeat(cp, "n1", false);
    await cp.deployments.apply(DEPLOYMENT);
    const state = () => {
      const [n] = pullViews(cp.state)[0].nodes;
      return [n.state, n.reason];
    };
    const failedEvents = async () => {
      await cp.state.flushEvents();
      return (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "model_pull_failed");
    };
    const asked = async () => {
      await pullDeploymentModel(cp.state, { deployment: "qwen" });
      await cp.reconcile();
      const [at] = await requests(cp, "n1");
      return at!;
    };
    const first = await asked();
    assertEquals(first, clock.now());
    const gated = {
      repo: MODEL,
      commit: COMMIT,
      kind: "gated",
      message: "gated",
      at: 1,
      requested_at: first,
    };
    await heartbeat(cp, "n1", false, [gated]);
    assertEquals(state(), ["failed", "gated"]);
    // Pulled again in the same millisecond, before the agent saw its desired state drop the pull.
    const second = await asked();
    assertOk(second > first, "each request of a node has its own id");
    await heartbeat(cp, "n1", false, [gated]);
    assertEquals(state(), ["requested", null], "the stale report changed nothing");
    assertEquals((await failedEvents()).length, 1);
    await heartbeat(cp, "n1", false, [{ ...gated, message: "still gated", requested_at: second }]);
    assertEquals(state(), ["failed", "still gated"]);
    // An older agent names no request: its report applies to the one asked now.
    clock.advance(1_000);
    await asked();
    const { requested_at: _, ...older } = gated;
    await heartbeat(cp, "n1", false, [older]);
    assertEquals(state(), ["failed", "gated"]);
    assertEquals((await failedEvents()).length, 3);
  } finally {
    await cp.stop();
  }
});
