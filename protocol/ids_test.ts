/** Replica, placement and shard ids: built and parsed back by one grammar. */
import { assertEquals } from "../tests/assert.ts";
import {
  parsePlacementId,
  parseShardId,
  placementId,
  replicaId,
  replicaOfShard,
  shardId,
  surgeReplicaId,
} from "./ids.ts";

Deno.test("ids: built and parsed back", () => {
  const replica = replicaId("llama-70b", 3);
  assertEquals(replica, "llama-70b-r3");
  const placement = placementId(replica, 12);
  assertEquals(placement, "llama-70b-r3.12");
  const shard = shardId(placement, 1);
  assertEquals(shard, "llama-70b-r3.12/1");
  assertEquals(parseShardId(shard), { replica, attempt: 12, rank: 1 });
  assertEquals(parsePlacementId(placement), { replica, attempt: 12 });
  assertEquals(replicaOfShard(shard), replica);
});

Deno.test("ids: a surge replica's id keeps its parts", () => {
  assertEquals(surgeReplicaId("d-r0", 3), "d-r0-v3");
  assertEquals(surgeReplicaId("d-r0", 3, 2), "d-r0-v3-2");
  const shard = shardId(placementId(surgeReplicaId("d.x-r0", 3, 2), 1), 0);
  assertEquals(parseShardId(shard), { replica: "d.x-r0-v3-2", attempt: 1, rank: 0 });
});

Deno.test("ids: what is not an id parses to null", () => {
  for (const id of ["", "d-r0", "d-r0/1", "d-r0.x/1", "d-r0.1/", ".1/0"]) {
    assertEquals(parseShardId(id), null, id);
  }
  assertEquals(parsePlacementId("d-r0"), null);
  assertEquals(replicaOfShard("node-a"), "node-a");
});
