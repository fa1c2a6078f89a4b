/**
 * The desired state's contract: launches checked whole, a problem inside a
 * shard named by the shard's id and the field's path, and the launch's
 * shard id bound to the shard's.
 */
import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { deployment, node, profile } from "../tests/cluster_builders.ts";
import { shardLaunches } from "../engines/launch.ts";
import type { DesiredLaunch } from "../engines/types.ts";
import { placeReplica } from "../placement/place.ts";
import { type DesiredState, parseDesiredState } from "./agent_protocol.ts";
import { WireFormatError } from "./wire_error.ts";

/** Two single-node replicas' launches on one node, as engines/launch.ts builds them. */
function launches(): DesiredLaunch[] {
  const n = node("a");
  const dep = deployment([profile({ name: "h100x4", gpus_per_node: 4 })]);
  return ["dep-r0", "dep-r1"].map((id) => {
    const placed = placeReplica([n], dep, id);
    if (placed.status !== "placed") throw new Error(placed.explanation.summary);
    return shardLaunches(placed, dep, new Map([[n.id, n]]))[0];
  });
}

function state(): DesiredState {
  return {
    generation: 7,
    shards: launches().map((launch) => ({ id: launch.shard_id, engine: "vllm", launch })),
  };
}

function refusal(value: unknown): WireFormatError {
  return assertThrows(() => parseDesiredState(value), WireFormatError) as WireFormatError;
}

Deno.test("desired state: a valid one parses to itself; unknown fields are dropped", () => {
  const s = state();
  assertEquals(parseDesiredState(JSON.parse(JSON.stringify(s))), s);
  assertEquals(parseDesiredState({ ...s, note: "from a newer control plane" }), s);
  assertEquals(parseDesiredState({ generation: 0, shards: [] }), { generation: 0, shards: [] });
});

Deno.test("desired state: a bad launch is refused naming the shard and the field", () => {
  const s = state();
  const id = s.shards[1].id;
  s.shards[1].launch.gpus[0].index = 5000;
  const e = refusal(s);
  assertEquals(e.issues.length, 1);
  assertStringIncludes(
    e.message,
    `Cannot use the desired state: shards[1].launch.gpus[0].index (shard ${
      JSON.stringify(id)
    }): Too big`,
  );
  const notObject = refusal({ ...state(), shards: [{ id: "x", engine: "vllm", launch: "oops" }] });
  assertStringIncludes(notObject.detail, `shards[0].launch (shard "x"): Invalid input`);
});

Deno.test("desired state: the launch's shard id must be the shard's", () => {
  const s = state();
  s.shards[0].launch.shard_id = "someone-else";
  const e = refusal(s);
  assertStringIncludes(
    e.detail,
    `shards[0].launch.shard_id (shard "${s.shards[0].id}"): must equal the shard's id`,
  );
});

Deno.test("desired state: envelope problems name their paths, without a shard when it has no id", () => {
  assertStringIncludes(refusal(null).detail, "(top level): ");
  assertStringIncludes(refusal({ shards: [] }).detail, "generation: ");
  assertStringIncludes(refusal({ generation: -1, shards: [] }).detail, "generation: Too small");
  const noId = refusal({ generation: 1, shards: [{ engine: "vllm", launch: launches()[0] }] });
  assertEquals(noId.issues.map((i) => [i.path, i.about]), [[["shards", 0, "id"], undefined]]);
  const tooMany = refusal({ generation: 1, shards: Array(4097).fill(state().shards[0]) });
  assertStringIncludes(tooMany.detail, "shards: Too big");
});
