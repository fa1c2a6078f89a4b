/**
 * Table tests of the SGLang plugin (design §8, §9.3, §15): exact command lines
 * and environments for single- and multi-node shards, run both directly and
 * through prepareShard (the shared checks and the design §5.3 environment),
 * refusals, probes, loading-progress patterns on real SGLang log lines,
 * metric names and version parsing.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import type { FabricPort } from "../discovery/types.ts";
import { needsFp8Hardware } from "../deployment/quantization.ts";
import { prepareShard } from "./prepare.ts";
import { parseSglangVersion, SGLANG_QUANTIZATIONS, sglangPlugin } from "./sglang.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "./types.ts";

/** Options of {@link shard}. */
interface ShardOptions {
  /** Tensor-parallel size of the replica; default gpus.length × nodes / pp. */
  tp?: number;
  /** Pipeline-parallel size; default 1. */
  pp?: number;
  /** Nodes in the replica; default 1. */
  nodes?: number;
  /** This shard's rank; default 0. */
  rank?: number;
  /** This shard's GPU indices; default [0]. */
  gpus?: number[];
  /** Compute capability of every GPU; default "9.0". */
  cc?: string | null;
  /** Quantization; default none. */
  quantization?: string;
  /** Extra engine arguments. */
  engineArgs?: string[];
  /** Engine options. */
  engineOptions?: Record<string, string | number | boolean>;
  /** Profile env. */
  env?: Record<string, string>;
  /** Fabric kind for multi-node shards; default "ib". */
  fabric?: "ib" | "roce";
  /** The leader's address; default 10.0.0.1. */
  leader?: string;
  /** The leader's lowest GPU index, for its ports; default 0. */
  leaderGpu?: number;
  /** The SGLang version installed on the node; default "0.5.3". */
  engineVersion?: string | null;
}

const IB_PORTS: FabricPort[] = [
  { hca: "mlx5_0", port: 1, link_layer: "infiniband", rate_gbps: 400, roce_v2_gid_index: null },
  { hca: "mlx5_1", port: 1, link_layer: "infiniband", rate_gbps: 400, roce_v2_gid_index: null },
];
const ROCE_PORTS: FabricPort[] = [
  { hca: "mlx5_2", port: 1, link_layer: "roce", rate_gbps: 200, roce_v2_gid_index: 3 },
  { hca: "mlx5_3", port: 1, link_layer: "roce", rate_gbps: 200, roce_v2_gid_index: 3 },
];

/** A shard launch with the ports its agent filled in. */
function shard(o: ShardOptions = {}): ShardLaunch {
  const gpus = o.gpus ?? [0];
  const nodes = o.nodes ?? 1;
  const pp = o.pp ?? 1;
  const rank = o.rank ?? 0;
  const leaderGpu = o.leaderGpu ?? Math.min(...gpus);
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "chat",
    replica_id: "chat-r0",
    shard_id: `chat-r0-s${rank}`,
    model: "meta-llama/Llama-3.1-70B-Instruct",
    served_model_name: "llama-70b",
    profile: {
      name: "p",
      tensor_parallel: o.tp ?? gpus.length * nodes / pp,
      pipeline_parallel: pp,
      nodes,
      gpus_per_node: gpus.length,
      quantization: o.quantization ?? "none",
      engine_args: o.engineArgs ?? [],
      engine_options: o.engineOptions ?? {},
      env: o.env ?? {},
    },
    rank,
    world: {
      nodes,
      leader_addr: o.leader ?? "10.0.0.1",
      rendezvous_port: 29500 + leaderGpu,
      leader_http_port: 8000 + leaderGpu,
    },
    gpus: gpus.map((index) => ({
      index,
      class: "h100-80g",
      compute_capability: o.cc === undefined ? "9.0" : o.cc,
    })),
    fabric: nodes === 1 ? null : {
      name: "ib0",
      ports: (o.fabric === "roce" ? ROCE_PORTS : IB_PORTS).map((p) => ({ ...p })),
    },
    node: { id: `n${rank}`, mgmt_addr: `10.0.0.${rank + 1}`, mgmt_interface: "eth0" },
    port: 8000 + Math.min(...gpus),
    engine_version: o.engineVersion === undefined ? "0.5.3" : o.engineVersion,
  };
}

const HEAD = ["python3", "-m", "sglang.launch_server"];
const MODEL = ["--model-path", "meta-llama/Llama-3.1-70B-Instruct"];
const NAME = ["--served-model-name", "llama-70b"];

/** The argv up to --tp-size for a shard on `port`. */
function start(port: number): string[] {
  return [...HEAD, ...MODEL, ...NAME, "--host", "127.0.0.1", "--port", String(port)];
}

Deno.test("sglang: single-node shards, exact argv and environment", async (t) => {
  const cases: { name: string; gpus: number[]; argv: string[]; visible: string }[] = [
    {
      name: "TP=1 on GPU 3",
      gpus: [3],
      argv: [...start(8003), "--tp-size", "1", "--enable-metrics"],
      visible: "3",
    },
    {
      name: "TP=2 on GPUs 0,1",
      gpus: [0, 1],
      argv: [...start(8000), "--tp-size", "2", "--enable-metrics"],
      visible: "0,1",
    },
    {
      name: "TP=4 on GPUs 4-7",
      gpus: [4, 5, 6, 7],
      argv: [...start(8004), "--tp-size", "4", "--enable-metrics"],
      visible: "4,5,6,7",
    },
    {
      name: "TP=8 on a whole node",
      gpus: [0, 1, 2, 3, 4, 5, 6, 7],
      argv: [...start(8000), "--tp-size", "8", "--enable-metrics"],
      visible: "0,1,2,3,4,5,6,7",
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const launch = shard({ gpus: c.gpus });
      assertEquals(sglangPlugin.validate(launch), []);
      assertEquals(sglangPlugin.command(launch), { argv: c.argv, env: {} });
      const spec = prepareShard(sglangPlugin, launch);
      assertEquals(spec.problems, []);
      // A single-node shard gets the GPU variables and nothing for NCCL (design §5.3).
      assertEquals(spec.command, {
        argv: c.argv,
        env: { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: c.visible },
      });
    });
  }
});

const IB_ENV = {
  NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1",
  NCCL_SOCKET_IFNAME: "=eth0",
  GLOO_SOCKET_IFNAME: "eth0",
};
const EIGHT = [0, 1, 2, 3, 4, 5, 6, 7];

Deno.test("sglang: multi-node shards, exact argv per rank", async (t) => {
  const cases: { name: string; launch: ShardLaunch; argv: string[] }[] = [
    {
      name: "2×8 TP16, rank 0",
      launch: shard({ nodes: 2, rank: 0, gpus: EIGHT }),
      argv: [
        ...start(8000),
        ...["--tp-size", "16", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:29500"],
      ],
    },
    {
      // The same command; only --node-rank differs (engine reference §2.2).
      name: "2×8 TP16, rank 1",
      launch: shard({ nodes: 2, rank: 1, gpus: EIGHT }),
      argv: [
        ...start(8000),
        ...["--tp-size", "16", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"],
      ],
    },
    {
      name: "TP8×PP2 across 2 nodes, rank 0",
      launch: shard({ nodes: 2, rank: 0, gpus: EIGHT, pp: 2 }),
      argv: [
        ...start(8000),
        ...["--tp-size", "8", "--pp-size", "2", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:29500"],
      ],
    },
    {
      name: "TP8×PP2 across 2 nodes, rank 1",
      launch: shard({ nodes: 2, rank: 1, gpus: EIGHT, pp: 2 }),
      argv: [
        ...start(8000),
        ...["--tp-size", "8", "--pp-size", "2", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"],
      ],
    },
    {
      // A rank on GPUs 4-7 serves its dummy health server on its own port;
      // the rendezvous is still the leader's.
      name: "TP4×PP2, rank 1 on GPUs 4-7 of its node",
      launch: shard({ nodes: 2, rank: 1, gpus: [4, 5, 6, 7], pp: 2, leaderGpu: 0 }),
      argv: [
        ...start(8004),
        ...["--tp-size", "4", "--pp-size", "2", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"],
      ],
    },
    {
      name: "IPv6 leader address in brackets",
      launch: shard({ nodes: 2, rank: 1, gpus: EIGHT, leader: "fd00::1" }),
      argv: [
        ...start(8000),
        ...["--tp-size", "16", "--enable-metrics"],
        ...["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "[fd00::1]:29500"],
      ],
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      assertEquals(sglangPlugin.command(c.launch), { argv: c.argv, env: {} });
      const spec = prepareShard(sglangPlugin, c.launch);
      assertEquals(spec.problems, []);
      assertEquals(spec.command?.argv, c.argv);
      assertEquals(spec.command?.env, {
        CUDA_DEVICE_ORDER: "PCI_BUS_ID",
        CUDA_VISIBLE_DEVICES: c.launch.gpus.map((g) => g.index).join(","),
        ...IB_ENV,
      });
    });
  }
});

Deno.test("sglang: the fabric decides the NCCL environment (design §5.3)", async (t) => {
  const cases: { name: string; fabric: "ib" | "roce"; env: Record<string, string> }[] = [
    { name: "InfiniBand: no GID index", fabric: "ib", env: IB_ENV },
    {
      name: "RoCE: RoCE v2 GID index",
      fabric: "roce",
      env: {
        NCCL_IB_HCA: "=mlx5_2:1,mlx5_3:1",
        NCCL_IB_GID_INDEX: "3",
        NCCL_SOCKET_IFNAME: "=eth0",
        GLOO_SOCKET_IFNAME: "eth0",
      },
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const spec = prepareShard(
        sglangPlugin,
        shard({ nodes: 2, rank: 1, gpus: EIGHT, fabric: c.fabric }),
      );
      assertEquals(spec.problems, []);
      assertEquals(spec.command?.env, {
        CUDA_DEVICE_ORDER: "PCI_BUS_ID",
        CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7",
        ...c.env,
      });
    });
  }
});

Deno.test("sglang: quantization", async (t) => {
  await t.step("none adds no flag; every other accepted value is passed as is", () => {
    assertOk(SGLANG_QUANTIZATIONS.includes("none"));
    for (const q of SGLANG_QUANTIZATIONS) {
      const spec = prepareShard(sglangPlugin, shard({ quantization: q }));
      assertEquals(spec.problems, [], q);
      const argv = spec.command?.argv ?? [];
      const i = argv.indexOf("--quantization");
      assertEquals(i === -1 ? null : argv[i + 1], q === "none" ? null : q, q);
    }
  });
  await t.step("the fp8 ones the plugin offers are the ones the shared rule refuses", () => {
    // From SGLang's sources (deployment/quantization.ts): these compute in fp8.
    assertEquals(SGLANG_QUANTIZATIONS.filter(needsFp8Hardware), [
      "fp8",
      "w8a8_fp8",
      "w4afp8",
      "modelopt",
      "modelopt_fp8",
    ]);
    for (const q of SGLANG_QUANTIZATIONS.filter(needsFp8Hardware)) {
      const spec = prepareShard(sglangPlugin, shard({ quantization: q, cc: "8.0" }));
      assertStringIncludes(spec.problems.join("\n"), "needs compute capability ≥ 8.9", q);
    }
  });
  await t.step("fp8 on compute capability 9.0 is allowed", () => {
    const spec = prepareShard(sglangPlugin, shard({ gpus: [0, 1], quantization: "fp8" }));
    assertEquals(spec.problems, []);
    assertEquals(spec.command?.argv, [
      ...start(8000),
      ...["--tp-size", "2", "--quantization", "fp8", "--enable-metrics"],
    ]);
  });
  const refused: { name: string; launch: ShardLaunch; includes: string }[] = [
    {
      name: "fp8 on compute capability 8.0 is refused by the shared checks",
      launch: shard({ gpus: [0, 1], quantization: "fp8", cc: "8.0" }),
      includes: "fp8 needs compute capability ≥ 8.9; GPU 0 reports 8.0",
    },
    {
      name: "w8a8_fp8 on compute capability 8.6 is refused too",
      launch: shard({ quantization: "w8a8_fp8", cc: "8.6" }),
      includes: "w8a8_fp8 needs compute capability ≥ 8.9",
    },
    {
      name: "modelopt (FP8 by default) on compute capability 8.0 is refused too",
      launch: shard({ quantization: "modelopt", cc: "8.0" }),
      includes: "modelopt (an fp8 format) needs compute capability ≥ 8.9; GPU 0 reports 8.0",
    },
    {
      name: "w4afp8 on an unknown compute capability is refused",
      launch: shard({ quantization: "w4afp8", cc: null }),
      includes: "w4afp8 needs compute capability ≥ 8.9; GPU 0 reports unknown",
    },
    {
      name: "an unsupported quantization is refused",
      launch: shard({ quantization: "exl2" }),
      includes: 'quantization "exl2" is not supported by this engine',
    },
    {
      // Gone from SGLang's current --quantization choices.
      name: "marlin is refused",
      launch: shard({ quantization: "marlin" }),
      includes: 'quantization "marlin" is not supported',
    },
  ];
  for (const c of refused) {
    await t.step(c.name, () => {
      const spec = prepareShard(sglangPlugin, c.launch);
      assertEquals(spec.command, null);
      assertEquals(spec.probes, null);
      assertEquals(spec.problems.length, 1, spec.problems.join("\n"));
      assertStringIncludes(spec.problems[0], c.includes);
    });
  }
});

Deno.test("sglang: extra engine args are appended after llmgw's", () => {
  const extra = ["--mem-fraction-static", "0.85", "--context-length=32768", "--trust-remote-code"];
  const single = prepareShard(sglangPlugin, shard({ gpus: [0, 1], engineArgs: extra }));
  assertEquals(single.problems, []);
  assertEquals(single.command?.argv, [
    ...start(8000),
    ...["--tp-size", "2", "--enable-metrics"],
    ...extra,
  ]);
  const multi = prepareShard(
    sglangPlugin,
    shard({ nodes: 2, rank: 1, gpus: EIGHT, engineArgs: ["--dist-timeout", "1800"] }),
  );
  assertEquals(multi.problems, []);
  assertEquals(multi.command?.argv.slice(-8), [
    ...["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"],
    ...["--dist-timeout", "1800"],
  ]);
});

Deno.test("sglang: a profile whose parallelism does not add up is refused at launch", () => {
  // The deployment rule (deployment/parallelism.ts), checked again before anything starts.
  const cases: { launch: ShardLaunch; problem: string }[] = [
    {
      launch: shard({ gpus: [0, 1], tp: 4 }),
      problem:
        'profile "p": cannot launch: nodes × gpus_per_node (1 × 2 = 2) must equal tensor_parallel × pipeline_parallel (4 × 1 = 4)',
    },
    {
      // 3 nodes × 4 GPUs = TP 6 × PP 2, but a TP group of 6 would straddle nodes of 4.
      launch: shard({ gpus: [0, 1, 2, 3], nodes: 3, tp: 6, pp: 2 }),
      problem:
        'profile "p": cannot launch: tensor_parallel 6 must divide the GPUs of a node (4) or span whole nodes (a multiple of 4)',
    },
  ];
  for (const c of cases) {
    const spec = prepareShard(sglangPlugin, c.launch);
    assertEquals(spec.command, null);
    assertOk(spec.problems.includes(c.problem), spec.problems.join("\n"));
  }
});

Deno.test("sglang: engine args that conflict with llmgw are refused", async (t) => {
  const cases: { args: string[]; includes: string; excludes?: string }[] = [
    {
      args: ["--port", "1"],
      includes:
        'sets --port, which llmgw sets for sglang from the profile and placement; remove "--port"',
    },
    // SGLang's docs write --tp; argparse takes it as an abbreviation of --tp-size.
    {
      args: ["--tp", "2"],
      includes:
        'sets --tp-size, which llmgw sets for sglang from the profile and placement; remove "--tp"',
    },
    { args: ["--tp-size=2"], includes: "sets --tp-size, which llmgw sets for sglang" },
    { args: ["--tensor-parallel-size", "2"], includes: "sets --tensor-parallel-size" },
    { args: ["--dist-init-addr", "x"], includes: "sets --dist-init-addr" },
    { args: ["--nccl-init-addr=x:1"], includes: "sets --nccl-init-addr" },
    {
      args: ["--model", "other/model"],
      includes:
        'sets --model-path, which llmgw sets for sglang from the profile and placement; remove "--model"',
    },
    { args: ["--host", "127.0.0.1"], includes: "sets --host" },
    { args: ["--served-model-name", "x"], includes: "sets --served-model-name" },
    { args: ["--pp-size", "2"], includes: "sets --pp-size" },
    { args: ["--dp", "2"], includes: "sets --dp-size" },
    { args: ["--nnodes", "2"], includes: "sets --nnodes" },
    { args: ["--node-rank", "1"], includes: "sets --node-rank" },
    { args: ["--quantization", "fp8"], includes: "sets --quantization" },
    { args: ["--base-gpu-id", "4"], includes: "sets --base-gpu-id" },
    { args: ["--gpu-id-step=2"], includes: "sets --gpu-id-step" },
    // The file llmgw passes the key in; SGLang takes one (a second is "Multiple config files").
    {
      args: ["--config", "x.yaml"],
      includes: "sets --config, the file llmgw gives sglang its API key in",
    },
    {
      args: ["--conf=x.yaml"],
      includes: "sets --config, the file llmgw gives sglang its API key in",
    },
    {
      // llmgw gives every shard its own key; the profile's must not be echoed into events and logs.
      args: ["--api-key=s3cret"],
      includes:
        "sets --api-key, the sglang API key, which llmgw generates for every shard; remove it",
      excludes: "s3cret",
    },
    { args: ["--api-key", "s3cret"], includes: "sets --api-key, the sglang API key" },
    { args: ["--api=s3cret"], includes: "sets --api-key, the sglang API key", excludes: "s3cret" },
    { args: ["--smg-grpc-mode"], includes: "serves gRPC instead of the HTTP API" },
  ];
  for (const c of cases) {
    await t.step(c.args.join(" "), () => {
      const launch = shard({ engineArgs: ["--trust-remote-code", ...c.args] });
      const problems = sglangPlugin.validate(launch);
      assertEquals(problems.length, 1, problems.join("\n"));
      assertStringIncludes(problems[0], `profile "p": engine_args `);
      assertStringIncludes(problems[0], c.includes);
      if (c.excludes !== undefined) assertOk(!problems[0].includes(c.excludes));
      const spec = prepareShard(sglangPlugin, launch);
      assertEquals(spec.problems, problems);
      assertEquals(spec.command, null);
    });
  }
  await t.step("flags that only share a prefix with owned ones pass", () => {
    const args = ["--quantization-param-path", "kv.json", "--dist-timeout", "600", "--ep", "8"];
    assertEquals(sglangPlugin.validate(shard({ engineArgs: args })), []);
  });
});

Deno.test("sglang: the engine API key goes in a --config file llmgw adds at spawn time", () => {
  assertEquals(sglangPlugin.api_key, { config_file: { flag: "--config", field: "api-key" } });
  const spec = prepareShard(sglangPlugin, shard({}));
  assertEquals(spec.problems, []);
  assertOk(
    !spec.command!.argv.some((a) => a.startsWith("--api") || a.startsWith("--config")),
    spec.command!.argv.join(" "),
  );
  // SGLang reads no key from its environment: a variable in the profile is no key and stays allowed.
  assertEquals(sglangPlugin.validate(shard({ env: { SGLANG_API_KEY: "x" } })), []);
  // --admin-api-key guards SGLang's admin routes, which the agent's proxy never forwards.
  assertEquals(sglangPlugin.validate(shard({ engineArgs: ["--admin-api-key", "x"] })), []);
});

Deno.test("sglang: a version without --config is refused on rank 0, naming the version and the fix", () => {
  const refused = (engineVersion: string | null, rank = 0) =>
    sglangPlugin.validate(shard({ engineVersion, rank, nodes: rank === 0 ? 1 : 2 }));
  // Pre-releases of 0.5.3 count below it (PEP 440): which of them had --config is unverified.
  const preReleases = ["0.5.3rc0", "0.5.3rc2+cu128", "0.5.3.dev20250920", "0.5.3a1", "0.5.3-rc1"];
  for (const old of ["0.5.2", "0.5.2.post1", "0.4.6.post1", "0.5.0rc2", ...preReleases]) {
    assertEquals(refused(old), [
      `SGLang ${old} on node n0 has no --config, so llmgw could pass the shard's API key only in argv, where every local user can read it; upgrade SGLang to 0.5.3 or later`,
    ]);
  }
  // An unknown version is taken to be a current one; later releases keep --config.
  for (const ok of [null, "0.5.3", "0.5.3+cu128", "0.5.3.post1", "0.5.4rc0", "0.5.10", "1.0.0"]) {
    assertEquals(refused(ok), [], String(ok));
  }
  // Ranks ≥ 1 get no key (rank 0 serves the API), so they need no file.
  assertEquals(refused("0.5.2", 1), []);
});

Deno.test("sglang: engine_options are refused (SGLang takes none)", () => {
  const problems = sglangPlugin.validate(
    shard({ engineOptions: { multi_node_backend: "ray", x: 1 } }),
  );
  assertEquals(problems, [
    'profile "p": engine_options.multi_node_backend is not an sglang option (sglang takes no engine_options); pass SGLang flags in engine_args',
    'profile "p": engine_options.x is not an sglang option (sglang takes no engine_options); pass SGLang flags in engine_args',
  ]);
});

Deno.test("sglang: probes", async (t) => {
  await t.step("rank 0 serves HTTP; ready = /health 200 and /v1/models lists the name", () => {
    for (const launch of [shard(), shard({ nodes: 2, rank: 0, gpus: EIGHT })]) {
      const p = sglangPlugin.probes(launch);
      assertEquals(p.serves_http, true);
      // /health is 503 during warm-up: never a liveness check (engine reference §2.3).
      assertEquals(p.liveness, []);
      assertEquals(p.readiness, [
        { path: "/health", expect_status: 200 },
        { path: "/v1/models", expect_status: 200, lists_model: "llama-70b" },
      ]);
      assertEquals(p.loading_progress.length, 1);
    }
  });
  await t.step("ranks ≥ 1 serve no HTTP and have no HTTP checks", () => {
    const p = sglangPlugin.probes(shard({ nodes: 2, rank: 1, gpus: EIGHT }));
    assertEquals(p.serves_http, false);
    assertEquals(p.liveness, []);
    assertEquals(p.readiness, []);
    assertEquals(p.loading_progress, sglangPlugin.probes(shard()).loading_progress);
  });
  await t.step("prepareShard passes the probes through", () => {
    const spec = prepareShard(sglangPlugin, shard({ nodes: 2, rank: 1, gpus: EIGHT }));
    assertEquals(spec.probes, sglangPlugin.probes(shard({ nodes: 2, rank: 1, gpus: EIGHT })));
  });
});

Deno.test("sglang: loading progress patterns match real SGLang log lines", async (t) => {
  const cases: { source: string; line: string; done: string; total: string }[] = [
    {
      // sgl-project/sglang issue #3434 (2 nodes × 8 H100, DeepSeek-R1).
      source: "sglang#3434",
      line:
        "Loading safetensors checkpoint shards:  63% Completed | 100/158 [00:14<00:08,  6.75it/s]",
      done: "100",
      total: "158",
    },
    {
      // sgl-project/sglang PR #7181 (DeepSeek-V3 weight loader).
      source: "sglang#7181",
      line:
        "Loading safetensors checkpoint shards:  74% Completed | 120/163 [00:37<00:12,  3.40it/s]",
      done: "120",
      total: "163",
    },
    {
      // SGLang's documentation notebooks (recorded launch_server output).
      source: "sglang docs, safetensors",
      line:
        "    Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.72s/it]",
      done: "1",
      total: "2",
    },
    {
      source: "sglang docs, pt",
      line: "    Loading pt checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
      done: "0",
      total: "1",
    },
    {
      source: "sglang docs, multi-thread loader",
      line: "    Multi-thread loading shards:  75% Completed | 3/4 [00:02<00:00,  1.16it/s]",
      done: "3",
      total: "4",
    },
  ];
  const patterns = sglangPlugin.probes(shard()).loading_progress.map((p) => new RegExp(p.regex));
  for (const c of cases) {
    await t.step(c.source, () => {
      const m = patterns.map((re) => re.exec(c.line)).find((x) => x !== null);
      assertOk(m, `no pattern matches ${JSON.stringify(c.line)}`);
      assertEquals([m.groups?.done, m.groups?.total], [c.done, c.total]);
    });
  }
  await t.step("other lines do not match", () => {
    for (
      const line of [
        "[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16",
        "Capturing batches (bs=4 avail_mem=20.1 GB):  25%|██▌       | 1/4 [00:00<00:01,  2.1it/s]",
      ]
    ) {
      assertOk(patterns.every((re) => !re.test(line)), line);
    }
  });
});

Deno.test("sglang: metric names", () => {
  const expected = {
    running: ["sglang:num_running_reqs"],
    waiting: ["sglang:num_queue_reqs"],
    kv_cache_usage: ["sglang:token_usage"],
  };
  for (const version of [null, "0.4.6.post1", "0.5.3"]) {
    assertEquals(sglangPlugin.metrics(version), expected);
  }
  assertEquals(prepareShard(sglangPlugin, shard()).metrics, expected);
});

Deno.test("sglang: name, version command and parseVersion", async (t) => {
  assertEquals(sglangPlugin.name, "sglang");
  assertEquals(sglangPlugin.version_command, [
    "python3",
    "-c",
    "import importlib.metadata as m; print(m.version('sglang'))",
  ]);
  const cases: { output: string; version: string | null }[] = [
    { output: "0.5.3\n", version: "0.5.3" },
    { output: "0.4.6.post1\n", version: "0.4.6.post1" },
    { output: "0.5.0rc2", version: "0.5.0rc2" },
    { output: "0.5.3+cu128\n", version: "0.5.3+cu128" },
    { output: "  v0.3.6  \r\n", version: "0.3.6" },
    { output: "sglang==0.4.1", version: "0.4.1" },
    { output: "Name: sglang\nVersion: 0.5.2\n", version: "0.5.2" },
    { output: "some warning from a plugin\n0.5.1\n", version: "0.5.1" },
    {
      output: "Traceback (most recent call last):\n" +
        "importlib.metadata.PackageNotFoundError: No package metadata was found for sglang\n",
      version: null,
    },
    { output: "", version: null },
  ];
  for (const c of cases) {
    await t.step(JSON.stringify(c.output), () => {
      assertEquals(sglangPlugin.parseVersion(c.output), c.version);
      assertEquals(parseSglangVersion(c.output), c.version);
    });
  }
});

Deno.test("sglang: model_path is the --model-path; the served name stays (issue #25 item 4)", () => {
  const dir = "/models/llama-70b";
  const spec = prepareShard(sglangPlugin, { ...shard(), model_path: dir });
  const argv = spec.command!.argv;
  const at = argv.indexOf("--model-path");
  assertEquals(argv.slice(at, at + 4), [
    "--model-path",
    dir,
    "--served-model-name",
    shard().served_model_name,
  ]);
  assertOk(!argv.includes("meta-llama/Llama-3.1-70B-Instruct"), "the hub id is not passed");
});
