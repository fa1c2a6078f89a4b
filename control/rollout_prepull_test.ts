/**
 * A rollout to a new model revision pre-pulls it (issue #25 item 5): the
 * old replicas' nodes are asked to fetch it before any replica stops; the
 * rollout waits until they report it held, or until its progress deadline,
 * and says so in its status; a node whose agent reports no cache, whose
 * pull failed for good during the rollout, or whose pull an operator
 * cancelled, is not waited for (nor asked again); a rollout that keeps the
 * model does not pre-pull.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, reportAll, testControl } from "../tests/control_fixture.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import type { ControlPlane } from "./control_plane.ts";
import { DEFAULT_PROGRESS_DEADLINE_SECONDS } from "./rollout_revisions.ts";
import { cancelPull } from "./model_pull_cancel.ts";
import { prepullStatus } from "./rollout_prepull.ts";
import { rolloutStatus } from "./rollout_status.ts";

const OLD = "1111111111111111111111111111111111111111";
const NEW = "2222222222222222222222222222222222222222";

function cache(...commits: string[]): ModelCacheReport {
  return {
    room_bytes: 100 * 2 ** 30,
    revisions: commits.map((commit) => ({
      repo: QWEN.model,
      commit,
      bytes: 1000,
      state: "complete" as const,
      bytes_done: 1000,
      last_used: null,
      pinned: false,
    })),
    omitted: 0,
    evicted: [],
  };
}

async function running(reportsCache = true) {
  const t = await testControl({
    commits: { resolveCommit: (_repo, revision) => Promise.resolve(revision === "v2" ? NEW : OLD) },
  });
  await registerNodes(t.cp, ["n1"]);
  if (reportsCache) {
    await t.cp.nodes.heartbeat({
      node_id: "n1",
      generation: 0,
      shards: [],
      model_cache: cache(OLD),
    });
  }
  await t.cp.deployments.apply({ ...QWEN, replicas: 2 });
  await t.cp.reconcile();
  await reportAll(t.cp, "n1", "ready");
  await t.cp.reconcile();
  assertEquals(t.cp.replicas().filter((r) => r.state === "ready").length, 2);
  return t;
}

const kinds = async (cp: ControlPlane) =>
  (await cp.events.list({ limit: 1000 })).map((e) => e.kind);
const ids = (cp: ControlPlane) => cp.replicas().map((r) => `${r.id}@${r.revision}`).sort();

Deno.test("a new model revision is fetched onto the old replicas' nodes before any replica stops", async () => {
  const { cp, clock } = await running();
  const before = ids(cp);
  await cp.deployments.apply({ ...QWEN, replicas: 2, revision: "v2" });
  for (let i = 0; i < 3; i++) {
    await cp.reconcile();
    await reportAll(cp, "n1", "ready");
  }
  assertEquals(ids(cp), before, "nothing started or stopped while it is fetched");
  assertEquals((await cp.desired.wait("n1", -1, 0)).models, [
    // The clock has not moved: the request is asked now.
    { model: QWEN.model, commit: NEW, pinned: false, pull: true, requested_at: clock.now() },
  ]);
  const status = rolloutStatus(cp.state, "qwen");
  assertEquals([status.prepull?.commit, status.prepull?.nodes, status.prepull?.held], [
    NEW,
    ["n1"],
    [],
  ]);
  assertOk((await kinds(cp)).includes("rollout_prepull"));
  // Held: the rollout takes its first step.
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: cache(OLD, NEW),
  });
  await cp.reconcile();
  assertEquals(rolloutStatus(cp.state, "qwen").prepull, null);
  assertOk(ids(cp).length > 2 || ids(cp).join() !== before.join(), ids(cp).join(" "));
  const events = await cp.events.list({ limit: 1000 });
  const ended = events.find((e) => e.kind === "rollout_prepulled")!;
  assertStringIncludes(ended.message, "n1 hold Qwen/Qwen2.5-7B-Instruct@2222222");
  assertOk(events.some((e) => e.kind === "rollout_step"));
});

Deno.test("the pre-pull gives up at the progress deadline; the rollout goes on with a fresh deadline", async () => {
  const { cp, clock } = await running();
  await cp.deployments.apply({ ...QWEN, replicas: 2, revision: "v2" });
  await cp.reconcile();
  const before = ids(cp);
  // Heartbeats go on (the node stays ready), the new revision never arrives.
  for (let s = 0; s < DEFAULT_PROGRESS_DEADLINE_SECONDS; s += 10) {
    clock.advance(10_000);
    await reportAll(cp, "n1", "ready");
    await cp.reconcile();
    if (ids(cp).join() !== before.join()) break;
  }
  const ended = (await cp.events.list({ limit: 1000 })).find((e) =>
    e.kind === "rollout_prepulled"
  )!;
  assertStringIncludes(ended.message, "still without");
  assertOk(ids(cp).join() !== before.join(), "a step began");
  assertEquals((await kinds(cp)).includes("rollout_failed"), false);
});

Deno.test("a pull failed for good ends the wait at once, and the rollout does not ask that node again", async () => {
  const { cp } = await running();
  const before = ids(cp);
  await cp.deployments.apply({ ...QWEN, replicas: 2, revision: "v2" });
  await cp.reconcile();
  assertEquals(ids(cp), before, "waiting");
  const failure = { repo: QWEN.model, commit: NEW, kind: "gated", message: "gated", at: 1 };
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: 0,
    shards: [],
    model_cache: { ...cache(OLD), pulls_failed: [failure] },
  });
  await cp.reconcile();
  assertEquals(rolloutStatus(cp.state, "qwen").prepull, null, "not waited for");
  const ended = (await cp.events.list({ limit: 1000 })).find((e) =>
    e.kind === "rollout_prepulled"
  )!;
  assertStringIncludes(ended.message, "n1 failed to pull Qwen/Qwen2.5-7B-Instruct@2222222");
  assertOk(ids(cp).join() !== before.join(), "a step began");
  assertEquals((await cp.desired.wait("n1", -1, 0)).models ?? [], [], "not asked again");
});

Deno.test("an operator's cancel of the pre-pull sticks: the node is not asked again nor waited for", async () => {
  const { cp } = await running();
  const before = ids(cp);
  await cp.deployments.apply({ ...QWEN, replicas: 2, revision: "v2" });
  await cp.reconcile();
  assertEquals(ids(cp), before, "waiting");
  const d = cp.state.deployments.get("qwen")!;
  assertEquals(prepullStatus(cp.state, d)?.cancelled, []);
  const answer = await cancelPull(cp.state, { pull: `${QWEN.model}@${NEW}` });
  assertEquals(answer.cancelled, ["n1"]);
  assertEquals(prepullStatus(cp.state, d)?.cancelled, ["n1"]);
  for (let i = 0; i < 3; i++) {
    await cp.reconcile();
    await reportAll(cp, "n1", "ready");
  }
  assertEquals((await cp.desired.wait("n1", -1, 0)).models ?? [], [], "not asked again");
  assertEquals(
    cp.state.modelPulls.get(`${QWEN.model}@${NEW}`)?.nodes.map((n) => n.state),
    ["cancelled"],
  );
  assertEquals(rolloutStatus(cp.state, "qwen").prepull, null, "not waited for");
  const ended = (await cp.events.list({ limit: 1000 })).find((e) =>
    e.kind === "rollout_prepulled"
  )!;
  assertStringIncludes(
    ended.message,
    "n1: the pull of Qwen/Qwen2.5-7B-Instruct@2222222 was cancelled by an operator",
  );
  assertOk(ids(cp).join() !== before.join(), "a step began");
});

Deno.test("no pre-pull: agents that report no cache, or a rollout that keeps the model revision", async () => {
  const old = await running(false);
  await old.cp.deployments.apply({ ...QWEN, replicas: 2, revision: "v2" });
  await old.cp.reconcile();
  assertEquals((await kinds(old.cp)).includes("rollout_prepull"), false);
  const same = await running();
  await same.cp.deployments.apply({
    ...QWEN,
    replicas: 2,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--max-model-len", "8192"] }],
  });
  await same.cp.reconcile();
  assertEquals((await kinds(same.cp)).includes("rollout_prepull"), false);
  assertEquals(rolloutStatus(same.cp.state, "qwen").prepull, null);
});
