import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { shardEnv, shardEnvProblems } from "./shard_env.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";
import type { FabricPort } from "../discovery/types.ts";

const ib = (hca: string, port = 1): FabricPort => ({
  hca,
  port,
  link_layer: "infiniband",
  rate_gbps: 400,
  roce_v2_gid_index: null,
});
const roce = (hca: string, gid: number | null = 3): FabricPort => ({
  hca,
  port: 1,
  link_layer: "roce",
  rate_gbps: 200,
  roce_v2_gid_index: gid,
});

function launch(
  nodes: number,
  ports: FabricPort[] | null,
  env: Record<string, string> = {},
): ShardLaunch {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "d",
    replica_id: "d-r0",
    shard_id: "d-r0/1",
    model: "m",
    served_model_name: "m",
    profile: {
      name: "p",
      tensor_parallel: 8 * nodes,
      pipeline_parallel: 1,
      nodes,
      gpus_per_node: 8,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env,
    },
    rank: nodes > 1 ? 1 : 0,
    world: { nodes, leader_addr: "192.0.2.1", rendezvous_port: 29500, leader_http_port: 8000 },
    gpus: [0, 1, 2, 3, 4, 5, 6, 7].map((index) => ({
      index,
      class: "h100-80g",
      compute_capability: "9.0",
    })),
    fabric: ports === null ? null : { name: "ib-a", ports },
    node: { id: "n2", mgmt_addr: "192.0.2.2", mgmt_interface: "bond0" },
    port: 8000,
    engine_version: null,
  };
}

Deno.test("a single-node shard gets its GPUs and no IB settings", () => {
  assertEquals(shardEnv(launch(1, null)), {
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7",
  });
  assertEquals(shardEnvProblems(launch(1, null)), []);
});

Deno.test("NCCL_IB_HCA names exactly the fabric's ports in exact-match form", () => {
  // mlx5_1 and mlx5_10 on one node: without the leading '=' the prefix
  // mlx5_1 would also select mlx5_10 (and mlx5_11…).
  const env = shardEnv(launch(2, [ib("mlx5_1"), ib("mlx5_10", 2)]));
  assertEquals(env, {
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7",
    NCCL_IB_HCA: "=mlx5_1:1,mlx5_10:2",
    NCCL_SOCKET_IFNAME: "=bond0",
    GLOO_SOCKET_IFNAME: "bond0",
  });
});

Deno.test("RoCE fabrics add their GID index; inconsistent or missing ones are refused", () => {
  assertEquals(
    shardEnv(launch(2, [roce("mlx5_bond_0"), roce("mlx5_bond_1")])).NCCL_IB_GID_INDEX,
    "3",
  );
  assertStringIncludes(
    shardEnvProblems(launch(2, [roce("mlx5_0", 3), roce("mlx5_1", 1)])).join(),
    "use different GID indices (3, 1)",
  );
  assertStringIncludes(
    shardEnvProblems(launch(2, [roce("mlx5_0", null)])).join(),
    "has no RoCE v2 GID index",
  );
  assertStringIncludes(
    shardEnvProblems(launch(2, [ib("mlx5_0"), roce("mlx5_1")])).join(),
    "mixes InfiniBand and RoCE",
  );
});

Deno.test("a multi-node shard without fabric or management interface is refused", () => {
  assertStringIncludes(shardEnvProblems(launch(2, null)).join(), "needs the fabric's adapters");
  const noIf = launch(2, [ib("mlx5_0")]);
  noIf.node.mgmt_interface = null;
  assertStringIncludes(shardEnvProblems(noIf).join(), "management interface is unknown");
});

Deno.test("a profile may not set the variables llmgw owns", () => {
  const problems = shardEnvProblems(launch(1, null, { NCCL_IB_HCA: "mlx5", HF_HOME: "/m" }));
  assertEquals(problems.length, 1);
  assertStringIncludes(problems[0], 'profile "p": env NCCL_IB_HCA is set by llmgw');
});
