import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, reportAll, testControl } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { MAX_PERMANENT_FAILURES, RECONCILE_STEPS } from "./reconciler.ts";
import { MAX_REBUILDS_IN_A_ROW } from "./replica_failures.ts";

const ARG_FAILURE = {
  at: 1_700_000_000_001, // after the fake clock's start: not a predecessor's failure
  reason: "exited with code 2: the engine refused its arguments: unrecognized arguments: --x",
  exit_code: 2,
  signal: null,
  log_tail: ["usage: vllm serve", "vllm serve: error: unrecognized arguments: --x"],
  permanent: true,
};

Deno.test("a pass is one readable list of named steps", () => {
  assertEquals(RECONCILE_STEPS.map((s) => s.name), [
    "resolve_models",
    "refresh_liveness",
    "announce_ready",
    "rebuild_broken",
    "follow_replica_counts",
    "roll_out",
    "place_pending",
    "announce_drained",
    "sweep_pulls",
    "publish_desired",
    "record_last_seen",
  ]);
});

Deno.test("ports come from the agents: learned from reports, stored, read by views and endpoints", async () => {
  const { cp, store } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 2 });
  await cp.reconcile();
  // The control plane chooses no port: each launch leaves its own open.
  const desired = await cp.desired.wait("n1", -1, 0);
  assertEquals(desired.shards.map((s) => [s.launch.port, s.launch.world.leader_http_port]), [
    [null, null],
    [null, null],
  ]);
  assertEquals(cp.replicas().map((r) => r.shards.map((s) => s.port)), [[0], [0]]);
  await reportAll(cp, "n1", "ready", {}, 31_000);
  assertEquals(cp.replicas().map((r) => r.shards.map((s) => s.port)), [[31_000], [31_010]]);
  assertEquals((await store.listReplicas()).map((r) => r.placement?.ports.http), [
    { "qwen-r0.1/0": 31_000 },
    { "qwen-r1.1/0": 31_010 },
  ]);
  assertEquals(cp.readyEndpoints().map((e) => e.url), [
    "http://127.0.0.1:31000",
    "http://127.0.0.1:31010",
  ]);
  // Learning ports changes no desired state of a one-node replica: no restart.
  assertEquals((await cp.desired.wait("n1", -1, 0)).generation, desired.generation);
});

Deno.test("a multi-node replica's other ranks wait for rank 0's ports, then meet at them", async () => {
  const { cp } = await testControl();
  for (const id of ["h1", "h2"]) {
    // The recording was taken on a busy machine: idle its GPUs.
    const reg = registration(id, "dgx_h100_8x_nics");
    const gpus = reg.gpus.map((g) => ({
      ...g,
      memory_used_mb: 0,
      health: { ...g.health, problems: [] },
    }));
    await cp.nodes.register({ ...reg, gpus }, null);
  }
  await cp.deployments.apply({
    name: "big",
    model: "org/big",
    replicas: 1,
    profiles: [{
      name: "tp16",
      engine: "vllm",
      gpu_class: "h100-80g",
      tensor_parallel: 16,
      nodes: 2,
      gpus_per_node: 8,
    }],
  });
  await cp.reconcile();
  const [r] = cp.replicas();
  const leaderNode = r.shards.find((s) => s.rank === 0)!.node;
  const otherNode = r.shards.find((s) => s.rank === 1)!.node;
  assertEquals((await cp.desired.wait(otherNode, -1, 0)).shards, [], "rank 1 waits");
  const leader = await cp.desired.wait(leaderNode, -1, 0);
  assertEquals(leader.shards.map((s) => s.launch.rank), [0]);
  await reportAll(cp, leaderNode, "starting", {}, 24_000);
  const other = await cp.desired.wait(otherNode, -1, 0);
  assertEquals(other.shards.map((s) => [s.launch.rank, s.launch.world]), [[1, {
    nodes: 2,
    leader_addr: "127.0.0.1",
    rendezvous_port: 24_009,
    leader_http_port: 24_000,
  }]]);
  // Rank 0 relaunched elsewhere in its range: rank 1 follows.
  await reportAll(cp, leaderNode, "starting", {}, 25_000);
  assertEquals(
    (await cp.desired.wait(otherNode, -1, 0)).shards[0].launch.world.rendezvous_port,
    25_009,
  );
});

Deno.test("a permanent shard failure ends the replica failed after a bounded number of placements", async () => {
  const { cp, store } = await testControl();
  const nodes = ["n1", "n2", "n3", "n4"];
  await registerNodes(cp, nodes);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const refused: string[] = [];
  for (let attempt = 1; attempt <= MAX_PERMANENT_FAILURES; attempt++) {
    const [r] = cp.replicas();
    assertEquals(r.state, "starting", `attempt ${attempt}`);
    assertEquals(r.shards[0].shard_id, `qwen-r0.${attempt}/0`);
    // Each placement leaves out the nodes that refused it before.
    assertOk(!refused.includes(r.shards[0].node), `placed on ${r.shards[0].node} again`);
    refused.push(r.shards[0].node);
    await reportAll(cp, r.shards[0].node, "failed", { last_failure: ARG_FAILURE });
    await cp.reconcile();
  }
  const [failed] = cp.replicas();
  assertEquals(failed.state, "failed");
  assertEquals(failed.shards, []);
  assertEquals(failed.failure?.attempts, MAX_PERMANENT_FAILURES);
  assertStringIncludes(failed.failure!.reason, "unrecognized arguments: --x");
  assertEquals(failed.failure!.log_tail, ARG_FAILURE.log_tail);
  // Its GPUs are free and it is not placed again.
  assertEquals(cp.inventory.listNodes().flatMap((n) => n.allocations), []);
  await cp.reconcile();
  await cp.reconcile();
  assertEquals(cp.replicas()[0].state, "failed");
  for (const n of nodes) assertEquals((await cp.desired.wait(n, -1, 0)).shards, []);
  // The reason is in one event, not one per attempt.
  const events = await cp.events.list({ limit: 1000 });
  const withReason = events.filter((e) => e.message.includes("unrecognized arguments: --x"));
  assertEquals(withReason.map((e) => e.kind), ["replica_failed"]);
  assertStringIncludes(withReason[0].message, "vllm serve: error: unrecognized arguments");
  assertStringIncludes(withReason[0].message, `gave up after ${MAX_PERMANENT_FAILURES} placements`);
  assertEquals(events.filter((e) => e.kind === "shard_failed"), []);
  // The failure is stored: it survives a restart.
  assertEquals((await store.listReplicas())[0].failure?.attempts, MAX_PERMANENT_FAILURES);
  // A changed deployment tries again.
  await cp.deployments.apply({
    ...QWEN,
    replicas: 1,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--max-model-len", "4096"] }],
  });
  await cp.reconcile();
  const [retried] = cp.replicas();
  assertEquals(retried.state, "starting");
  assertEquals(retried.failure, null);
});

Deno.test("transient failures rebuild the replica; five in a row without becoming ready are a crash loop", async () => {
  const { cp, clock } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const fail = async () => {
    clock.advance(1_000);
    await reportAll(cp, "n1", "failed", {
      last_failure: {
        ...ARG_FAILURE,
        at: clock.now(),
        reason: "killed by signal 9 (SIGKILL)",
        permanent: false,
      },
    });
    await cp.reconcile();
  };
  for (let i = 1; i < MAX_REBUILDS_IN_A_ROW; i++) {
    await fail();
    assertEquals(cp.replicas()[0].state, "starting", `failure ${i}`);
    assertEquals(cp.replicas()[0].failure, null);
  }
  // Ready once: the count starts over.
  await reportAll(cp, "n1", "ready");
  await cp.reconcile();
  for (let i = 1; i < MAX_REBUILDS_IN_A_ROW; i++) {
    await fail();
    assertEquals(cp.replicas()[0].state, "starting", `failure ${i} after ready`);
  }
  await fail();
  const [r] = cp.replicas();
  assertEquals(r.state, "failed");
  assertStringIncludes(
    r.failure!.reason,
    `crash loop: the replica failed ${MAX_REBUILDS_IN_A_ROW} times in a row without becoming ready; ` +
      "last: killed by signal 9 (SIGKILL)",
  );
  const events = await cp.events.list({ limit: 1000 });
  assertEquals(
    events.filter((e) => e.kind === "shard_failed").length,
    2 * MAX_REBUILDS_IN_A_ROW - 1,
  );
  const rebuilding = events.filter((e) => e.kind === "replica_rebuilding");
  assertStringIncludes(rebuilding[0].message, "(failure 1 in a row; given up on n1 at 5)");
  assertStringIncludes(
    events.find((e) => e.kind === "replica_failed")!.message,
    "no node other than n1 fits",
  );
});

Deno.test("a replica that becomes ready forgets its permanent failures", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const first = cp.replicas()[0].shards[0].node;
  await reportAll(cp, first, "failed", { last_failure: ARG_FAILURE });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].failure?.attempts, 1);
  await reportAll(cp, cp.replicas()[0].shards[0].node, "ready");
  await cp.reconcile();
  assertEquals(cp.replicas()[0].state, "ready");
  assertEquals(cp.replicas()[0].failure, null);
});

Deno.test("a lost node's replicas are rebuilt on another node (fake clock)", async () => {
  const { cp, clock } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].shards[0].node, "n1");
  await registerNodes(cp, ["n2"]);
  clock.advance(cp.inventory.thresholds.lost_after_ms + 1);
  await reportAll(cp, "n2", "ready"); // n2 stays alive
  await cp.reconcile(); // n1 is lost: the replica is rebuilt
  await cp.reconcile(); // and placed on n2
  const [r] = cp.replicas();
  assertEquals(r.shards.map((s) => s.node), ["n2"]);
  const kinds = (await cp.events.list({ limit: 1000 })).map((e) => e.kind);
  assertOk(kinds.includes("node_lost"), kinds.join(", "));
  assertOk(kinds.includes("replica_rebuilding"), kinds.join(", "));
});

Deno.test("a replica refused for good on one node is placed on another first", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const first = cp.replicas()[0].shards[0].node;
  await reportAll(cp, first, "failed", { last_failure: ARG_FAILURE });
  await cp.reconcile();
  const [again] = cp.replicas();
  const second = again.shards[0].node;
  assertOk(second !== first, `placed on ${first} again`);
  assertStringIncludes(again.explanation!.summary, `refused there before: ${first}`);
  // Refused on both: no other node fits, so it fails now rather than bounce back.
  await reportAll(cp, second, "failed", { last_failure: ARG_FAILURE });
  await cp.reconcile();
  const [failed] = cp.replicas();
  assertEquals(failed.state, "failed");
  assertEquals(failed.failure?.attempts, 2);
  assertEquals(failed.failure?.nodes?.sort(), [first, second].sort());
  const events = await cp.events.list({ limit: 1000 });
  assertStringIncludes(
    events.find((e) => e.kind === "replica_failed")!.message,
    `no node other than ${[first, second].sort().join(", ")} fits`,
  );
});

const CRASH_LOOP = {
  at: 1_700_000_000_001,
  reason: "crash loop: failed 5 times in a row without staying ready; " +
    "not restarted on this node again; last: exited with code 1",
  exit_code: 1,
  signal: null,
  log_tail: ["ModuleNotFoundError: No module named 'sglang'"],
  permanent: true,
};

Deno.test("a crash-looping shard's replica moves off its node, or fails with the reason where nothing else fits", async () => {
  // Two nodes: it moves, leaving the looping node out.
  const two = await testControl();
  await registerNodes(two.cp, ["n1", "n2"]);
  await two.cp.deployments.apply({ ...QWEN, replicas: 1 });
  await two.cp.reconcile();
  const first = two.cp.replicas()[0].shards[0].node;
  await reportAll(two.cp, first, "failed", {
    last_failure: CRASH_LOOP,
    crash_loop: { failures: 5, limit: 5 },
  });
  await two.cp.reconcile();
  const [moved] = two.cp.replicas();
  assertEquals(moved.state, "starting");
  assertOk(moved.shards[0].node !== first, `placed on ${first} again`);
  const rebuilding = (await two.cp.events.list({ limit: 1000 })).find((e) =>
    e.kind === "replica_rebuilding"
  );
  assertStringIncludes(rebuilding!.message, `placing it on another node than ${first}`);

  // One node: failed at once with the reason, not pending, not placed there again.
  const one = await testControl();
  await registerNodes(one.cp, ["n1"]);
  await one.cp.deployments.apply({ ...QWEN, replicas: 1 });
  await one.cp.reconcile();
  await reportAll(one.cp, "n1", "failed", { last_failure: CRASH_LOOP });
  await one.cp.reconcile();
  await one.cp.reconcile();
  const [failed] = one.cp.replicas();
  assertEquals(failed.state, "failed");
  assertEquals(failed.shards, []);
  assertStringIncludes(failed.failure!.reason, "crash loop: failed 5 times in a row");
  assertEquals((await one.cp.desired.wait("n1", -1, 0)).shards, []);
  const events = await one.cp.events.list({ limit: 1000 });
  const gaveUp = events.filter((e) => e.kind === "replica_failed");
  assertEquals(gaveUp.length, 1);
  assertStringIncludes(gaveUp[0].message, "No module named 'sglang'");
  assertStringIncludes(gaveUp[0].message, "no node other than n1 fits");
  assertEquals(events.filter((e) => e.kind === "replica_placed").length, 1);
});

Deno.test("a pass builds one cluster index: drains, a rollout's surge and new replicas all place on it", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2", "n3"]);
  await cp.deployments.apply({ ...QWEN, replicas: 2 });
  await cp.reconcile();
  for (const n of ["n1", "n2", "n3"]) await reportAll(cp, n, "ready");
  await cp.reconcile();
  const held = new Set(cp.replicas().flatMap((r) => r.shards.map((s) => s.node)));
  const drained = [...held][0];
  await cp.nodes.setIntent(drained, "draining");
  await cp.deployments.apply({
    ...QWEN,
    replicas: 3,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--max-model-len", "4096"] }],
  });
  const inventory = cp.state.inventory;
  const snapshot = inventory.snapshot.bind(inventory);
  let built = 0;
  inventory.snapshot = () => {
    built++;
    return snapshot();
  };
  await cp.reconcile();
  assertEquals(built, 1);
  const placed = (await cp.events.list({ limit: 1000 })).filter((e) => e.kind === "replica_placed");
  // Two replacements started off the draining node, the rollout's surge, the new index.
  assertOk(placed.length >= 3, placed.map((e) => e.subject).join(", "));
  for (const r of cp.replicas()) {
    if (r.shards.length === 0) continue;
    // Replacements and new replicas leave the draining node alone.
    if (/-v\d+|-r2$/.test(r.id)) {
      assertOk(r.shards.every((s) => s.node !== drained), `${r.id} on ${drained}`);
    }
  }
});
