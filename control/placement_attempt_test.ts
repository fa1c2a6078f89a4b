/**
 * A placement's number is stored with it (protocol/ids.ts): a control plane
 * restarted on the store gives the replica's next placement the next
 * number, so no shard id is ever used twice.
 */
import { assertEquals } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { parseShardId } from "../protocol/ids.ts";

Deno.test("a placement stores its attempt, and a restart continues from it", async () => {
  const { cp, store } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const placed = (await store.listReplicas())[0];
  assertEquals(placed.placement?.attempt, 1);
  assertEquals(parseShardId(placed.placement!.shards[0].shard_id)?.attempt, 1);
  // The stored number counts, not what the placement's id spells: a record
  // whose id says 1 but that is the 7th placement goes on with the 8th.
  await store.putReplica({ ...placed, placement: { ...placed.placement!, attempt: 7 } });
  const { cp: again } = await testControl({ store });
  const restored = again.state.replicas.get(placed.id)!;
  assertEquals(again.book.nextPlacementId(restored), `${placed.id}.8`);
});

Deno.test("a record from before the attempt was stored reads it from its placement id", async () => {
  const { cp, store } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const placed = (await store.listReplicas())[0];
  const { attempt: _, ...older } = placed.placement!;
  await store.putReplica({ ...placed, placement: { ...older, replica_id: `${placed.id}.4` } });
  const { cp: again } = await testControl({ store });
  assertEquals(again.book.nextPlacementId(again.state.replicas.get(placed.id)!), `${placed.id}.5`);
});
