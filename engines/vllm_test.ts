/**
 * Table tests for the vLLM plugin (design §8): exact command lines for single-
 * and multi-node replicas in both launch modes, the NCCL environment they
 * end up with after prepare.ts (design §5.3), refusals (design §6.2), probes
 * (design §9.3) and metric names per version (design §14).
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { deployment, fabric, node, profile } from "../tests/cluster_builders.ts";
import type { FabricPort } from "../discovery/types.ts";
import { needsFp8Hardware } from "../deployment/quantization.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Placed } from "../placement/types.ts";
import { concreteLaunches, shardLaunches } from "./launch.ts";
import { prepareShard } from "./prepare.ts";
import { ENGINE_API_VERSION, type ShardLaunch, type ShardSpec } from "./types.ts";
import { VLLM_LOADING_PROGRESS, VLLM_QUANTIZATIONS, vllmPlugin } from "./vllm.ts";
import { VLLM_COLD_START_PHASES } from "./cold_start_patterns.ts";

// ---------------------------------------------------------------------------
// Builders

/** What a test launch varies; everything else is a fixed, plausible default. */
interface LaunchOptions {
  /** Tensor-parallel size of the replica (default 1). */
  tp?: number;
  /** Pipeline-parallel size (default 1). */
  pp?: number;
  /** Nodes in the replica (default 1). */
  nodes?: number;
  /** This shard's rank (default 0). */
  rank?: number;
  /** Lowest GPU index of the shard (default 0); the ports derive from it. */
  firstGpu?: number;
  /** Default none. */
  quantization?: string;
  /** Default []. */
  engineArgs?: string[];
  /** Default {}. */
  engineOptions?: Record<string, string | number | boolean>;
  /** Default {}. */
  env?: Record<string, string>;
  /** Compute capability of every GPU (default "9.0"). */
  cc?: string | null;
  /** Fabric kind of a multi-node replica (default ib). */
  fabric?: "ib" | "roce";
  /** Installed vLLM version (default null: unknown). */
  version?: string | null;
}

const TWO_PORTS = ["mlx5_0", "mlx5_1"];

function fabricPorts(kind: "ib" | "roce"): FabricPort[] {
  return TWO_PORTS.map((hca) => ({
    hca,
    port: 1,
    link_layer: kind === "roce" ? "roce" : "infiniband",
    rate_gbps: 400,
    roce_v2_gid_index: kind === "roce" ? 3 : null,
  }));
}

/** A shard launch: rank r runs on node `node-r` at 10.0.0.(r+1), interface eth0. */
function launch(o: LaunchOptions = {}): ShardLaunch {
  const tp = o.tp ?? 1;
  const pp = o.pp ?? 1;
  const nodes = o.nodes ?? 1;
  const rank = o.rank ?? 0;
  const first = o.firstGpu ?? 0;
  const gpn = tp * pp / nodes;
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "llama",
    replica_id: "r-1",
    shard_id: `r-1/${rank}`,
    model: "meta-llama/Llama-3.1-70B-Instruct",
    served_model_name: "llama-70b",
    profile: {
      name: "p",
      tensor_parallel: tp,
      pipeline_parallel: pp,
      nodes,
      gpus_per_node: gpn,
      quantization: o.quantization ?? "none",
      engine_args: o.engineArgs ?? [],
      engine_options: o.engineOptions ?? {},
      env: o.env ?? {},
    },
    rank,
    world: {
      nodes,
      leader_addr: "10.0.0.1",
      rendezvous_port: 29500 + first,
      leader_http_port: 8000 + first,
    },
    gpus: Array.from({ length: gpn }, (_, i) => ({
      index: first + i,
      class: "h100-80g",
      compute_capability: o.cc === undefined ? "9.0" : o.cc,
    })),
    fabric: nodes === 1 ? null : {
      name: o.fabric === "roce" ? "roce-a" : "ib-a",
      ports: fabricPorts(o.fabric ?? "ib"),
    },
    node: { id: `node-${rank}`, mgmt_addr: `10.0.0.${rank + 1}`, mgmt_interface: "eth0" },
    port: 8000 + first,
    engine_version: o.version === undefined ? null : o.version,
  };
}

/** prepareShard, asserting that it produced a command. */
function ready(l: ShardLaunch): ShardSpec & { command: NonNullable<ShardSpec["command"]> } {
  const spec = prepareShard(vllmPlugin, l);
  assertEquals(spec.problems, []);
  assertOk(spec.command !== null);
  return spec as ShardSpec & { command: NonNullable<ShardSpec["command"]> };
}

/** The problems prepareShard reports, which must not be empty. */
function refused(l: ShardLaunch): string {
  const spec = prepareShard(vllmPlugin, l);
  assertOk(spec.problems.length > 0, "expected the launch to be refused");
  assertEquals(spec.command, null);
  return spec.problems.join("\n");
}

const MODEL = "meta-llama/Llama-3.1-70B-Instruct";

/** The `vllm serve` prefix every mode shares. */
function serve(port: number, tp: number, pp: number): string[] {
  return [
    "vllm",
    "serve",
    MODEL,
    "--served-model-name",
    "llama-70b",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--tensor-parallel-size",
    String(tp),
    "--pipeline-parallel-size",
    String(pp),
  ];
}

// ---------------------------------------------------------------------------
// Single node

const SINGLE_NODE: { tp: number; first: number; cvd: string }[] = [
  { tp: 1, first: 0, cvd: "0" },
  { tp: 2, first: 2, cvd: "2,3" },
  { tp: 4, first: 4, cvd: "4,5,6,7" },
  { tp: 8, first: 0, cvd: "0,1,2,3,4,5,6,7" },
];

for (const c of SINGLE_NODE) {
  Deno.test(`single node TP=${c.tp}: exact argv and only the GPU environment`, () => {
    const l = launch({ tp: c.tp, firstGpu: c.first });
    const argv = serve(8000 + c.first, c.tp, 1);
    assertEquals(vllmPlugin.command(l), { argv, env: {} });
    const spec = ready(l);
    assertEquals(spec.command.argv, argv);
    assertEquals(spec.command.env, {
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      CUDA_VISIBLE_DEVICES: c.cvd,
    });
    assertEquals(Object.keys(spec.command.env).filter((k) => k.startsWith("NCCL_IB_")), []);
  });
}

Deno.test("single node: quantization and extra args come after llmgw's flags", () => {
  const l = launch({
    tp: 2,
    quantization: "fp8",
    engineArgs: ["--max-model-len", "32k", "--enable-prefix-caching"],
  });
  assertEquals(ready(l).command.argv, [
    ...serve(8000, 2, 1),
    "--quantization",
    "fp8",
    "--max-model-len",
    "32k",
    "--enable-prefix-caching",
  ]);
});

// ---------------------------------------------------------------------------
// Multi-node, native (mp)

const MULTI_NODE: { name: string; tp: number; pp: number }[] = [
  { name: "2 nodes × 8, TP 8 × PP 2", tp: 8, pp: 2 },
  { name: "2 nodes × 8, TP 16 × PP 1", tp: 16, pp: 1 },
];

for (const c of MULTI_NODE) {
  Deno.test(`native multi-node ${c.name}: rank 0 serves, rank 1 is headless`, () => {
    const base = { tp: c.tp, pp: c.pp, nodes: 2 };
    const rendezvous = ["--nnodes", "2", "--master-addr", "10.0.0.1", "--master-port", "29500"];
    const rank0 = ready(launch({ ...base, rank: 0 }));
    assertEquals(rank0.command.argv, [
      ...serve(8000, c.tp, c.pp),
      "--nnodes",
      "2",
      "--node-rank",
      "0",
      "--master-addr",
      "10.0.0.1",
      "--master-port",
      "29500",
    ]);
    const rank1 = ready(launch({ ...base, rank: 1 }));
    assertEquals(rank1.command.argv, [
      ...serve(8000, c.tp, c.pp),
      "--nnodes",
      "2",
      "--node-rank",
      "1",
      "--master-addr",
      "10.0.0.1",
      "--master-port",
      "29500",
      "--headless",
    ]);
    for (const flag of rendezvous) assertOk(rank1.command.argv.includes(flag));
    assertEquals(rank0.command.env.VLLM_HOST_IP, "10.0.0.1");
    assertEquals(rank1.command.env.VLLM_HOST_IP, "10.0.0.2");
  });
}

Deno.test("native multi-node: the full environment of rank 1 (design §5.3)", () => {
  assertEquals(ready(launch({ tp: 8, pp: 2, nodes: 2, rank: 1 })).command.env, {
    VLLM_HOST_IP: "10.0.0.2",
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7",
    NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1",
    NCCL_SOCKET_IFNAME: "=eth0",
    GLOO_SOCKET_IFNAME: "eth0",
  });
});

Deno.test("native multi-node: extra args come after --headless", () => {
  const l = launch({ tp: 8, pp: 2, nodes: 2, rank: 1, engineArgs: ["--enforce-eager"] });
  assertEquals(ready(l).command.argv.slice(-2), ["--headless", "--enforce-eager"]);
});

// ---------------------------------------------------------------------------
// Multi-node, Ray

const RAY = { multi_node_backend: "ray" };

const RAY_LEADER_SCRIPT = [
  "ray start --head --port=29500 --node-ip-address=10.0.0.1 --block &",
  "ray_pid=$!",
  "until ray status --address=10.0.0.1:29500 >/dev/null 2>&1; do",
  `  kill -0 "$ray_pid" 2>/dev/null || { echo 'llmgw: ray head exited before it answered' >&2; exit 1; }`,
  "  sleep 1",
  "done",
  "RAY_ADDRESS=10.0.0.1:29500",
  "export RAY_ADDRESS",
  "exec vllm serve meta-llama/Llama-3.1-70B-Instruct --served-model-name llama-70b --host 127.0.0.1 " +
  "--port 8000 --tensor-parallel-size 8 --pipeline-parallel-size 2 " +
  "--distributed-executor-backend ray --enforce-eager",
].join("\n");

Deno.test("Ray mode rank 0: Ray head, wait, then vllm serve with the ray backend", () => {
  const l = launch({
    tp: 8,
    pp: 2,
    nodes: 2,
    rank: 0,
    engineOptions: RAY,
    engineArgs: ["--enforce-eager"],
  });
  const spec = ready(l);
  assertEquals(spec.command.argv, ["/bin/sh", "-c", RAY_LEADER_SCRIPT]);
  assertEquals(spec.command.env.VLLM_HOST_IP, "10.0.0.1");
  assertEquals(spec.command.env.NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1");
  assertOk(!spec.command.argv[2].includes("--nnodes"));
  assertEquals(spec.probes?.serves_http, true);
});

Deno.test("Ray mode rank 1: joins the head and nothing else", () => {
  const spec = ready(launch({ tp: 8, pp: 2, nodes: 2, rank: 1, engineOptions: RAY }));
  assertEquals(spec.command.argv, [
    "ray",
    "start",
    "--address=10.0.0.1:29500",
    "--node-ip-address=10.0.0.2",
    "--block",
  ]);
  assertEquals(spec.command.env.VLLM_HOST_IP, "10.0.0.2");
  assertEquals(spec.command.env.NCCL_SOCKET_IFNAME, "=eth0");
  assertEquals(spec.probes?.serves_http, false);
});

Deno.test("Ray mode on a single-node profile is a plain vllm serve", () => {
  assertEquals(ready(launch({ tp: 4, engineOptions: RAY })).command.argv, serve(8000, 4, 1));
});

/** Runs the rank-0 script with fake `ray` and `vllm` executables and returns what vllm saw. */
async function runLeaderScript(
  l: ShardLaunch,
  rayStart: string,
): Promise<{ code: number; stderr: string; argv: string[]; rayAddress: string }> {
  const dir = await Deno.makeTempDir();
  try {
    const bin = `${dir}/bin`;
    await Deno.mkdir(bin);
    await Deno.writeTextFile(
      `${bin}/ray`,
      `#!/bin/sh\ncase "$1" in\n  start) ${rayStart} ;;\n  status) exit 0 ;;\nesac\n`,
    );
    await Deno.writeTextFile(
      `${bin}/vllm`,
      `#!/bin/sh\nprintf '%s\\n' "$RAY_ADDRESS" > "$OUT/env"\nprintf '%s\\0' "$@" > "$OUT/argv"\n`,
    );
    await Deno.chmod(`${bin}/ray`, 0o755);
    await Deno.chmod(`${bin}/vllm`, 0o755);
    const { argv } = vllmPlugin.command(l);
    const out = await new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: { PATH: `${bin}:/usr/bin:/bin`, OUT: dir },
      stdout: "null",
      stderr: "piped",
    }).output();
    const read = (f: string) => Deno.readTextFile(`${dir}/${f}`).catch(() => "");
    return {
      code: out.code,
      stderr: new TextDecoder().decode(out.stderr),
      argv: (await read("argv")).split("\0").slice(0, -1),
      rayAddress: (await read("env")).trim(),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("Ray mode rank 0: the script survives hostile values (run under /bin/sh)", async () => {
  const l = launch({ tp: 8, pp: 2, nodes: 2, engineOptions: RAY });
  l.model = `/models/it's "mine" $(touch pwned) \`x\` a\\b`;
  l.profile.engine_args = ["--chat-template", "{{ 'x' }}; rm -rf /"];
  const r = await runLeaderScript(l, "exec >/dev/null 2>&1; sleep 1");
  assertEquals(r.code, 0, r.stderr);
  assertEquals(r.argv, [
    "serve",
    l.model,
    "--served-model-name",
    "llama-70b",
    "--host",
    "127.0.0.1",
    "--port",
    "8000",
    "--tensor-parallel-size",
    "8",
    "--pipeline-parallel-size",
    "2",
    "--distributed-executor-backend",
    "ray",
    "--chat-template",
    "{{ 'x' }}; rm -rf /",
  ]);
  assertEquals(r.rayAddress, "10.0.0.1:29500");
});

Deno.test("Ray mode rank 0: a Ray head that dies makes the script fail instead of waiting", async () => {
  const l = launch({ tp: 8, pp: 2, nodes: 2, engineOptions: RAY });
  // A fake whose `ray status` never answers and whose head exits at once.
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/ray`,
      `#!/bin/sh\ncase "$1" in\n  start) exit 1 ;;\n  status) exit 1 ;;\nesac\n`,
    );
    await Deno.chmod(`${dir}/ray`, 0o755);
    const { argv } = vllmPlugin.command(l);
    const out = await new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: { PATH: `${dir}:/usr/bin:/bin` },
      stdout: "null",
      stderr: "piped",
    }).output();
    assertEquals(out.code, 1);
    assertStringIncludes(new TextDecoder().decode(out.stderr), "ray head exited");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// Fabrics (design §5.3)

Deno.test("IB fabric: exact HCA list, no GID index, management interface for bootstrap", () => {
  const env = ready(launch({ tp: 16, nodes: 2, rank: 1, fabric: "ib" })).command.env;
  assertEquals(env.NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1");
  assertEquals("NCCL_IB_GID_INDEX" in env, false);
  assertEquals(env.NCCL_SOCKET_IFNAME, "=eth0");
  assertEquals(env.GLOO_SOCKET_IFNAME, "eth0");
});

Deno.test("RoCE fabric: exact HCA list plus the RoCE v2 GID index", () => {
  const env = ready(launch({ tp: 16, nodes: 2, rank: 1, fabric: "roce" })).command.env;
  assertEquals(env.NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1");
  assertEquals(env.NCCL_IB_GID_INDEX, "3");
  assertEquals(env.NCCL_SOCKET_IFNAME, "=eth0");
  assertEquals(env.GLOO_SOCKET_IFNAME, "eth0");
});

Deno.test("a node on two fabrics: the shard only gets the chosen fabric's HCAs", () => {
  const fabrics = [fabric("ib-a", ["mlx5_0", "mlx5_1"]), fabric("ib-b", ["mlx5_2", "mlx5_3"])];
  const nodes = new Map<string, ClusterNode>([
    ["a", {
      ...node("a", { fabrics }),
      mgmt_addr: "10.0.0.1",
      engine_versions: { vllm: "0.11.1" },
    }],
    ["b", {
      ...node("b", { fabrics }),
      mgmt_addr: "10.0.0.2",
      engine_versions: { vllm: "0.11.1" },
    }],
  ]);
  const dep = deployment([profile({ name: "h100x16", nodes: 2 })]);
  const chosen = fabrics[0];
  const placed: Placed = {
    status: "placed",
    replica_id: "r-1",
    deployment: dep.name,
    profile: "h100x16",
    engine: "vllm",
    shards: ["a", "b"].map((n, rank) => ({
      rank,
      shard_id: `r-1/${rank}`,
      node: n,
      gpu_indices: [0, 1, 2, 3, 4, 5, 6, 7],
      gpu_class: "h100-80g",
      fabric: chosen.fabric,
      hcas: [...chosen.hcas],
      hca_ports: chosen.ports.map((p) => ({ ...p })),
    })),
    explanation: { summary: "", profiles: [] },
  };
  // Agents allocate the ports: rank 0's block starts at 29491, so it meets at 29500.
  const launches = concreteLaunches(shardLaunches(placed, dep, nodes), () => 29_491);
  assertEquals(launches.map((l) => l.engine_version), ["0.11.1", "0.11.1"]);
  for (const l of launches) {
    const spec = ready(l);
    assertEquals(spec.command.env.NCCL_IB_HCA, "=mlx5_0:1,mlx5_1:1");
    assertEquals(spec.command.env.VLLM_HOST_IP, l.node.mgmt_addr);
  }
  assertEquals(ready(launches[1]).command.argv.slice(-9), [
    "--nnodes",
    "2",
    "--node-rank",
    "1",
    "--master-addr",
    "10.0.0.1",
    "--master-port",
    "29500",
    "--headless",
  ]);
});

// ---------------------------------------------------------------------------
// Refusals (design §6.2)

Deno.test("fp8 runs on compute capability 9.0", () => {
  assertEquals(ready(launch({ tp: 8, quantization: "fp8", cc: "9.0" })).command.argv.slice(-2), [
    "--quantization",
    "fp8",
  ]);
});

const FP8_REFUSED: { quantization: string; cc: string | null; shows: string }[] = [
  { quantization: "fp8", cc: "8.0", shows: "reports 8.0" },
  { quantization: "fp8", cc: null, shows: "reports unknown" },
  { quantization: "modelopt", cc: "8.0", shows: "reports 8.0" },
  { quantization: "modelopt", cc: null, shows: "reports unknown" },
];

for (const c of FP8_REFUSED) {
  Deno.test(`${c.quantization} is refused on compute capability ${c.cc ?? "unknown"}`, () => {
    const problems = refused(launch({ tp: 8, quantization: c.quantization, cc: c.cc }));
    assertStringIncludes(problems, "8.9");
    assertStringIncludes(problems, c.shows);
  });
}

Deno.test("the fp8 quantizations the plugin offers are the ones the shared rule refuses", () => {
  // From vLLM's sources (deployment/quantization.ts): fp8, and modelopt = ModelOptFp8Config.
  assertEquals(VLLM_QUANTIZATIONS.filter(needsFp8Hardware), ["fp8", "modelopt"]);
  for (const q of VLLM_QUANTIZATIONS) {
    const spec = prepareShard(vllmPlugin, launch({ tp: 2, quantization: q, cc: "8.0" }));
    assertEquals(
      spec.problems.some((m) => m.includes("needs compute capability ≥ 8.9")),
      needsFp8Hardware(q),
      q,
    );
  }
});

Deno.test("modelopt is refused once, saying it is fp8", () => {
  const problems = refused(launch({ tp: 2, quantization: "modelopt", cc: "8.6" })).split("\n");
  assertEquals(problems.filter((m) => m.includes("8.9")), [
    'profile "p": modelopt (an fp8 format) needs compute capability ≥ 8.9; GPU 0 reports 8.6 (refused rather than silently slower, design §6.2)',
  ]);
});

Deno.test("modelopt runs on compute capability 9.0", () => {
  assertEquals(ready(launch({ tp: 2, quantization: "modelopt" })).command.argv.slice(-1), [
    "modelopt",
  ]);
});

Deno.test("an unsupported quantization is refused with the supported list", () => {
  const problems = refused(launch({ tp: 2, quantization: "int3" }));
  assertStringIncludes(problems, `quantization "int3" is not supported`);
  assertStringIncludes(problems, "awq_marlin");
});

const CONFLICTS: { args: string[]; flag: string }[] = [
  { args: ["--port", "1"], flag: "--port" },
  { args: ["--port=1"], flag: "--port" },
  { args: ["-tp", "2"], flag: "-tp" },
  { args: ["--tensor-parallel", "2"], flag: "--tensor-parallel-size" },
  { args: ["--tensor_parallel_size=2"], flag: "--tensor-parallel-size" },
  { args: ["-pp", "2"], flag: "-pp" },
  { args: ["--host", "127.0.0.1"], flag: "--host" },
  { args: ["--served-model-name", "x"], flag: "--served-model-name" },
  { args: ["--model", "x"], flag: "--model" },
  { args: ["-q", "awq"], flag: "-q" },
  { args: ["--quantization=awq"], flag: "--quantization" },
  { args: ["--nnodes", "4"], flag: "--nnodes" },
  { args: ["-n", "4"], flag: "-n" },
  { args: ["--node-rank", "1"], flag: "--node-rank" },
  { args: ["-r", "1"], flag: "-r" },
  { args: ["--master-addr", "1.2.3.4"], flag: "--master-addr" },
  { args: ["--master-port=1"], flag: "--master-port" },
  { args: ["--headless"], flag: "--headless" },
  { args: ["--distributed-executor-backend", "ray"], flag: "--distributed-executor-backend" },
  { args: ["-dp", "2"], flag: "-dp" },
  { args: ["--data-parallel-size", "2"], flag: "--data-parallel-size" },
  { args: ["-dpl", "2"], flag: "-dpl" },
  { args: ["--data-parallel-start-rank", "2"], flag: "--data-parallel-start-rank" },
  { args: ["--data-parallel-address", "x"], flag: "--data-parallel-address" },
  { args: ["--data-parallel-rpc-port", "1"], flag: "--data-parallel-rpc-port" },
  { args: ["--data-parallel-hybrid-lb"], flag: "--data-parallel-hybrid-lb" },
  { args: ["--prefill-context-parallel-size", "2"], flag: "--prefill-context-parallel-size" },
  { args: ["--uds", "/tmp/v.sock"], flag: "--uds" },
];

for (const c of CONFLICTS) {
  Deno.test(`engine_args ${c.args.join(" ")} is refused: llmgw sets ${c.flag}`, () => {
    const problems = refused(launch({ tp: 2, engineArgs: ["--enforce-eager", ...c.args] }));
    assertStringIncludes(problems, `engine_args sets ${c.flag},`);
    assertStringIncludes(problems, `remove "${c.args[0]}"`);
  });
}

Deno.test("engine_args that llmgw does not own are accepted", () => {
  const args = [
    "--max-model-len",
    "32k",
    "--gpu-memory-utilization=0.85",
    "--enable-expert-parallel",
    "--kv-cache-dtype",
    "fp8",
    "--api-server-count",
    "2",
  ];
  assertEquals(ready(launch({ tp: 2, engineArgs: args })).command.argv.slice(-args.length), args);
});

Deno.test("a profile env setting NCCL_IB_HCA is refused", () => {
  const problems = refused(
    launch({ tp: 16, nodes: 2, env: { NCCL_IB_HCA: "mlx5", HF_HOME: "/cache" } }),
  );
  assertStringIncludes(problems, "env NCCL_IB_HCA is set by llmgw");
});

Deno.test("a profile env setting VLLM_HOST_IP is refused on multi-node, kept on one node", () => {
  assertStringIncludes(
    refused(launch({ tp: 16, nodes: 2, env: { VLLM_HOST_IP: "10.9.9.9" } })),
    "env VLLM_HOST_IP is set by the vllm plugin",
  );
  assertEquals(
    ready(launch({ tp: 1, env: { VLLM_HOST_IP: "10.9.9.9" } })).command.env.VLLM_HOST_IP,
    "10.9.9.9",
  );
});

Deno.test("the engine API key: taken from VLLM_API_KEY, never from the profile", () => {
  assertEquals(vllmPlugin.api_key, { env: "VLLM_API_KEY" });
  // The key is added at spawn time, never by the plugin.
  const spec = ready(launch({ tp: 2 }));
  assertOk(!("VLLM_API_KEY" in spec.command.env));
  assertOk(!spec.command.argv.some((a) => a.startsWith("--api")));
  // A profile's key would be a shared secret in the deployment; --api-key in
  // any spelling would also beat the variable (engine reference §6.1).
  for (
    const c of [
      { env: { VLLM_API_KEY: "s3cret" }, shows: "env VLLM_API_KEY is the vllm API key" },
      { args: ["--api-key", "s3cret"], shows: "engine_args sets --api-key, the vllm API key" },
      { args: ["--api-key=s3cret"], shows: "engine_args sets --api-key" },
      { args: ["--api_key=s3cret"], shows: "engine_args sets --api-key" },
      { args: ["--api-key", "a", "b"], shows: "engine_args sets --api-key" },
    ]
  ) {
    const problems = refused(launch({ tp: 2, engineArgs: c.args, env: c.env }));
    assertStringIncludes(problems, c.shows);
    assertOk(!problems.includes("s3cret"), `the key must not be echoed: ${problems}`);
  }
  // Ray mode: the key reaches vllm serve through the shell's environment, so
  // nothing in the script names it.
  const ray = ready(launch({ tp: 16, nodes: 2, engineOptions: RAY })).command.argv.join(" ");
  assertOk(!/api.key/i.test(ray), ray);
});

const BAD_OPTIONS: { options: Record<string, string | number | boolean>; shows: string }[] = [
  { options: { backend: "ray" }, shows: `vllm has no engine option "backend"` },
  { options: { multi_node_backend: "torchrun" }, shows: `multi_node_backend is "torchrun"` },
  { options: { multi_node_backend: true }, shows: "multi_node_backend is true" },
];

for (const c of BAD_OPTIONS) {
  Deno.test(`engine_options ${JSON.stringify(c.options)} is refused`, () => {
    const problems = refused(launch({ tp: 16, nodes: 2, engineOptions: c.options }));
    assertStringIncludes(problems, c.shows);
  });
}

Deno.test("engine_options multi_node_backend mp is the default, spelled out", () => {
  const l = launch({ tp: 16, nodes: 2, engineOptions: { multi_node_backend: "mp" } });
  assertEquals(ready(l).command.argv, ready(launch({ tp: 16, nodes: 2 })).command.argv);
});

Deno.test("native multi-node on a vLLM older than --nnodes is refused, suggesting Ray", () => {
  const problems = refused(launch({ tp: 16, nodes: 2, rank: 1, version: "0.10.2" }));
  assertStringIncludes(problems, "vLLM 0.10.2 on node node-1");
  assertStringIncludes(problems, "engine_options: {multi_node_backend: ray}");
  assertStringIncludes(refused(launch({ tp: 16, nodes: 2, version: "0.11.0" })), "0.11.1");
});

Deno.test("native multi-node runs on 0.11.1, later and unknown versions; Ray on old ones", () => {
  for (const version of ["0.11.1", "0.11.2", "0.30.0", null]) {
    ready(launch({ tp: 16, nodes: 2, version }));
  }
  ready(launch({ tp: 16, nodes: 2, version: "0.10.2", engineOptions: RAY }));
  ready(launch({ tp: 8, version: "0.8.5" }));
});

// ---------------------------------------------------------------------------
// Probes (design §9.3)

Deno.test("probes: rank 0 serves HTTP, ready when /v1/models lists the served name", () => {
  for (const l of [launch({ tp: 8 }), launch({ tp: 16, nodes: 2, rank: 0 })]) {
    const p = vllmPlugin.probes(l);
    assertEquals(p.serves_http, true);
    assertEquals(p.liveness, [{ path: "/health", expect_status: 200 }]);
    assertEquals(p.readiness, [
      { path: "/health", expect_status: 200 },
      { path: "/v1/models", expect_status: 200, lists_model: "llama-70b" },
    ]);
    assertEquals(p.loading_progress, [...VLLM_LOADING_PROGRESS]);
  }
});

Deno.test("probes: headless and Ray worker ranks serve nothing", () => {
  for (const options of [{}, RAY]) {
    const p = vllmPlugin.probes(launch({ tp: 16, nodes: 2, rank: 1, engineOptions: options }));
    assertEquals(p, {
      serves_http: false,
      liveness: [],
      readiness: [],
      loading_progress: [...VLLM_LOADING_PROGRESS],
      // Headless ranks load, compile and capture too: their receipts read the same lines.
      cold_start_phases: [...VLLM_COLD_START_PHASES],
    });
  }
});

/**
 * Real vLLM log lines, found with code/issue search:
 * - vllm-project/vllm#6746 (Llama 3.1 405B FP8 on 8×H100),
 * - vllm-project/vllm#46367 (GLM FP8 on 8×B200, after a `(Worker_TP0 pid=1440)` prefix line),
 * - vllm-project/vllm#6689 (Llama 3.1 FAQ, 191 shards),
 * - vllm-project/vllm#38476 (85 shards),
 * - a vLLM 0.6 log of facebook/opt-125m (`weight_utils.py:243] Using model weights format
 *   ['*.bin']`) for the `pt` loader,
 * - tqdm's two updates on one line, as vLLM-derived loaders print it at 100%.
 */
const PROGRESS_LINES: { line: string; percent: string; done: string; total: string }[] = [
  {
    line: "Loading safetensors checkpoint shards:  12% Completed | 13/109 [00:03<00:24,  3.92it/s]",
    percent: "12",
    done: "13",
    total: "109",
  },
  {
    line: "Loading safetensors checkpoint shards:  52% Completed | 74/141 [05:47<04:50,  4.34s/it]",
    percent: "52",
    done: "74",
    total: "141",
  },
  {
    line:
      "Loading safetensors checkpoint shards:  73% Completed | 139/191 [13:28<02:02,  2.36s/it]",
    percent: "73",
    done: "139",
    total: "191",
  },
  {
    line: "Loading safetensors checkpoint shards:  26% Completed | 22/85 [02:11<06:16,  5.98s/it]",
    percent: "26",
    done: "22",
    total: "85",
  },
  {
    line: "Loading pt checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
    percent: "0",
    done: "0",
    total: "1",
  },
  {
    line: "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.65it/s]" +
      "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.69it/s]",
    percent: "100",
    done: "4",
    total: "4",
  },
];

Deno.test("loading progress: the pattern reads real vLLM log lines", () => {
  assertEquals(VLLM_LOADING_PROGRESS.length, 1);
  const re = new RegExp(VLLM_LOADING_PROGRESS[0].regex);
  for (const c of PROGRESS_LINES) {
    const m = re.exec(c.line);
    assertOk(m !== null, c.line);
    assertEquals(
      { percent: m.groups?.percent, done: m.groups?.done, total: m.groups?.total },
      { percent: c.percent, done: c.done, total: c.total },
      c.line,
    );
  }
  for (
    const other of [
      "INFO 12-06 17:07:02 weight_utils.py:243] Using model weights format ['*.bin']",
      "(Worker_TP0 pid=1440) ",
      "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67",
    ]
  ) {
    assertEquals(re.exec(other), null, other);
  }
});

// ---------------------------------------------------------------------------
// Metrics and versions (design §14)

const KV_NEW = "vllm:kv_cache_usage_perc";
const KV_OLD = "vllm:gpu_cache_usage_perc";

const METRICS: { version: string | null; kv: string[] }[] = [
  { version: null, kv: [KV_NEW, KV_OLD] },
  { version: "0.8.5", kv: [KV_OLD] },
  { version: "0.9.2", kv: [KV_OLD] },
  { version: "0.10.0", kv: [KV_NEW, KV_OLD] },
  { version: "0.10.2", kv: [KV_NEW, KV_OLD] },
  { version: "0.11.0", kv: [KV_NEW] },
  { version: "0.30.0", kv: [KV_NEW] },
];

for (const c of METRICS) {
  Deno.test(`metrics for vLLM ${c.version ?? "unknown"}`, () => {
    assertEquals(vllmPlugin.metrics(c.version), {
      running: ["vllm:num_requests_running"],
      waiting: ["vllm:num_requests_waiting"],
      kv_cache_usage: c.kv,
    });
  });
}

Deno.test("prepareShard reports the metric names of the node's version", () => {
  assertEquals(ready(launch({ version: "0.9.2" })).metrics?.kv_cache_usage, [KV_OLD]);
});

const VERSIONS: { output: string; version: string | null }[] = [
  { output: "0.11.0\n", version: "0.11.0" },
  {
    output: "INFO 10-02 08:12:31 [__init__.py:216] Automatically detected platform cuda.\n0.11.0\n",
    version: "0.11.0",
  },
  { output: "0.10.1.1", version: "0.10.1.1" },
  { output: "0.11.1rc2.dev12+g1234abcd\n", version: "0.11.1rc2.dev12+g1234abcd" },
  { output: "0.6.3.post1\r\n", version: "0.6.3.post1" },
  { output: "v0.9.2\n", version: "0.9.2" },
  { output: "0.9.2\nWARNING 07-07 10:00:00 something happened\n", version: "0.9.2" },
  { output: "", version: null },
  { output: "bash: vllm: command not found\n", version: null },
  { output: "INFO 10-02 08:12:31 [__init__.py:216] version 0.11.0 detected\n", version: null },
];

for (const c of VERSIONS) {
  Deno.test(`parseVersion ${JSON.stringify(c.output)}`, () => {
    assertEquals(vllmPlugin.parseVersion(c.output), c.version);
  });
}

Deno.test("plugin identity: name, version command, quantizations", () => {
  assertEquals(vllmPlugin.name, "vllm");
  assertEquals(vllmPlugin.version_command, ["vllm", "--version"]);
  for (const q of ["none", "fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes"]) {
    assertOk(vllmPlugin.quantizations.includes(q), q);
  }
  for (const q of ["compressed-tensors", "gguf", "modelopt"]) {
    assertOk(vllmPlugin.quantizations.includes(q), q);
  }
});

Deno.test("model_path: vllm serve loads this host's copy and keeps the served name (issue #25 item 4)", () => {
  const dir = "/var/lib/llmgw/agent/models/models--meta-llama--Llama-3.1-70B-Instruct/snapshots/" +
    "0123456789abcdef0123456789abcdef01234567";
  const argv = ready({ ...launch(), model_path: dir }).command.argv;
  assertEquals(argv.slice(0, 5), ["vllm", "serve", dir, "--served-model-name", "llama-70b"]);
  assertOk(!argv.includes(MODEL), "the hub id is not on the command line");
  // Without a model cache the deployment's model is passed as it is.
  assertEquals(ready(launch()).command.argv[2], MODEL);
});
