/**
 * A model cache out of disk (issue #25 item 8): the shard's failure, of kind
 * `insufficient_disk`, releases the placement and puts the replica back to
 * pending with the reason; placement then weighs every node's reported cache
 * room, so the replica waits while none has room and is placed once one
 * does. Never failed, never counted towards the rebuild or refusal bounds.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, shardReport, testControl } from "../tests/control_fixture.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import type { ControlPlane } from "./control_plane.ts";
import { MAX_PERMANENT_FAILURES, MAX_REBUILDS_IN_A_ROW } from "./replica_failures.ts";
import { DISK_FULL_BACKOFF } from "./disk_full_backoff.ts";
import { liveExplanation } from "./live_explanation.ts";
import { backoffDelay } from "../supervisor/backoff.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
const GIB = 2 ** 30;
const facts = fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]);

/**
 * The agent's report of a fetch that ran out of disk midway (agent/model_fetch.ts; the words
 * are InsufficientDiskError's, agent/model_cache/disk_space.ts).
 */
const DISK_FULL = {
  at: 1_700_000_000_001,
  reason: `Cannot fetch ${QWEN.model}@${COMMIT} into /var/lib/llmgw/models: ` +
    "needs 14.2 GiB more, 1.0 GiB free (insufficient_disk)",
  exit_code: null,
  signal: null,
  log_tail: [],
  permanent: true,
  kind: "insufficient_disk",
};

async function cluster(nodes: string[]) {
  const t = await testControl({
    modelFacts: { facts: () => Promise.resolve(facts) },
    commits: { resolveCommit: () => Promise.resolve(COMMIT) },
  });
  await registerNodes(t.cp, nodes);
  return t;
}

/** A heartbeat of `node` with its cache's room; its shards in `state`, with `extra`. */
async function heartbeat(
  cp: ControlPlane,
  node: string,
  roomGiB: number,
  state: "failed" | null = null,
): Promise<void> {
  const desired = await cp.desired.wait(node, -1, 0);
  await cp.nodes.heartbeat({
    node_id: node,
    generation: desired.generation,
    shards: state === null
      ? []
      : desired.shards.map((s) => shardReport(s.id, state, { last_failure: DISK_FULL })),
    model_cache: { room_bytes: roomGiB * GIB, revisions: [], omitted: 0, evicted: [] },
  });
}

Deno.test("disk full: back to pending with the reason, waits while no node has room, placed once one does", async () => {
  const { cp } = await cluster(["n1", "n2"]);
  await heartbeat(cp, "n1", 100);
  await heartbeat(cp, "n2", 1);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].shards.map((s) => s.node), ["n1"]);

  // The download filled n1's disk; the same heartbeat says how little room is left.
  await heartbeat(cp, "n1", 1, "failed");
  await cp.reconcile();
  const [pending] = cp.replicas();
  assertEquals(pending.state, "pending");
  assertEquals(pending.shards, []);
  assertStringIncludes(pending.explanation?.summary ?? "", "2 too little model cache room");
  const events = await cp.events.list({ limit: 1000 });
  const rebuilt = events.find((e) => e.kind === "replica_rebuilding");
  assertStringIncludes(rebuilt!.message, "ran out of disk fetching the model");
  assertStringIncludes(rebuilt!.message, "needs 14.2 GiB more, 1.0 GiB free (insufficient_disk)");

  // Passes go by: it waits, never failed, nothing counted.
  for (let i = 0; i < MAX_REBUILDS_IN_A_ROW + 1; i++) await cp.reconcile();
  assertEquals(cp.replicas()[0].state, "pending");
  assertEquals(cp.state.replicas.get(pending.id)!.failure ?? null, null);
  assertOk(!(await cp.events.list({ limit: 1000 })).some((e) => e.kind === "replica_failed"));

  // n1 evicted something: room again, and the node it failed on is not left out.
  await heartbeat(cp, "n1", 100);
  await cp.reconcile();
  const [placed] = cp.replicas();
  assertEquals(placed.state === "pending", false);
  assertEquals(placed.shards.map((s) => s.node), ["n1"]);
});

Deno.test("disk full again and again is never a crash loop or a refusal: no failed state, no count", async () => {
  const { cp, clock } = await cluster(["n1"]);
  await heartbeat(cp, "n1", 100);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const rounds = Math.max(MAX_PERMANENT_FAILURES, MAX_REBUILDS_IN_A_ROW) + 1;
  for (let i = 0; i < rounds; i++) {
    assertEquals(cp.replicas()[0].shards.map((s) => s.node), ["n1"], `round ${i}`);
    // The room reported with the failure still looks enough (another writer filled the disk).
    await heartbeat(cp, "n1", 100, "failed");
    await cp.reconcile();
    // Past the node's backoff for the revision: it is tried there again.
    clock.advance(DISK_FULL_BACKOFF.maxMs);
    await heartbeat(cp, "n1", 100);
    await cp.reconcile();
  }
  const [r] = cp.replicas();
  assertEquals(r.shards.map((s) => s.node), ["n1"]);
  assertEquals(cp.state.replicas.get(r.id)!.failure ?? null, null);
  const kinds = (await cp.events.list({ limit: 1000 })).map((e) => e.kind);
  assertEquals(kinds.filter((k) => k === "replica_rebuilding").length, rounds);
  assertOk(!kinds.includes("replica_failed"));
});

/** Placements in `horizonMs` of a node that fails at once every time, waiting out each backoff. */
function boundedPlacements(horizonMs: number, roundMs: number): number {
  let at = 0;
  let n = 0;
  while (at <= horizonMs) {
    n++;
    // The next try comes at the first round at or after the backoff's end.
    at += Math.ceil(backoffDelay(n, DISK_FULL_BACKOFF) / roundMs) * roundMs + roundMs;
  }
  return n;
}

Deno.test("a node that keeps reporting room it does not have gets the replica a bounded number of times", async () => {
  const { cp, clock } = await cluster(["n1"]);
  await heartbeat(cp, "n1", 100);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  const roundMs = 10_000;
  const rounds = 180; // 30 minutes
  let placements = 0;
  let held = 0;
  for (let i = 0; i < rounds; i++) {
    await cp.reconcile();
    const [r] = cp.replicas();
    if (r.shards.length > 0) {
      placements++;
      // The agent: out of disk midway, and its report still claims 100 GiB of room.
      await heartbeat(cp, "n1", 100, "failed");
    } else {
      held++;
      assertEquals(r.explanation?.profiles[0].counts, { disk_full_backoff: 1 }, `round ${i}`);
      await heartbeat(cp, "n1", 100);
    }
    clock.advance(roundMs);
  }
  const bound = boundedPlacements(rounds * roundMs, roundMs) + 1;
  assertOk(placements <= bound, `placed ${placements} times in ${rounds} rounds, bound ${bound}`);
  assertOk(placements >= 3, `tried again after each backoff: ${placements}`);
  assertOk(held > rounds / 2, `held back in most rounds: ${held}`);
  // Still never failed nor counted: the disk, not the replica, is at fault.
  assertEquals(cp.state.replicas.get(cp.replicas()[0].id)!.failure ?? null, null);
});

Deno.test("disk full on one node: another node is tried meanwhile, and explain names the backoff", async () => {
  const { cp, clock } = await cluster(["n1", "n2"]);
  await heartbeat(cp, "n1", 100);
  await heartbeat(cp, "n2", 100);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  assertEquals(cp.replicas()[0].shards.map((s) => s.node), ["n1"]);
  await heartbeat(cp, "n1", 100, "failed");
  await heartbeat(cp, "n2", 100);
  clock.advance(1_000);
  await cp.reconcile();
  const [moved] = cp.replicas();
  assertEquals(moved.shards.map((s) => s.node), ["n2"]);
  const group = moved.explanation?.profiles[0].groups?.find((g) =>
    g.reason === "disk_full_backoff"
  );
  assertOk(group !== undefined, JSON.stringify(moved.explanation));
  assertEquals(group.examples, ["n1"]);
  assertStringIncludes(
    group.message,
    "n1 ran out of disk fetching Qwen/Qwen2.5-7B-Instruct@4b1c2a9",
  );
  assertStringIncludes(group.message, "retried after 2023-11-14T22:13:51.000Z");
  assertStringIncludes(
    group.message,
    "(its agent: needs 14.2 GiB more, 1.0 GiB free; it reported room for 100.0 GiB)",
  );
  const events = await cp.events.list({ limit: 1000 });
  const rebuilt = events.find((e) => e.kind === "replica_rebuilding");
  assertStringIncludes(rebuilt!.message, "not placed on n1 for it again for 30s");
  // `llmgw explain`: the live explanation names n1's backoff, with how long ago.
  clock.advance(20_000);
  const live = liveExplanation(cp.state, moved.id).live!.profiles[0].nodes!;
  assertEquals(live.map((n) => [n.node, n.reason]), [["n1", "disk_full_backoff"]]);
  assertStringIncludes(
    live[0].message,
    "ran out of disk fetching Qwen/Qwen2.5-7B-Instruct@4b1c2a9 20s ago",
  );
  // Once the backoff is over, n1 is a candidate again.
  clock.advance(10_000);
  assertEquals(liveExplanation(cp.state, moved.id).live!.profiles[0].nodes, []);
});

Deno.test("a disk-full holds the node back in the same pass, even when the pass's index was built before it", async () => {
  const { cp } = await cluster(["n1", "n2"]);
  await heartbeat(cp, "n1", 100);
  await heartbeat(cp, "n2", 1); // too little room: never a candidate
  await cp.deployments.apply({ ...QWEN, replicas: 2 });
  await cp.reconcile();
  const [r0, r1] = cp.replicas();
  assertEquals([r0.shards[0].node, r1.shards[0].node], ["n1", "n1"]);
  // r0's engine refused its arguments (its rebuild builds the pass's index first); r1 ran out of disk.
  const desired = await cp.desired.wait("n1", -1, 0);
  const refused = { ...DISK_FULL, reason: "unrecognized arguments: --bad", kind: undefined };
  await cp.nodes.heartbeat({
    node_id: "n1",
    generation: desired.generation,
    shards: desired.shards.map((s) =>
      shardReport(s.id, "failed", {
        last_failure: s.id.startsWith(r0.id) ? refused : DISK_FULL,
      })
    ),
    model_cache: { room_bytes: 100 * GIB, revisions: [], omitted: 0, evicted: [] },
  });
  await cp.reconcile();
  const after = cp.replicas().find((r) => r.id === r1.id)!;
  assertEquals(after.shards, [], "r1 is not placed back on n1 in the pass that saw its disk-full");
  assertEquals(after.explanation?.profiles[0].counts, {
    insufficient_disk: 1,
    disk_full_backoff: 1,
  });
});
