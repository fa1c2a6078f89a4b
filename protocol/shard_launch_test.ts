/**
 * The shard launch schema: what engines/launch.ts builds passes unchanged
 * (byte for byte, so shard hashes survive the parse), every field is
 * bounded, and each refusal names the field's path.
 */
import fc from "fast-check";
import { z } from "zod";
import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { deployment, fabric, node, profile } from "../tests/cluster_builders.ts";
import { concreteLaunches, shardLaunches } from "../engines/launch.ts";
import type { ShardLaunch } from "../engines/types.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { placeReplica } from "../placement/place.ts";
import { formatPath } from "../validation/issues.ts";
import { FabricReportSchema, GpuReportSchema, RegisterRequestSchema } from "./agent_protocol.ts";
import {
  LaunchFabricSchema,
  LaunchGpuSchema,
  LaunchNodeSchema,
  LaunchWorldSchema,
  MAX_GPUS_PER_SHARD,
  parseShardLaunch,
  ShardLaunchSchema,
} from "./shard_launch.ts";
import { WireFormatError } from "./wire_error.ts";

/** The launches placement and engines/launch.ts build for a two-node replica on one fabric. */
function placedLaunches(): ShardLaunch[] {
  const ib = fabric("ib-a", ["mlx5_0", "mlx5_1"]);
  const nodes: ClusterNode[] = ["a", "b"].map((id, i) => ({
    ...node(id, { fabrics: [ib] }),
    mgmt_addr: `10.0.0.${i + 1}`,
    engine_versions: { vllm: "0.11.1" },
  }));
  const dep = deployment([profile({
    name: "h100x16",
    nodes: 2,
    engine_args: ["--max-model-len", "8192"],
    engine_options: { multi_node_backend: "ray", enforce_eager: true, swap_space: 4 },
    env: { HF_HUB_OFFLINE: "1" },
  })]);
  const placed = placeReplica(nodes, dep, "dep-r0");
  if (placed.status !== "placed") throw new Error(placed.explanation.summary);
  // Ports as the agents fill them in: a block from each one's range.
  return concreteLaunches(
    shardLaunches(placed, dep, new Map(nodes.map((n) => [n.id, n]))),
    () => 20_000,
  );
}

/** An object's fields, to set ones of the wrong type. */
function loose(o: object): Record<string, unknown> {
  return o as Record<string, unknown>;
}

/** A valid launch (rank 0 of the two) to break one field at a time. */
function base(): ShardLaunch {
  return structuredClone(placedLaunches()[0]);
}

Deno.test("shard launch: what placement builds parses unchanged, byte for byte", () => {
  const launches = placedLaunches();
  assertEquals(launches.length, 2);
  assertOk(launches[1].fabric !== null && launches[1].fabric.ports.length === 2);
  for (const launch of launches) {
    const parsed = parseShardLaunch(JSON.parse(JSON.stringify(launch)));
    // The supervisor hashes JSON.stringify(launch): a reordered key would restart engines.
    assertEquals(JSON.stringify(parsed), JSON.stringify(launch));
  }
  const single = { ...base(), fabric: null, engine_version: null };
  assertEquals(parseShardLaunch(single), single);
});

Deno.test("shard launch: fields it does not know are dropped, not refused", () => {
  const launch = base();
  const parsed = parseShardLaunch({
    ...launch,
    allocated_ports: { metrics: 9000 },
    world: { ...launch.world, from_the_future: true },
  });
  assertEquals(parsed, launch);
});

Deno.test("shard launch: each bad field is refused with its path", () => {
  const cases: [string, (l: ShardLaunch) => void, string][] = [
    ["not a launch", (l) => Object.keys(l).forEach((k) => delete loose(l)[k]), "api_version"],
    ["api_version 1.5", (l) => l.api_version = 1.5, "api_version"],
    ["no shard_id", (l) => delete loose(l).shard_id, "shard_id"],
    ["empty model", (l) => l.model = "", "model"],
    ["long served name", (l) => l.served_model_name = "m".repeat(257), "served_model_name"],
    ["port 0", (l) => l.port = 0, "port"],
    ["port 65536", (l) => l.port = 65536, "port"],
    ["port as text", (l) => loose(l).port = "8000", "port"],
    ["rank -1", (l) => l.rank = -1, "rank"],
    ["rank 1024", (l) => l.rank = 1024, "rank"],
    ["rendezvous port 0", (l) => l.world.rendezvous_port = 0, "world.rendezvous_port"],
    ["leader port too high", (l) => l.world.leader_http_port = 70_000, "world.leader_http_port"],
    ["world of 0 nodes", (l) => l.world.nodes = 0, "world.nodes"],
    ["empty leader address", (l) => l.world.leader_addr = "", "world.leader_addr"],
    ["no GPUs", (l) => l.gpus = [], "gpus"],
    [
      "65 GPUs",
      (l) => l.gpus = Array.from({ length: 65 }, (_, i) => ({ ...l.gpus[0], index: i })),
      "gpus",
    ],
    ["negative GPU index", (l) => l.gpus[0].index = -1, "gpus[0].index"],
    [
      "bad compute capability",
      (l) => l.gpus[1].compute_capability = "nine",
      "gpus[1].compute_capability",
    ],
    ["long GPU class", (l) => l.gpus[0].class = "c".repeat(65), "gpus[0].class"],
    ["65 GPUs per node", (l) => l.profile.gpus_per_node = 65, "profile.gpus_per_node"],
    ["tensor_parallel 0", (l) => l.profile.tensor_parallel = 0, "profile.tensor_parallel"],
    [
      "long engine arg",
      (l) => l.profile.engine_args = ["x".repeat(4097)],
      "profile.engine_args[0]",
    ],
    ["bad env name", (l) => l.profile.env = { "1BAD": "x" }, "profile.env.1BAD"],
    ["long env value", (l) => l.profile.env = { A: "x".repeat(32_769) }, "profile.env.A"],
    [
      "too many env vars",
      (l) =>
        l.profile.env = Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`V${i}`, ""])),
      "profile.env",
    ],
    [
      "engine option of an object",
      (l) => loose(l.profile.engine_options).x = { y: 1 },
      "profile.engine_options.x",
    ],
    ["fabric port 0", (l) => l.fabric!.ports[0].port = 0, "fabric.ports[0].port"],
    [
      "fabric link layer",
      (l) => loose(l.fabric!.ports[1]).link_layer = "eth",
      "fabric.ports[1].link_layer",
    ],
    ["fabric with no name", (l) => l.fabric!.name = "", "fabric.name"],
    ["bad node id", (l) => l.node.id = "a node", "node.id"],
    ["long interface", (l) => l.node.mgmt_interface = "i".repeat(16), "node.mgmt_interface"],
    ["long engine version", (l) => l.engine_version = "1".repeat(65), "engine_version"],
  ];
  for (const [name, breakIt, path] of cases) {
    const launch = base();
    breakIt(launch);
    const e = assertThrows(() => parseShardLaunch(launch), WireFormatError) as WireFormatError;
    assertEquals(formatPath(e.issues[0].path), path, name);
    assertStringIncludes(e.message, `Cannot use the shard launch: ${path}: `, name);
  }
});

Deno.test("shard launch: ports are accepted exactly from 1 to 65535", () => {
  fc.assert(
    fc.property(fc.integer({ min: -100_000, max: 200_000 }), (port) => {
      const ok = ShardLaunchSchema.safeParse({ ...base(), port }).success;
      assertEquals(ok, port >= 1 && port <= 65535, `port ${port}`);
    }),
  );
});

Deno.test("shard launch: a shard runs on 1 to 64 GPUs", () => {
  const gpu = base().gpus[0];
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 2 * MAX_GPUS_PER_SHARD }), (count) => {
      const gpus = Array.from({ length: count }, (_, i) => ({ ...gpu, index: i }));
      const ok = ShardLaunchSchema.safeParse({ ...base(), gpus }).success;
      assertEquals(ok, count >= 1 && count <= MAX_GPUS_PER_SHARD, `${count} GPUs`);
    }),
    { numRuns: 60 },
  );
});

Deno.test("shard launch: whatever a registration accepts, a launch built from it accepts", () => {
  const register = RegisterRequestSchema.shape;
  const pairs: [string, z.ZodType, z.ZodType][] = [
    ["node id", register.node_id, LaunchNodeSchema.shape.id],
    ["mgmt_addr", register.mgmt_addr, LaunchNodeSchema.shape.mgmt_addr],
    ["leader_addr", register.mgmt_addr, LaunchWorldSchema.shape.leader_addr],
    ["mgmt_interface", register.mgmt_interface, LaunchNodeSchema.shape.mgmt_interface],
    ["GPU class", GpuReportSchema.shape.class, LaunchGpuSchema.shape.class],
    [
      "compute capability",
      GpuReportSchema.shape.compute_capability,
      LaunchGpuSchema.shape.compute_capability,
    ],
    ["fabric name", FabricReportSchema.shape.fabric, LaunchFabricSchema.shape.name],
    ["engine version", z.string().max(64), ShardLaunchSchema.shape.engine_version],
  ];
  // The registration's engine versions are the values of this record.
  assertOk(register.engine_versions.safeParse({ vllm: "v".repeat(64) }).success);
  assertOk(!register.engine_versions.safeParse({ vllm: "v".repeat(65) }).success);
  const text = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.stringMatching(/^[0-9]{1,20}\.[0-9]{1,20}$/),
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,140}$/),
  );
  for (const [name, registered, launched] of pairs) {
    fc.assert(
      fc.property(text, (value) => {
        if (!registered.safeParse(value).success) return;
        assertOk(launched.safeParse(value).success, `${name} ${JSON.stringify(value)}`);
      }),
      { numRuns: 300 },
    );
  }
});
