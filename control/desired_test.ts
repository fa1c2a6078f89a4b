import { assertEquals, assertOk } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { NotFoundError } from "./errors.ts";

Deno.test("a node's generation grows only when its shards change", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  const g0 = (await cp.desired.wait("n1", -1, 0)).generation;
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const after = await cp.desired.wait("n1", -1, 0);
  assertEquals(after.generation, g0 + 1);
  assertEquals(after.shards.map((s) => [s.id, s.engine, s.launch.gpus.length]), [
    ["qwen-r0.1/0", "vllm", 2],
  ]);
  // Another pass with nothing new: the same generation; n2 holds nothing.
  await cp.reconcile();
  assertEquals((await cp.desired.wait("n1", -1, 0)).generation, g0 + 1);
  assertEquals((await cp.desired.wait("n2", -1, 0)).shards, []);
});

Deno.test("a long poll is woken by its node's change and by stop", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  const g = (await cp.desired.wait("n1", -1, 0)).generation;
  let woke = false;
  const poll = cp.desired.wait("n1", g, 60_000).then((d) => {
    woke = true;
    return d;
  });
  await new Promise((r) => setTimeout(r, 0));
  assertOk(!woke);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  assertEquals((await poll).generation, g + 1);
  // stop() ends every waiting poll at once.
  const second = cp.desired.wait("n1", g + 1, 60_000);
  cp.stop();
  assertEquals((await second).generation, g + 1);
});

Deno.test("an abort ends a long poll; an unknown node is refused", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  const g = (await cp.desired.wait("n1", -1, 0)).generation;
  const abort = new AbortController();
  const poll = cp.desired.wait("n1", g, 60_000, abort.signal);
  abort.abort();
  assertEquals((await poll).generation, g);
  let e: unknown = null;
  await cp.desired.wait("nope", 0, 0).catch((x) => e = x);
  assertOk(e instanceof NotFoundError);
  assertEquals(e.code, "unknown_node");
});
