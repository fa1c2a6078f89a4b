import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, shardReport, testControl, thrown } from "../tests/control_fixture.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import type { ControlPlane } from "./control_plane.ts";
import { ConflictError, NotFoundError } from "./errors.ts";
import { MAX_PERMANENT_FAILURES } from "./reconciler.ts";
import { DEFAULT_PROGRESS_DEADLINE_SECONDS } from "./rollout_revisions.ts";
import { rolloutStatus } from "./rollout_status.ts";

const REFUSED = {
  at: 1_700_000_000_001,
  reason: "exited with code 2: the engine refused its arguments: unrecognized arguments: --typo",
  exit_code: 2,
  signal: null,
  log_tail: ["vllm serve: error: unrecognized arguments: --typo"],
  permanent: true,
};

/** QWEN with other engine arguments: a new revision. */
function qwenWith(args: string[], replicas = 2) {
  return { ...QWEN, replicas, profiles: [{ ...QWEN.profiles[0], engine_args: args }] };
}

/**
 * One heartbeat from `node` reporting each shard of its desired state in the
 * state `stateOf` gives it by replica id (default ready).
 */
async function report(
  cp: ControlPlane,
  node: string,
  stateOf: (replica: string) => ShardReport["state"] = () => "ready",
  extra: Partial<ShardReport> = {},
): Promise<void> {
  const desired = await cp.desired.wait(node, -1, 0);
  await cp.nodes.heartbeat({
    node_id: node,
    generation: desired.generation,
    shards: desired.shards.map((s, i) =>
      shardReport(s.id, stateOf(s.id.split(".")[0]), { port: 20_000 + 10 * i, ...extra })
    ),
  });
}

/** Replica ids with their revision and state, by id. */
function replicas(cp: ControlPlane): string[] {
  return cp.replicas().map((r) => `${r.id}@${r.revision}:${r.state}`).sort();
}

/** Runs passes, reporting every shard ready on `nodes` before each, until `done`. */
async function settle(cp: ControlPlane, nodes: string[], done: () => boolean): Promise<void> {
  for (let i = 0; i < 40 && !done(); i++) {
    for (const n of nodes) await report(cp, n);
    await cp.reconcile();
  }
  assertOk(done(), `not settled: ${replicas(cp).join(" ")}`);
}

async function kinds(cp: ControlPlane): Promise<string[]> {
  return (await cp.events.list({ limit: 1000 })).map((e) => e.kind);
}

async function readyPair(
  retireGraceMs = 0,
): Promise<Awaited<ReturnType<typeof testControl>>> {
  const t = await testControl({ retireGraceMs });
  await registerNodes(t.cp, ["n1"]);
  await t.cp.deployments.apply({ ...QWEN, replicas: 2 });
  await t.cp.reconcile();
  await settle(t.cp, ["n1"], () => cp2Ready(t.cp));
  return t;
}

function cp2Ready(cp: ControlPlane): boolean {
  return cp.replicas().length === 2 && cp.replicas().every((r) => r.state === "ready");
}

Deno.test("a changed spec rolls out with surge 1: each new replica ready before its old one goes", async () => {
  const { cp, store } = await readyPair();
  assertEquals(replicas(cp), ["qwen-r0@1:ready", "qwen-r1@1:ready"]);
  await cp.deployments.apply(qwenWith(["--max-model-len", "4096"]));
  assertEquals(cp.deployments.get("qwen").revision, 2);
  await cp.reconcile();
  // Free GPUs on n1 (8, 4 used): the replacement starts beside the old one.
  assertEquals(replicas(cp), ["qwen-r0-v2@2:starting", "qwen-r0@1:ready", "qwen-r1@1:ready"]);
  await cp.reconcile();
  assertEquals(replicas(cp).length, 3, "nothing moves while the new one is not ready");
  await report(cp, "n1");
  await cp.reconcile();
  assertEquals(replicas(cp), ["qwen-r0-v2@2:ready", "qwen-r1@1:ready"]);
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  assertEquals(replicas(cp), ["qwen-r0-v2@2:ready", "qwen-r1-v2@2:ready"]);
  const all = await kinds(cp);
  assertEquals(all.filter((k) => k.startsWith("rollout_")), [
    "rollout_started",
    "rollout_step",
    "rollout_step",
    "rollout_complete",
  ]);
  // One replica_ready per placement: two first, two new, none on later heartbeats.
  assertEquals(all.filter((k) => k === "replica_ready").length, 4);
  const history = cp.deployments.revisions("qwen");
  assertEquals(history.map((h) => [h.revision, h.outcome]), [[1, "complete"], [2, "complete"]]);
  assertEquals(history[1].spec.profiles[0].engine_args, ["--max-model-len", "4096"]);
  // The new replicas run their revision's spec, the store holds it all.
  const r0 = cp.state.replicas.get("qwen-r0-v2")!;
  assertEquals(cp.state.specOf(r0)?.profiles[0].engine_args, ["--max-model-len", "4096"]);
  const [stored] = await store.listDeployments();
  assertEquals([stored.revision, stored.rollout, stored.history?.length], [2, null, 2]);
  assertEquals((await store.listReplicas()).map((r) => r.revision), [2, 2]);
});

Deno.test("changing only the replica count makes no revision and restarts nothing", async () => {
  const { cp } = await readyPair();
  const shards = cp.replicas().map((r) => r.shards[0].shard_id);
  await cp.deployments.scale("qwen", 3);
  await cp.deployments.apply({ ...QWEN, replicas: 4 });
  await cp.deployments.apply({ ...QWEN, replicas: 3, rollout: { progress_deadline_seconds: 60 } });
  await settle(
    cp,
    ["n1"],
    () => cp.replicas().length === 3 && cp.replicas().every((r) => r.state === "ready"),
  );
  const d = cp.deployments.get("qwen");
  assertEquals([d.revision, d.rollout, d.spec.replicas], [1, null, 3]);
  assertEquals(cp.replicas().slice(0, 2).map((r) => r.shards[0].shard_id), shards);
  const all = await kinds(cp);
  assertEquals(all.filter((k) => k.startsWith("rollout_") || k === "replica_rebuilding"), []);
  assertEquals(replicas(cp), ["qwen-r0@1:ready", "qwen-r1@1:ready", "qwen-r2@1:ready"]);
});

Deno.test("without free capacity, one replica is rebuilt in place at a time", async () => {
  const { cp } = await testControl({ retireGraceMs: 0 });
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 4 }); // 4 × TP2 fills the 8 GPUs
  await cp.reconcile();
  await settle(cp, ["n1"], () => cp.replicas().every((r) => r.state === "ready"));
  await cp.deployments.apply(qwenWith(["--enforce-eager"], 4));
  let lowest = 4;
  for (let i = 0; i < 40 && cp.deployments.get("qwen").rollout !== null; i++) {
    await cp.reconcile();
    const ready = cp.replicas().filter((r) => r.state === "ready").length;
    lowest = Math.min(lowest, ready);
    assertOk(cp.replicas().length <= 4, "no surge without capacity");
    await report(cp, "n1");
  }
  assertEquals(cp.deployments.get("qwen").rollout, null);
  assertEquals(lowest, 3, "max unavailable 1");
  assertEquals(replicas(cp), [
    "qwen-r0@2:ready",
    "qwen-r1@2:ready",
    "qwen-r2@2:ready",
    "qwen-r3@2:ready",
  ]);
  const steps = (await cp.events.list({ limit: 1000 })).filter((e) => e.kind === "rollout_step");
  assertEquals(steps.length, 4);
  assertStringIncludes(steps[0].message, "in place");
});

Deno.test("a new revision whose engine refuses its arguments fails and reverts; the old replicas never restart", async () => {
  const { cp } = await readyPair();
  const before = cp.replicas().map((r) => r.shards[0].shard_id);
  await cp.deployments.apply(qwenWith(["--typo"]));
  await cp.reconcile();
  for (let i = 0; i < MAX_PERMANENT_FAILURES; i++) {
    // The refusal is the new replica's alone.
    const desired = await cp.desired.wait("n1", -1, 0);
    await cp.nodes.heartbeat({
      node_id: "n1",
      generation: desired.generation,
      shards: desired.shards.map((s, k) =>
        s.id.startsWith("qwen-r0-v2")
          ? shardReport(s.id, "failed", { port: 20_000 + 10 * k, last_failure: REFUSED })
          : shardReport(s.id, "ready", { port: 20_000 + 10 * k })
      ),
    });
    await cp.reconcile();
  }
  const d = cp.deployments.get("qwen");
  assertEquals(d.revision, 3);
  assertEquals(d.spec.profiles[0].engine_args, []);
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  // The old replicas joined revision 3 in place: same shards, never restarted.
  assertEquals(replicas(cp), ["qwen-r0@3:ready", "qwen-r1@3:ready"]);
  assertEquals(cp.replicas().map((r) => r.shards[0].shard_id), before);
  const events = await cp.events.list({ limit: 1000 });
  const rollout = events.filter((e) => e.kind.startsWith("rollout_"));
  assertEquals(rollout.map((e) => e.kind), [
    "rollout_started",
    "rollout_step",
    "rollout_failed",
    "rollout_reverted",
    "rollout_complete",
  ]);
  assertStringIncludes(rollout[2].message, "unrecognized arguments: --typo");
  assertStringIncludes(rollout[3].message, "revision 1's spec is back as revision 3");
  assertEquals(
    cp.deployments.revisions("qwen").map((h) => [h.revision, h.cause, h.outcome]),
    [[1, "apply", "complete"], [2, "apply", "failed"], [3, "revert", "complete"]],
  );
});

Deno.test("a new replica not ready within the progress deadline fails the rollout and reverts", async () => {
  const { cp, clock } = await readyPair();
  await cp.deployments.apply({
    ...qwenWith(["--slow"]),
    rollout: { progress_deadline_seconds: 30 },
  });
  await cp.reconcile();
  await report(cp, "n1", (id) => id === "qwen-r0-v2" ? "loading" : "ready");
  clock.advance(29_000);
  await cp.reconcile();
  assertEquals(cp.deployments.get("qwen").revision, 2, "within the deadline");
  clock.advance(2_000);
  await cp.reconcile();
  const d = cp.deployments.get("qwen");
  assertEquals([d.revision, d.rollout?.fallback], [3, null]);
  const failed = (await cp.events.list({ limit: 1000 })).find((e) => e.kind === "rollout_failed");
  assertStringIncludes(failed!.message, "qwen-r0-v2 not ready within the 30 s progress deadline");
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  assertEquals(replicas(cp), ["qwen-r0@3:ready", "qwen-r1@3:ready"]);
  assertEquals(DEFAULT_PROGRESS_DEADLINE_SECONDS, 600);
});

Deno.test("rollout undo: a new revision with an older spec; clear refusals", async () => {
  const { cp } = await readyPair();
  const undo = (to?: number) => cp.deployments.undo("qwen", to);
  assertOk((await thrown(undo())) instanceof ConflictError, "no history to undo to");
  await cp.deployments.apply(qwenWith(["--enforce-eager"]));
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  const unknown = await thrown(undo(7));
  assertOk(unknown instanceof NotFoundError);
  assertStringIncludes((unknown as Error).message, "no revision 7 in its history (it has 1, 2)");
  assertOk((await thrown(undo(2))) instanceof ConflictError, "already there");
  assertOk((await thrown(cp.deployments.undo("nope"))) instanceof NotFoundError);
  const undone = await undo();
  assertEquals([undone.revision, undone.spec.profiles[0].engine_args], [3, []]);
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  assertEquals(replicas(cp), ["qwen-r0-v3@3:ready", "qwen-r1-v3@3:ready"]);
  const [, , third] = cp.deployments.revisions("qwen");
  assertEquals([third.cause, third.from_revision, third.outcome], ["undo", 1, "complete"]);
  // Undo again: back to revision 2's spec, as revision 4.
  assertEquals((await undo()).spec.profiles[0].engine_args, ["--enforce-eager"]);
});

Deno.test("the rollout status counts replicas by revision while a step runs", async () => {
  const { cp } = await readyPair();
  await cp.deployments.apply(qwenWith(["--enforce-eager"]));
  await cp.reconcile();
  const s = rolloutStatus(cp.state, "qwen");
  assertEquals([s.revision, s.state, s.desired, s.ready, s.updated], [2, "progressing", 2, 2, 1]);
  assertEquals(s.replicas_by_revision, [
    { revision: 1, replicas: 2, ready: 2 },
    { revision: 2, replicas: 1, ready: 0 },
  ]);
  assertEquals(s.rollout?.step?.by, "qwen-r0-v2");
  assertEquals(s.rollout?.deadline_at, s.rollout!.progress_at + 600_000);
  await settle(cp, ["n1"], () => cp.deployments.get("qwen").rollout === null);
  assertEquals(rolloutStatus(cp.state, "qwen").state, "complete");
});

Deno.test("drain with free capacity: the replacement is ready before the original stops", async () => {
  const { cp } = await testControl({ retireGraceMs: 0 });
  await registerNodes(cp, ["n1", "n2"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  await settle(cp, ["n1", "n2"], () => cp.replicas()[0]?.state === "ready");
  const first = cp.replicas()[0].shards[0].node;
  const other = first === "n1" ? "n2" : "n1";
  await cp.nodes.setIntent(first, "draining");
  await cp.reconcile();
  assertEquals(replicas(cp), ["qwen-r0-v1@1:starting", "qwen-r0@1:ready"]);
  assertEquals(cp.state.replicas.get("qwen-r0-v1")!.placement!.shards[0].node, other);
  await cp.reconcile();
  assertEquals(replicas(cp).length, 2, "the original serves until its replacement is ready");
  await report(cp, other);
  await cp.reconcile();
  assertEquals(replicas(cp), ["qwen-r0-v1@1:ready"]);
  await cp.reconcile();
  assertOk((await kinds(cp)).includes("node_drained"));
});

Deno.test("drain without free capacity rebuilds at once; a lost node's replica is rebuilt at once", async () => {
  const { cp, clock } = await testControl({ retireGraceMs: 0 });
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  await settle(cp, ["n1"], () => cp.replicas()[0]?.state === "ready");
  await cp.nodes.setIntent("n1", "draining");
  await cp.reconcile();
  assertEquals(replicas(cp), ["qwen-r0@1:pending"]);
  await cp.nodes.setIntent("n1", "none");
  await registerNodes(cp, ["n2"]);
  await settle(cp, ["n1", "n2"], () => cp.replicas()[0]?.state === "ready");
  const on = cp.replicas()[0].shards[0].node;
  clock.advance(cp.inventory.thresholds.lost_after_ms + 1);
  for (const n of ["n1", "n2"]) if (n !== on) await report(cp, n);
  await cp.reconcile();
  assertEquals(cp.replicas().map((r) => r.id), ["qwen-r0"], "no replacement first on a lost node");
  assertOk(cp.replicas()[0].shards.every((s) => s.node !== on));
});

Deno.test("a ready replica being replaced leaves the endpoints for the grace before it stops", async () => {
  const { cp, clock } = await readyPair(5_000);
  const endpoints = () => cp.readyEndpoints().map((e) => e.replica_id).sort();
  await cp.deployments.apply(qwenWith(["--enforce-eager"]));
  await cp.reconcile();
  await report(cp, "n1");
  await cp.reconcile();
  // The new one is ready: the old one leaves the endpoints but still runs.
  assertEquals(endpoints(), ["qwen-r0-v2", "qwen-r1"]);
  assertEquals(replicas(cp), ["qwen-r0-v2@2:ready", "qwen-r0@1:ready", "qwen-r1@1:ready"]);
  assertOk(cp.replicas().find((r) => r.id === "qwen-r0")!.retiring_at !== null);
  clock.advance(4_999);
  await cp.reconcile();
  assertEquals(replicas(cp).length, 3, "within the grace");
  clock.advance(1);
  await cp.reconcile();
  assertEquals(replicas(cp), ["qwen-r0-v2@2:ready", "qwen-r1@1:ready"]);
});

Deno.test("without free capacity, the replica taken down leaves the endpoints first", async () => {
  const { cp, clock } = await testControl({ retireGraceMs: 5_000 });
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 4 });
  await cp.reconcile();
  await settle(cp, ["n1"], () => cp.replicas().every((r) => r.state === "ready"));
  await cp.deployments.apply(qwenWith(["--enforce-eager"], 4));
  await cp.reconcile();
  assertEquals(cp.readyEndpoints().length, 3);
  assertEquals(cp.replicas().filter((r) => r.state === "ready").length, 4, "still running");
  const steps = (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "rollout_step");
  assertEquals(steps.length, 1);
  clock.advance(5_000);
  await cp.reconcile();
  assertEquals(replicas(cp)[0], "qwen-r0@2:starting");
  assertEquals(
    (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "rollout_step").length,
    1,
    "one event per step",
  );
});

Deno.test("a revert takes a replica on its way out back into the endpoints", async () => {
  const { cp, clock } = await readyPair(5_000);
  await cp.deployments.apply(qwenWith(["--enforce-eager"]));
  await cp.reconcile();
  await report(cp, "n1");
  await cp.reconcile();
  assertEquals(cp.readyEndpoints().map((e) => e.replica_id).sort(), ["qwen-r0-v2", "qwen-r1"]);
  // Undo before the grace ends: qwen-r0 runs revision 1's spec, the one coming back.
  clock.advance(1_000);
  await cp.deployments.undo("qwen");
  await cp.reconcile();
  assertEquals(cp.state.replicas.get("qwen-r0")!.revision, 3);
  assertOk(cp.readyEndpoints().some((e) => e.replica_id === "qwen-r0"));
});
