import { assertEquals } from "../tests/assert.ts";
import { QWEN, registerNodes, reportAll, testControl } from "../tests/control_fixture.ts";
import { isReady, replicaState } from "./views.ts";

Deno.test("a replica's state: its phase, then the worst of its shards", () => {
  const cases: [string, "pending" | "placed" | "failed", string[], string][] = [
    ["pending", "pending", [], "pending"],
    ["given up", "failed", [], "failed"],
    ["all ready", "placed", ["ready", "ready"], "ready"],
    ["one failed", "placed", ["ready", "failed"], "failed"],
    ["one loading", "placed", ["loading", "ready"], "loading"],
    ["one downloading holds the others back", "placed", ["downloading", "loading"], "downloading"],
    ["a failure beats a download", "placed", ["downloading", "failed"], "failed"],
    ["not reported yet", "placed", ["unknown", "ready"], "starting"],
    ["backing off", "placed", ["backoff"], "starting"],
    ["placed, no shards", "placed", [], "starting"],
  ];
  for (const [name, phase, states, want] of cases) {
    assertEquals(
      replicaState({ phase }, states.map((s) => ({ state: s as "ready" }))),
      want,
      name,
    );
  }
});

Deno.test("a replica's view carries its revision (1 for old records) and when it first was ready", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const r = cp.state.replicas.get("qwen-r0")!;
  delete r.revision; // as read from a store written before revisions
  assertEquals([cp.replicas()[0].revision, cp.replicas()[0].ready_at], [1, null]);
  assertEquals(isReady(cp.state, r), false);
  await reportAll(cp, "n1", "ready");
  assertEquals(isReady(cp.state, r), true);
  await cp.reconcile();
  assertEquals(cp.replicas()[0].ready_at, cp.state.now());
  // Announced once per placement, not on every heartbeat.
  await reportAll(cp, "n1", "ready");
  await cp.reconcile();
  const ready = (await cp.events.list({ limit: 100 })).filter((e) => e.kind === "replica_ready");
  assertEquals(ready.map((e) => e.subject), ["replica/qwen-r0"]);
});

Deno.test("a shard's view shows its restarts, and a crash loop only while it is not ready and its restart did not help", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const shown = async (state: "backoff" | "ready", failures: number) => {
    await reportAll(cp, "n1", state, { restarts: failures, crash_loop: { failures, limit: 5 } });
    const s = cp.replicas()[0].shards[0];
    return [s.restarts, s.crash_loop];
  };
  assertEquals(await shown("backoff", 1), [1, null]);
  assertEquals(await shown("backoff", 3), [3, { failures: 3, limit: 5 }]);
  assertEquals(await shown("ready", 3), [3, null]);
  // An agent from before crash loops reports neither.
  await reportAll(cp, "n1", "backoff");
  assertEquals([cp.replicas()[0].shards[0].restarts, cp.replicas()[0].shards[0].crash_loop], [
    0,
    null,
  ]);
});
