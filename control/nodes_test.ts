import { assertEquals, assertOk } from "../tests/assert.ts";
import { registerNodes, shardReport, testControl, thrown } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { ForbiddenError, InvalidInputError, NotFoundError } from "./errors.ts";

Deno.test("a node id is bound to the credential of its first registration", async () => {
  const { cp } = await testControl();
  const tokens = await registerNodes(cp, ["n1"]);
  const e = await thrown(cp.nodes.register(registration("n1"), null));
  assertOk(e instanceof ForbiddenError);
  assertEquals(e.code, "node_taken");
  const again = await cp.nodes.register(registration("n1"), tokens.get("n1")!);
  assertOk(again.node_token !== tokens.get("n1"), "a new credential each registration");
  assertEquals(await cp.nodes.nodeForToken(tokens.get("n1")!), null, "the old one is revoked");
  assertEquals(await cp.nodes.nodeForToken(again.node_token), "n1");
  assertOk(await cp.nodes.authenticate("n1", again.node_token));
  assertOk(!(await cp.nodes.authenticate("n2", again.node_token)));
});

Deno.test("intent survives re-registration and is an event", async () => {
  const { cp } = await testControl();
  const tokens = await registerNodes(cp, ["n1"]);
  assertEquals((await cp.nodes.setIntent("n1", "cordoned")).state, "cordoned");
  await cp.nodes.register(registration("n1"), tokens.get("n1")!);
  assertEquals(cp.nodes.get("n1").state, "cordoned");
  const kinds = (await cp.events.list()).map((e) => [e.kind, e.message]);
  assertOk(kinds.some(([k, m]) => k === "node_cordoned" && m === "operator: cordoned"));
  assertOk((await thrown(cp.nodes.setIntent("nope", "draining"))) instanceof NotFoundError);
});

Deno.test("label and fabric overrides apply over the agent's facts at once", async () => {
  const { cp } = await testControl();
  await cp.nodes.register(registration("h1", "dgx_h100_8x_nics"), null);
  assertEquals(await cp.nodes.setLabels("h1", { rack: "r7" }), { rack: "r7" });
  assertEquals(cp.nodes.get("h1").labels.rack, "r7");
  await cp.nodes.setFabricOverrides("h1", { "ib-compute": "ib-a" });
  assertEquals(cp.nodes.get("h1").fabrics.map((f) => f.fabric), ["ib-a"]);
  await cp.nodes.setFabricOverrides("h1", { "ib-compute": null });
  assertEquals(cp.nodes.get("h1").fabrics, []);
});

Deno.test("a heartbeat keeps a node ready; silence makes it unreachable (fake clock)", async () => {
  const { cp, clock } = await testControl();
  await registerNodes(cp, ["n1"]);
  clock.advance(cp.inventory.thresholds.unreachable_after_ms + 1);
  await cp.reconcile();
  assertEquals(cp.nodes.get("n1").state, "unreachable");
  await cp.nodes.heartbeat({ node_id: "n1", generation: 0, shards: [] });
  assertEquals(cp.nodes.get("n1").state, "ready");
  const kinds = (await cp.events.list()).map((e) => e.kind);
  assertEquals(kinds.filter((k) => k.startsWith("node_")), [
    "node_registered",
    "node_unreachable",
    "node_ready",
  ]);
});

Deno.test("a shard failure becomes one event with its log tail; a repeat of it none", async () => {
  const { cp, clock } = await testControl();
  await registerNodes(cp, ["n1"]);
  const failed = shardReport("x-r0.1/0", "failed", {
    last_failure: {
      at: clock.now(),
      reason: "exited with code 1",
      exit_code: 1,
      signal: null,
      log_tail: ["Traceback", "CUDA out of memory"],
    },
  });
  await cp.nodes.heartbeat({ node_id: "n1", generation: 0, shards: [failed] });
  await cp.nodes.heartbeat({ node_id: "n1", generation: 0, shards: [failed] });
  const events = (await cp.events.list()).filter((e) => e.kind === "shard_failed");
  assertEquals(events.length, 1);
  assertEquals(
    events[0].message,
    "shard x-r0.1/0 on n1 failed: exited with code 1\nlast 2 log lines:\nTraceback\nCUDA out of memory",
  );
});

Deno.test("a registration with a bad GPU list is refused and writes nothing", async () => {
  const { cp, store } = await testControl();
  const reg = registration("n1");
  const e = await thrown(cp.nodes.register({ ...reg, gpus: [...reg.gpus, reg.gpus[0]] }, null));
  assertOk(e instanceof InvalidInputError);
  assertEquals(e.path, "gpus");
  assertEquals(await store.listNodes(), []);
});
