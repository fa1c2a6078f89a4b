/** `llmgw plan` on the recorded cluster and on hand-made files. */
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { fixturePath } from "./fixtures.ts";
import { main } from "../cli/main.ts";
import type { PlannedReplica } from "../cli/plan_command.ts";

const CLUSTER = fixturePath("clusters/recorded.json");
const QWEN = fixturePath("../../examples/deployments/qwen-32b-rtx4090.yaml");
const LLAMA = fixturePath("../../examples/deployments/llama-70b.yaml");

async function plan(args: string[]) {
  let out = "";
  let err = "";
  const code = await main(["plan", ...args], { out: (t) => out += t, err: (t) => err += t });
  return { code, out, err };
}

Deno.test("plan places replicas one after another on the recorded machines", async () => {
  const r = await plan(["--cluster", CLUSTER, "--deployment", QWEN, "--json"]);
  assertEquals(r.code, 0, r.err);
  const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
  assertEquals(replicas.map((x) => x.status), ["placed", "placed", "placed"]);
  const shards = replicas.map((x) => x.status === "placed" ? x.shards : []);
  assertEquals(shards[0], [{
    rank: 0,
    shard_id: "qwen-32b-r0/0",
    node: "rtx4090-8x-server",
    gpu_indices: [0, 1, 2, 3],
    gpu_class: "rtx4090-24g",
    fabric: null,
    hcas: [],
    hca_ports: [],
    argv: [
      "vllm",
      "serve",
      "Qwen/Qwen2.5-32B-Instruct-AWQ",
      "--served-model-name",
      "qwen-32b",
      "--host",
      "0.0.0.0",
      "--port",
      "8000",
      "--tensor-parallel-size",
      "4",
      "--pipeline-parallel-size",
      "1",
      "--quantization",
      "awq",
    ],
    env: { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "0,1,2,3" },
  }]);
  // Ports follow the shard's first GPU: 8000 + 10 × 4.
  assertEquals(shards[1][0].argv.slice(7, 9), ["--port", "8040"]);
  assertEquals(shards[1][0].gpu_indices, [4, 5, 6, 7]);
  // The 4090s are full: the third replica falls back to the L40S, and says why.
  const third = replicas[2];
  assertOk(third.status === "placed");
  assertEquals(third.profile, "l40s-single");
  assertStringIncludes(
    third.explanation.summary,
    'profile "rtx4090-tp4": 0/6 nodes fit: 5 no rtx4090-24g GPUs, 1 insufficient free rtx4090-24g GPUs',
  );
  const first = third.explanation.profiles[0];
  assertEquals(first.fits, false);
  assertEquals(first.counts, { no_gpu_class: 5, insufficient_gpus: 1 });
  assertEquals(
    first.nodes?.find((n) => n.node === "rtx4090-8x-server")?.message,
    "needs 4 free rtx4090-24g GPUs, has 0 free, 8 allocated of 8",
  );
});

Deno.test("plan exits 3 and explains every node when nothing fits", async () => {
  const r = await plan(["--cluster", CLUSTER, "--deployment", LLAMA, "--json"]);
  assertEquals(r.code, 3);
  // The a100 profile's class exists nowhere: a warning, not an error.
  assertStringIncludes(r.err, "warning");
  assertStringIncludes(r.err, "no node in the cluster has a100-80g GPUs");
  const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
  assertEquals(replicas.length, 2);
  const h100 = replicas[0].explanation.profiles[0];
  assertEquals(h100.counts, { no_gpu_class: 4, compute_capability: 1, insufficient_gpus: 1 });
  assertEquals(h100.nodes?.length, 6);
  assertStringIncludes(
    h100.nodes!.find((n) => n.node === "h100-sxm-vm")!.message,
    "1 unhealthy (GPU 0: memory held by a process that is not llmgw's: pid 11327 uses 2566 MiB)",
  );
  // The recorded DGX CSV has no compute_cap column: fp8 cannot be proven safe.
  assertEquals(
    h100.nodes!.find((n) => n.node === "dgx-h100-8x-nics")!.message,
    "fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report unknown",
  );
});

Deno.test("plan prints text for people", async () => {
  const r = await plan(["--cluster", CLUSTER, "--deployment", QWEN, "--replicas", "1"]);
  assertEquals(r.code, 0);
  assertStringIncludes(r.out, "replica qwen-32b-r0: placed");
  assertStringIncludes(r.out, "rtx4090-8x-server  0,1,2,3");
});

Deno.test("plan places a multi-node replica on one fabric with its HCAs", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const gpu = (i: number) => ({
      index: i,
      class: "a100-80g",
      compute_capability: "8.0",
      nvlink_peers: [0, 1, 2, 3].filter((p) => p !== i),
    });
    const node = (id: string, fabric: string | null) => ({
      id,
      mgmt_addr: "192.0.2.1",
      mgmt_interface: "eth0",
      gpus: [0, 1, 2, 3].map(gpu),
      fabrics: fabric === null ? [] : [{ fabric, hcas: ["mlx5_0", "mlx5_1"], rate_gbps: 200 }],
    });
    await Deno.writeTextFile(
      `${dir}/cluster.json`,
      JSON.stringify({
        nodes: [node("a1", "ib-a"), node("a2", "ib-a"), node("b1", "ib-b"), node("c1", null)],
      }),
    );
    await Deno.writeTextFile(
      `${dir}/d.yaml`,
      "name: big\nmodel: org/big\nprofiles:\n  - {name: two, engine: sglang, gpu_class: a100-80g, tensor_parallel: 8, nodes: 2, gpus_per_node: 4}\n",
    );
    const r = await plan([
      "--cluster",
      `${dir}/cluster.json`,
      "--deployment",
      `${dir}/d.yaml`,
      "--json",
      "--replicas",
      "2",
    ]);
    assertEquals(r.code, 3);
    const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
    const first = replicas[0];
    assertOk(first.status === "placed");
    assertEquals(first.shards.map((s) => [s.rank, s.node, s.fabric, s.hcas]), [
      [0, "a1", "ib-a", ["mlx5_0", "mlx5_1"]],
      [1, "a2", "ib-a", ["mlx5_0", "mlx5_1"]],
    ]);
    assertEquals(first.shards[0].hca_ports.map((p) => `${p.hca}:${p.port}`), [
      "mlx5_0:1",
      "mlx5_1:1",
    ]);
    // Each shard's command: SGLang's multi-node recipe and the fabric's NCCL environment.
    const leader = first.shards[0].argv.join(" ");
    assertStringIncludes(leader, "--tp-size 8 --enable-metrics --nnodes 2 --node-rank 0");
    assertStringIncludes(first.shards[1].argv.join(" "), "--node-rank 1");
    assertEquals(first.shards[1].env.NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1");
    assertEquals(first.shards[1].env.NCCL_SOCKET_IFNAME, "=eth0");
    assertEquals(first.shards[1].env.GLOO_SOCKET_IFNAME, "eth0");
    // b1 alone on ib-b and c1 on no fabric can never pair up.
    assertEquals(replicas[1].status, "unschedulable");
    assertEquals(replicas[1].explanation.profiles[0].counts, {
      insufficient_gpus: 2,
      no_fabric: 1,
      fabric_too_small: 1,
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan refuses bad input with exit 2 and the path of the bad field", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const bad = async (name: string, text: string) => {
      await Deno.writeTextFile(`${dir}/${name}`, text);
      return `${dir}/${name}`;
    };
    const cases: [string[], string][] = [
      [["--deployment", QWEN], "--cluster FILE is required"],
      [["--cluster", CLUSTER], "--deployment FILE is required"],
      [
        ["--cluster", "/nonexistent.json", "--deployment", QWEN],
        "cannot read /nonexistent.json: no such file",
      ],
      [
        ["--cluster", await bad("c1.json", "{"), "--deployment", QWEN],
        "(top level): not valid JSON",
      ],
      [
        [
          "--cluster",
          await bad("c2.json", '{"nodes": [{"id": "n1", "gpus": [{"index": -1, "class": null}]}]}'),
          "--deployment",
          QWEN,
        ],
        "nodes[0].gpus[0].index",
      ],
      [
        [
          "--cluster",
          await bad(
            "c3.json",
            '{"nodes": [{"id": "n1", "gpus": [{"index": 0, "class": "l4-22g"}], "allocations": [{"replica_id": "r", "shard_id": "r/0", "gpu_indices": [1]}]}]}',
          ),
          "--deployment",
          QWEN,
        ],
        "nodes[0].allocations[0].gpu_indices: GPU 1 does not exist on node n1",
      ],
      [
        [
          "--cluster",
          await bad("c4.json", '{"nodes": [{"id": "n1"}, {"id": "n1"}]}'),
          "--deployment",
          QWEN,
        ],
        "nodes[1].id: node id n1 appears twice",
      ],
      [
        ["--cluster", CLUSTER, "--deployment", await bad("d.yaml", "name: X\n")],
        "name: must be a lower-case name",
      ],
      [
        ["--cluster", CLUSTER, "--deployment", QWEN, "--replicas=-1"],
        "--replicas must be a whole number",
      ],
      [["--cluster", CLUSTER, "--deployment", QWEN, "--replicas"], "argument missing"],
    ];
    for (const [args, message] of cases) {
      const r = await plan(args);
      assertEquals(r.code, 2, args.join(" "));
      assertStringIncludes(r.err, message);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("schema deployment prints the JSON Schema", async () => {
  let out = "";
  const code = await main(["schema", "deployment"], { out: (t) => out += t, err: () => {} });
  assertEquals(code, 0);
  assertEquals(JSON.parse(out).title, "llmgw deployment");
});

Deno.test("plan refuses a node that lists one fabric twice", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fabric = { fabric: "ib-a", hcas: ["mlx5_0"], rate_gbps: 400 };
    await Deno.writeTextFile(
      `${dir}/c.json`,
      JSON.stringify({ nodes: [{ id: "n1", fabrics: [fabric, { ...fabric, hcas: ["mlx5_1"] }] }] }),
    );
    const r = await plan(["--cluster", `${dir}/c.json`, "--deployment", QWEN]);
    assertEquals(r.code, 2);
    assertStringIncludes(r.err, "nodes[0].fabrics[1].fabric: fabric ib-a appears twice");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
