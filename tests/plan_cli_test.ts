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
      "127.0.0.1",
      "--port",
      "20000",
      "--tensor-parallel-size",
      "4",
      "--pipeline-parallel-size",
      "1",
      "--quantization",
      "awq",
    ],
    env: { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "0,1,2,3" },
  }]);
  // Ports are the agent's: the dry run shows the blocks a fresh agent with the
  // default range would take on the node, one block of 10 per shard.
  assertEquals(shards[1][0].argv.slice(7, 9), ["--port", "20010"]);
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
  // A placed replica carries no per-node detail unless asked for.
  assertEquals([first.groups, first.nodes], [undefined, undefined]);
  const detailed = await plan(["--cluster", CLUSTER, "--deployment", QWEN, "--json", "--detail"]);
  const again = (JSON.parse(detailed.out) as { replicas: PlannedReplica[] }).replicas[2];
  assertEquals(
    again.explanation.profiles[0].nodes?.find((n) => n.node === "rtx4090-8x-server")?.message,
    "needs 4 free rtx4090-24g GPUs, has 0 free, 8 allocated of 8",
  );
});

Deno.test("plan exits 3 and explains every node when nothing fits, grouped by reason", async () => {
  const r = await plan(["--cluster", CLUSTER, "--deployment", LLAMA, "--json"]);
  assertEquals(r.code, 3);
  // The a100 profile's class exists nowhere: a warning, not an error.
  assertStringIncludes(r.err, "warning");
  assertStringIncludes(r.err, "no node in the cluster has a100-80g GPUs");
  const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
  assertEquals(replicas.length, 2);
  const grouped = replicas[0].explanation.profiles[0];
  assertEquals(grouped.nodes, undefined);
  assertEquals(grouped.groups, [
    {
      reason: "no_gpu_class",
      count: 4,
      message: "no h100-80g GPUs (they have h200-140g, l40s-45g, rtx4080super-16g, rtx4090-24g)",
      examples: ["h200-sxm-vm", "l40s-pcie-vm", "rtx4080super-workstation"],
    },
    {
      // A 1-GPU VM can never hold a 4-GPU shard: said apart from "insufficient" (issue #23).
      reason: "node_too_small",
      count: 1,
      message:
        "they have only 1 h100-80g GPU; a shard needs 4 on one node, so this profile can never fit: use nodes: 4 (1 GPU per node) or a smaller tensor_parallel",
      examples: ["h100-sxm-vm"],
    },
    {
      reason: "compute_capability",
      count: 1,
      message: "fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report unknown",
      examples: ["dgx-h100-8x-nics"],
    },
  ]);
  // --detail: every node with its own message.
  const d = await plan(["--cluster", CLUSTER, "--deployment", LLAMA, "--json", "--detail"]);
  assertEquals(d.code, 3);
  const h100 = (JSON.parse(d.out) as { replicas: PlannedReplica[] }).replicas[0].explanation
    .profiles[0];
  assertEquals(h100.counts, { no_gpu_class: 4, node_too_small: 1, compute_capability: 1 });
  assertEquals(h100.groups, grouped.groups);
  assertEquals(h100.nodes?.length, 6);
  assertEquals(
    h100.nodes!.find((n) => n.node === "h100-sxm-vm")!.message,
    "node has only 1 h100-80g GPU; a shard needs 4 on one node, so this profile can never fit: use nodes: 4 (1 GPU per node) or a smaller tensor_parallel",
  );
  // The recorded DGX CSV has no compute_cap column: fp8 cannot be proven safe.
  assertEquals(
    h100.nodes!.find((n) => n.node === "dgx-h100-8x-nics")!.message,
    "fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report unknown",
  );
});

Deno.test("plan prints text for people: groups by default, every node with --detail", async () => {
  const r = await plan(["--cluster", CLUSTER, "--deployment", QWEN, "--replicas", "1"]);
  assertEquals(r.code, 0);
  assertStringIncludes(r.out, "replica qwen-32b-r0: placed");
  assertStringIncludes(r.out, "rtx4090-8x-server  0,1,2,3");
  // A placed replica: no per-node lines without --detail.
  assertEquals(r.out.includes("no_gpu_class"), false);
  const placedDetail = await plan([
    "--cluster",
    CLUSTER,
    "--deployment",
    QWEN,
    "--replicas",
    "1",
    "--detail",
  ]);
  assertStringIncludes(placedDetail.out, "      h100-sxm-vm: no_gpu_class: no rtx4090-24g GPUs");
  // Unschedulable: one line per reason, with counts.
  const u = await plan(["--cluster", CLUSTER, "--deployment", LLAMA, "--replicas", "1"]);
  assertEquals(u.code, 3);
  assertStringIncludes(
    u.out,
    "      1 node: compute_capability — fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report unknown (dgx-h100-8x-nics)\n",
  );
  assertStringIncludes(u.out, "      4 nodes: no_gpu_class — no h100-80g GPUs (they have");
  assertEquals(u.out.includes("dgx-h100-8x-nics: compute_capability"), false);
  const ud = await plan([
    "--cluster",
    CLUSTER,
    "--deployment",
    LLAMA,
    "--replicas",
    "1",
    "--detail",
  ]);
  assertStringIncludes(
    ud.out,
    "      dgx-h100-8x-nics: compute_capability: fp8 needs compute capability ≥ 8.9; h100-80g GPUs here report unknown\n",
  );
  assertEquals(ud.out.includes("1 node: compute_capability"), false);
});

Deno.test("plan --json stays small: an unschedulable replica's size does not grow with the cluster", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // n nodes that each lack the profile's class or have too few GPUs of it.
    const cluster = async (n: number) => {
      const nodes = Array.from({ length: n }, (_, i) => ({
        id: `node-${i}`,
        gpus: Array.from({ length: i % 2 === 0 ? 8 : 2 }, (_, g) => ({
          index: g,
          class: i % 2 === 0 ? "a100-80g" : "h100-80g",
          compute_capability: i % 2 === 0 ? "8.0" : "9.0",
        })),
      }));
      await Deno.writeTextFile(`${dir}/c${n}.json`, JSON.stringify({ nodes }));
      return `${dir}/c${n}.json`;
    };
    await Deno.writeTextFile(
      `${dir}/d.yaml`,
      "name: big\nmodel: org/big\nprofiles:\n  - {name: h100, engine: vllm, gpu_class: h100-80g, tensor_parallel: 8}\n",
    );
    const sizes: number[] = [];
    for (const n of [10, 1_000]) {
      const r = await plan([
        "--cluster",
        await cluster(n),
        "--deployment",
        `${dir}/d.yaml`,
        "--json",
      ]);
      assertEquals(r.code, 3, r.err);
      const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
      assertEquals(replicas[0].explanation.profiles[0].groups?.map((g) => [g.reason, g.count]), [
        ["no_gpu_class", n / 2],
        ["node_too_small", n / 2],
      ]);
      sizes.push(r.out.length);
    }
    // Only the digits of the counts grow (a few bytes), not one entry per node.
    assertOk(sizes[1] - sizes[0] < 100, `JSON grew from ${sizes[0]} to ${sizes[1]} bytes`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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
    // The fabric passed over, and why.
    assertStringIncludes(
      first.explanation.summary,
      "fits on a1, a2 over fabric ib-a (of 4 nodes); fabric ib-b passed over: only 1 eligible node, needs 2",
    );
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
      [
        ["--cluster", CLUSTER, "--deployment", QWEN, "--replicas"],
        "plan: --replicas needs a value",
      ],
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

Deno.test("plan --help documents --detail", async () => {
  const r = await plan(["--help"]);
  assertEquals(r.code, 0);
  assertStringIncludes(r.out, "--detail");
  assertStringIncludes(r.out, "grouped by reason");
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

Deno.test("plan refuses, as apply does, a profile whose engine arguments set a flag llmgw owns", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-plan-owned-" });
  try {
    const file = `${dir}/owned.yaml`;
    await Deno.writeTextFile(
      file,
      (await Deno.readTextFile(QWEN)).replace(
        /tensor_parallel: (\d+)/,
        'tensor_parallel: $1\n    engine_args: ["--tensor-parallel-size", "2"]',
      ),
    );
    const r = await plan(["--cluster", CLUSTER, "--deployment", file]);
    assertEquals(r.code, 2, r.out);
    assertStringIncludes(r.err, "profiles[0].engine_args");
    assertStringIncludes(r.err, "--tensor-parallel-size");
    assertEquals(r.out, "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan warns about a profile that can never fit and says why on every node (issue #23)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const node = (id: string, engines: Record<string, string> | null) => ({
      id,
      gpus: [0, 1, 2, 3].map((index) => ({ index, class: "l40s-45g", compute_capability: "8.9" })),
      ...(engines === null ? {} : { engine_versions: engines }),
    });
    // l1 reports vLLM only; l2 is an older cluster file's node, without engine_versions.
    await Deno.writeTextFile(
      `${dir}/cluster.json`,
      JSON.stringify({ nodes: [node("l1", { vllm: "0.11.1" }), node("l2", null)] }),
    );
    const deployment = (engine: string, tp: number, replicas = 1) =>
      `name: q\nmodel: org/q\nreplicas: ${replicas}\nprofiles:\n  - {name: p, engine: ${engine}, gpu_class: l40s-45g, tensor_parallel: ${tp}}\n`;
    const run = async (text: string, extra: string[] = []) => {
      await Deno.writeTextFile(`${dir}/d.yaml`, text);
      return await plan([
        "--cluster",
        `${dir}/cluster.json`,
        "--deployment",
        `${dir}/d.yaml`,
        ...extra,
      ]);
    };
    const tp8 = await run(deployment("vllm", 8));
    assertEquals(tp8.code, 3);
    assertStringIncludes(
      tp8.err,
      `llmgw: warning: ${dir}/d.yaml: profiles[0].gpus_per_node: profile "p": a shard needs 8 l40s-45g GPUs on one node, but no node has more than 4, so this profile can never be placed: use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel\n`,
    );
    assertStringIncludes(
      tp8.out,
      "2 nodes: node_too_small — they have only 4 l40s-45g GPUs; a shard needs 8 on one node",
    );
    // More replicas than 8 GPUs hold: warned, and the rest are unschedulable.
    const many = await run(deployment("vllm", 2, 5));
    assertEquals(many.code, 3);
    assertStringIncludes(
      many.err,
      "replicas: 5 replicas need 10 l40s-45g GPUs (2 each), but the cluster has 8 in all: at most 4 can ever run\n",
    );
    // SGLang goes to the node whose engines are unknown, never to the vLLM-only one.
    const sglang = await run(deployment("sglang", 2, 3), ["--json"]);
    assertEquals(sglang.code, 3, sglang.err);
    const { replicas } = JSON.parse(sglang.out) as { replicas: PlannedReplica[] };
    assertEquals(
      replicas.map((r) => r.status === "placed" ? r.shards[0].node : r.status),
      ["l2", "l2", "unschedulable"],
    );
    const why = replicas[2].explanation.profiles[0].groups!;
    assertEquals(why.map((g) => [g.reason, g.count, g.message]), [
      ["engine_missing", 1, "needs engine sglang; they have vllm 0.11.1 (1)"],
      ["insufficient_gpus", 1, "needs 2 free l40s-45g GPUs, has 0 free; 1 with GPUs allocated"],
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// The model's facts (issue #25 item 6): --model-config, or a local model path.

const MODEL_CONFIGS = fixturePath("model_configs");

async function withDeployment(yaml: string, fn: (path: string) => Promise<void>) {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/d.yaml`, yaml);
    await fn(`${dir}/d.yaml`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const LLAMA_405B_TP8 = `name: llama-405b
model: meta-llama/Llama-3.1-405B-Instruct
profiles:
  - {name: h100-tp8, engine: vllm, gpu_class: h100-80g, tensor_parallel: 8}
`;

Deno.test("plan refuses a model no profile's GPUs can hold, with the numbers (exit 2)", async () => {
  await withDeployment(LLAMA_405B_TP8, async (d) => {
    const r = await plan([
      "--cluster",
      CLUSTER,
      "--deployment",
      d,
      "--model-config",
      `${MODEL_CONFIGS}/llama-3.1-405b-instruct`,
    ]);
    assertEquals(r.code, 2, r.err);
    assertStringIncludes(
      r.err,
      'profiles[0].gpu_class: profile "h100-tp8": insufficient_gpu_memory: needs 102.4 GiB per GPU ' +
        "(weights 94.5 + KV cache for one 131072-token sequence 7.9) but an h100-80g GPU offers " +
        "71.7 GiB (79.6 GiB × 0.90)",
    );
    // Without the model's facts nothing is known about memory: not refused, not filtered.
    const blind = await plan(["--cluster", CLUSTER, "--deployment", d]);
    assertOk(blind.code !== 2, blind.err);
    assertOk(!blind.out.includes("insufficient_gpu_memory"), blind.out);
  });
});

Deno.test("plan: a profile too small beside one that can hold the model is a warning, and explained", async () => {
  const yaml = LLAMA_405B_TP8 +
    "  - {name: h100-2x8, engine: vllm, gpu_class: h100-80g, tensor_parallel: 8, pipeline_parallel: 2, nodes: 2}\n";
  await withDeployment(yaml, async (d) => {
    const r = await plan([
      "--cluster",
      CLUSTER,
      "--deployment",
      d,
      "--model-config",
      `${MODEL_CONFIGS}/llama-3.1-405b-instruct/`,
    ]);
    // One DGX: two nodes of 8 are not there, so unschedulable (exit 3), not refused.
    assertEquals(r.code, 3, r.err);
    assertStringIncludes(
      r.err,
      "llmgw: warning: " + d + ': profiles[0].gpu_class: profile "h100-tp8"',
    );
    assertStringIncludes(
      r.out,
      "1 node: insufficient_gpu_memory — needs 102.4 GiB per GPU (weights 94.5 + KV cache for " +
        "one 131072-token sequence 7.9) but an h100-80g GPU offers 71.7 GiB (79.6 GiB × 0.90) " +
        "(dgx-h100-8x-nics)",
    );
  });
});

Deno.test("plan refuses a tensor_parallel that does not divide the heads, from a local model path", async () => {
  const model = await Deno.makeTempDir();
  try {
    await Deno.copyFile(`${MODEL_CONFIGS}/qwen2.5-7b-instruct/config.json`, `${model}/config.json`);
    await Deno.writeFile(`${model}/model.safetensors`, new Uint8Array(1000));
    const yaml = `name: qwen
model: ${model}
profiles:
  - {name: tp8, engine: vllm, gpu_class: rtx4090-24g, tensor_parallel: 8}
`;
    await withDeployment(yaml, async (d) => {
      const r = await plan(["--cluster", CLUSTER, "--deployment", d]);
      assertEquals(r.code, 2, r.err);
      assertStringIncludes(
        r.err,
        'profiles[0].tensor_parallel: profile "tp8": Total number of attention heads (28) must be ' +
          "divisible by tensor parallel size (8)",
      );
    });
  } finally {
    await Deno.remove(model, { recursive: true });
  }
});

Deno.test("plan: a --model-config that cannot be read is bad input naming the file", async () => {
  const r = await plan([
    "--cluster",
    CLUSTER,
    "--deployment",
    LLAMA,
    "--model-config",
    `${MODEL_CONFIGS}/mixtral-8x7b-instruct`,
  ]);
  assertEquals(r.code, 2);
  assertStringIncludes(r.err, "no model.safetensors.index.json and no *.safetensors file");
  // The 70B's own facts leave its plan as it was.
  const ok = await plan([
    "--cluster",
    CLUSTER,
    "--deployment",
    LLAMA,
    "--model-config",
    `${MODEL_CONFIGS}/llama-3.1-70b-instruct`,
  ]);
  const before = await plan(["--cluster", CLUSTER, "--deployment", LLAMA]);
  assertEquals([ok.code, ok.out], [before.code, before.out]);
});

Deno.test("plan: a local model path that cannot be read here is a warning; nothing is refused for memory", async () => {
  const yaml = LLAMA_405B_TP8.replace(
    "meta-llama/Llama-3.1-405B-Instruct",
    "/nonexistent/llama-405b",
  );
  await withDeployment(yaml, async (d) => {
    const r = await plan(["--cluster", CLUSTER, "--deployment", d]);
    assertOk(r.code !== 2, r.err);
    assertStringIncludes(
      r.err,
      "llmgw: warning: the model's memory and tensor_parallel were not checked: " +
        "Cannot read model facts: no /nonexistent/llama-405b/config.json",
    );
    assertOk(!r.out.includes("insufficient_gpu_memory"), r.out);
  });
});

Deno.test("plan reads the nodes' model caches from the cluster file: insufficient_disk and holders, as the control plane (issue #25 item 5)", async () => {
  const commit = "4b1c2a9e0f3d5c7b8a6e4d2c0b9a8f7e6d5c4b3a";
  const repo = "meta-llama/Llama-3.1-8B-Instruct";
  const GIB = 2 ** 30;
  const node = (id: string, model_cache?: unknown) => ({
    id,
    gpus: [{ index: 0, class: "l40s-45g" }],
    ...(model_cache === undefined ? {} : { model_cache }),
  });
  const held = {
    repo,
    commit,
    bytes: 16 * GIB,
    state: "complete",
    bytes_done: 16 * GIB,
    last_used: null,
    pinned: false,
  };
  const cluster = {
    nodes: [
      node("n1", { room_bytes: 5 * GIB, revisions: [] }),
      node("n2", { room_bytes: 100 * GIB, revisions: [] }),
      node("n3", { room_bytes: 0, revisions: [held] }),
    ],
  };
  const yaml = `name: llama-8b
model: ${repo}
replicas: 3
profiles:
  - {name: l40s, engine: vllm, gpu_class: l40s-45g, tensor_parallel: 1}
`;
  await withDeployment(yaml, async (d) => {
    const dir = d.slice(0, d.lastIndexOf("/"));
    await Deno.writeTextFile(`${dir}/cluster.json`, JSON.stringify(cluster));
    const args = [
      "--cluster",
      `${dir}/cluster.json`,
      "--deployment",
      d,
      "--model-config",
      `${MODEL_CONFIGS}/llama-3.1-8b-instruct`,
    ];
    const r = await plan([...args, "--model-commit", commit, "--json"]);
    assertEquals(r.code, 3, r.err);
    const { replicas } = JSON.parse(r.out) as { replicas: PlannedReplica[] };
    // The holder first (the node order alone would take n2), then n2; n1's cache has no room.
    assertEquals(
      replicas.map((x) => x.status === "placed" ? x.shards[0].node : x.status),
      ["n3", "n2", "unschedulable"],
    );
    assertStringIncludes(replicas[0].explanation.summary, `n3 holds ${repo}@4b1c2a9`);
    assertEquals(replicas[0].explanation.profiles[0].counts, { insufficient_disk: 1 });
    assertEquals(replicas[2].explanation.profiles[0].counts, {
      insufficient_disk: 1,
      insufficient_gpus: 2,
    });
    // The people's text names the numbers, as `llmgw explain` does.
    const text = await plan([...args, "--model-commit", commit]);
    assertStringIncludes(text.out, `n3 holds ${repo}@4b1c2a9`);
    assertStringIncludes(
      text.out,
      `1 node: insufficient_disk — needs 15.0 GiB for ${repo}@4b1c2a9 in its model cache, which has room for 5.0 GiB under the high watermark after evicting all it may (n1)`,
    );
    // Without the commit ("main" resolves only at the hub) no node is a holder,
    // and the plan says why; the disk is still weighed, so n3 (no room) needs
    // the whole download, as the control plane would weigh it.
    const blind = await plan([...args, "--json"]);
    assertStringIncludes(blind.err, "no node counts as holding");
    assertStringIncludes(blind.err, "--model-commit");
    const order = (JSON.parse(blind.out) as { replicas: PlannedReplica[] }).replicas
      .map((x) => x.status === "placed" ? x.shards[0].node : x.status);
    assertEquals(order, ["n2", "unschedulable", "unschedulable"]);
    // A bad or contradicting commit is bad input.
    assertStringIncludes(
      (await plan([...args, "--model-commit", "main"])).err,
      "--model-commit must be a commit of 40 hex digits",
    );
  });
});
