/**
 * The built-in vLLM engine plugin (design §8): `vllm serve` command lines for
 * single- and multi-node replicas, readiness probes (design §9.3) and metric
 * names per version (design §14).
 *
 * Multi-node replicas have two launch modes, chosen per profile with
 * `engine_options: {multi_node_backend: mp | ray}`:
 *
 * - `mp` (the default): vLLM's native multi-node launch. Every node runs the
 *   same `vllm serve` with `--nnodes`, `--node-rank`, `--master-addr` and
 *   `--master-port`; ranks above 0 add `--headless` (no API server). vLLM
 *   picks its multiprocessing executor by itself when `--nnodes` > 1 on CUDA
 *   (vllm/config/parallel.py), so no `--distributed-executor-backend` is
 *   passed. It is the default because each shard is then one process tree
 *   that the supervisor starts and stops as a group (design §9.1): there is no
 *   separate Ray cluster whose lifecycle must be managed, and no Ray daemon
 *   or Ray port that can outlive a stop and break the next start.
 * - `ray`: the Ray recipe of vLLM's parallelism_scaling docs. Rank 0 runs a
 *   small `/bin/sh` script: `ray start --head … --block &`, wait until Ray
 *   answers, then `exec vllm serve … --distributed-executor-backend ray`.
 *   Other ranks run `ray start --address=… --block` and nothing else. It
 *   stays available for vLLM versions older than the native launch and for
 *   setups that need Ray; it uses Ray's own auxiliary ports (dashboard,
 *   client server, …), so two Ray-mode leaders on one node can collide.
 *
 * Both modes set `VLLM_HOST_IP` to the node's management address on every
 * shard of a multi-node replica: vLLM advertises that address to its peers
 * and otherwise guesses one from the default route (vllm `get_ip()`), which
 * need not be the management interface NCCL and Gloo were told to use
 * (design §5.3).
 *
 * Flags were checked against vLLM's `arg_utils.py`, `config/parallel.py`,
 * `docs/serving/parallelism_scaling.md` and engine reference §1.
 *
 * @module
 */
import { apiKeyProblems } from "./api_key.ts";
import { modelArgument } from "./model_arg.ts";
import { compareVersions, ownedFlagProblems } from "./args.ts";
import type {
  EngineApiKey,
  EngineCommand,
  EnginePlugin,
  EngineProbes,
  MetricNames,
  ProgressPattern,
  ShardLaunch,
} from "./types.ts";
import { shellQuote } from "../text/shell_quote.ts";
import { phasePatterns, VLLM_COLD_START_PHASES } from "./cold_start_patterns.ts";

/**
 * Values of `--quantization` llmgw offers for vLLM (plus `none`), from
 * vLLM's `QuantizationMethods` in
 * `vllm/model_executor/layers/quantization/__init__.py`. Methods vLLM marks
 * deprecated (`DEPRECATED_QUANTIZATION_METHODS`: ptpc_fp8, fbgemm_fp8,
 * bitblas, gptq_marlin_24, …) and non-NVIDIA ones (ipex, cpu_awq, quark,
 * inc) are left out: they are not real choices for a CUDA fleet. The fp8
 * ones (`fp8`, and `modelopt`, which is ModelOpt's FP8 format) are refused
 * below compute capability 8.9 by the shared checks (design §6.2,
 * deployment/quantization.ts).
 */
export const VLLM_QUANTIZATIONS: readonly string[] = [
  "none",
  "fp8",
  "awq",
  "awq_marlin",
  "gptq",
  "gptq_marlin",
  "bitsandbytes",
  "compressed-tensors",
  "gguf",
  "modelopt",
  "modelopt_fp4",
  "mxfp4",
  "moe_wna16",
];

/**
 * The first vLLM release whose `vllm serve` accepts `--nnodes`/`--node-rank`
 * for a multi-node replica without data parallelism (vllm PR #23691, "Support
 * MP Executor for multi node distributed inference"). 0.11.1 is the gate verl
 * applies for the same launch (verl vllm_async_server.py: "For multi-node
 * without DP (e.g TP=16), need vllm>=0.11.1"); not confirmed against vLLM's
 * own release notes.
 */
export const NATIVE_MULTI_NODE_MIN_VERSION = "0.11.1";

/** The version that first emits `vllm:kv_cache_usage_perc` (next to the old name; engine reference §1.5). */
const KV_RENAME_VERSION = "0.10.0";
/** The version from which the old `vllm:gpu_cache_usage_perc` is no longer emitted by default. */
const KV_OLD_GONE_VERSION = "0.11.0";
const KV_NEW = "vllm:kv_cache_usage_perc";
const KV_OLD = "vllm:gpu_cache_usage_perc";

/**
 * Flags llmgw sets from the profile and placement (design §8), including every
 * flag that would change how many GPUs vLLM uses (data and prefill-context
 * parallelism) or where it listens. Short forms from vLLM's `arg_utils.py`.
 */
const OWNED_FLAGS: readonly string[] = [
  "--model",
  "--served-model-name",
  "--host",
  "--port",
  "--uds",
  "--tensor-parallel-size",
  "-tp",
  "--pipeline-parallel-size",
  "-pp",
  "--quantization",
  "-q",
  "--nnodes",
  "-n",
  "--node-rank",
  "-r",
  "--master-addr",
  "--master-port",
  "--headless",
  "--distributed-executor-backend",
  "--data-parallel-size",
  "-dp",
  "--data-parallel-size-local",
  "-dpl",
  "--data-parallel-rank",
  "-dpn",
  "--data-parallel-start-rank",
  "-dpr",
  "--data-parallel-address",
  "-dpa",
  "--data-parallel-rpc-port",
  "-dpp",
  "--data-parallel-backend",
  "-dpb",
  "--data-parallel-hybrid-lb",
  "-dph",
  "--data-parallel-external-lb",
  "-dpe",
  "--prefill-context-parallel-size",
  "-pcp",
];

/**
 * vLLM reads its API key from `VLLM_API_KEY` when no `--api-key` is given
 * (engine reference §6.1), which keeps the key out of `ps`. `--api-key` in a
 * profile is refused: it would replace the key llmgw gives the shard.
 */
export const VLLM_TAKES_API_KEY: EngineApiKey = { env: "VLLM_API_KEY" };

/** The multi-node launch modes a profile can choose (see the module doc). */
export const MULTI_NODE_BACKENDS = ["mp", "ray"] as const;
/** One of {@link MULTI_NODE_BACKENDS}. */
export type MultiNodeBackend = typeof MULTI_NODE_BACKENDS[number];

/** The engine_options this plugin understands. */
const OPTION_KEYS: ReadonlySet<string> = new Set(["multi_node_backend"]);

/** Environment variables this plugin sets on multi-node shards; a profile may not set them there. */
const MULTI_NODE_ENV: readonly string[] = ["VLLM_HOST_IP", "RAY_ADDRESS"];

/**
 * vLLM's weight-loading progress bars (`weight_utils.py`: `desc="Loading
 * safetensors checkpoint shards"` or `"Loading pt checkpoint shards"`, with
 * `bar_format` "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt}
 * […]"). Unanchored: workers prefix lines (`(Worker_TP0 pid=…)`) and tqdm
 * may put several updates on one line.
 */
export const VLLM_LOADING_PROGRESS: readonly ProgressPattern[] = [
  {
    regex:
      /Loading \w+ checkpoint shards:\s*(?<percent>\d{1,3})% Completed \| (?<done>\d+)\/(?<total>\d+)/
        .source,
  },
];

/** The multi-node backend a launch asks for (`mp` unless the profile says `ray`). */
export function multiNodeBackend(launch: ShardLaunch): MultiNodeBackend {
  return launch.profile.engine_options.multi_node_backend === "ray" ? "ray" : "mp";
}

/** Reads `vllm --version` output: the last line that is a bare version, e.g. "0.11.0". */
function parseVersion(output: string): string | null {
  // vLLM may print log lines (platform detection, warnings) before the version.
  const lines = output.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "");
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^v?(\d+\.\d+(?:\.\d+)*(?:[.+-]?[0-9A-Za-z]+)*)$/.exec(lines[i]);
    if (m !== null) return m[1];
  }
  return null;
}

/** Engine-specific problems (design §6.2); the shared checks live in prepare.ts. */
function validate(launch: ShardLaunch): string[] {
  const p = launch.profile;
  const name = `profile "${p.name}"`;
  const problems: string[] = [];

  for (const [key, value] of Object.entries(p.engine_options)) {
    if (!OPTION_KEYS.has(key)) {
      problems.push(
        `${name}: vllm has no engine option "${key}" (known: ${[...OPTION_KEYS].join(", ")})`,
      );
    } else if (
      key === "multi_node_backend" &&
      !(MULTI_NODE_BACKENDS as readonly unknown[]).includes(value)
    ) {
      problems.push(
        `${name}: engine_options.multi_node_backend is ${
          JSON.stringify(value)
        }; it must be one of ${MULTI_NODE_BACKENDS.join(", ")}`,
      );
    }
  }

  problems.push(
    ...apiKeyProblems("vllm", p, {
      key: VLLM_TAKES_API_KEY,
      also_flags: ["--api-key"],
      normalize: normalizeFlag,
    }),
  );

  for (const arg of p.engine_args) {
    // vLLM's parser accepts --tensor_parallel_size for --tensor-parallel-size.
    const norm = normalizeFlag(arg);
    problems.push(
      ...ownedFlagProblems(p.name, "vllm", [norm], OWNED_FLAGS).map((m) =>
        m.replace(`"${norm}"`, `"${arg}"`)
      ),
    );
  }

  if (launch.world.nodes > 1) {
    for (const key of MULTI_NODE_ENV) {
      if (key in p.env) {
        problems.push(
          `${name}: env ${key} is set by the vllm plugin on multi-node replicas; remove it from the profile`,
        );
      }
    }
    const backend = multiNodeBackend(launch);
    if (
      backend === "mp" && launch.engine_version !== null &&
      compareVersions(launch.engine_version, NATIVE_MULTI_NODE_MIN_VERSION) < 0
    ) {
      problems.push(
        `${name}: vLLM ${launch.engine_version} on node ${launch.node.id} has no native multi-node launch (--nnodes needs vLLM ≥ ${NATIVE_MULTI_NODE_MIN_VERSION}); upgrade vLLM or set engine_options: {multi_node_backend: ray}`,
      );
    }
  }
  return problems;
}

/** `--flag_name=x` → `--flag-name=x`: vLLM's parser treats underscores in long flags as dashes. */
function normalizeFlag(arg: string): string {
  if (!arg.startsWith("--")) return arg;
  const eq = arg.indexOf("=");
  const flag = eq < 0 ? arg : arg.slice(0, eq);
  return flag.replaceAll("_", "-") + (eq < 0 ? "" : arg.slice(eq));
}

/** `vllm serve` with the flags every launch mode shares. */
function serveArgv(launch: ShardLaunch): string[] {
  const p = launch.profile;
  return [
    "vllm",
    "serve",
    modelArgument(launch),
    "--served-model-name",
    launch.served_model_name,
    // Loopback only: the agent's engine proxy is the one door to the engine
    // (design §11.2), and the agent's probes are local. The rendezvous of a
    // multi-node replica is on --master-addr, not on this address.
    "--host",
    "127.0.0.1",
    "--port",
    String(launch.port),
    "--tensor-parallel-size",
    String(p.tensor_parallel),
    "--pipeline-parallel-size",
    String(p.pipeline_parallel),
    ...(p.quantization === "none" ? [] : ["--quantization", p.quantization]),
  ];
}

/** The shard's command line and engine environment (design §8); see the module doc. */
function command(launch: ShardLaunch): EngineCommand {
  const extra = launch.profile.engine_args;
  if (launch.world.nodes === 1) {
    return { argv: [...serveArgv(launch), ...extra], env: {} };
  }
  const env = { VLLM_HOST_IP: launch.node.mgmt_addr };
  const rendezvous = `${launch.world.leader_addr}:${launch.world.rendezvous_port}`;
  if (multiNodeBackend(launch) === "mp") {
    return {
      argv: [
        ...serveArgv(launch),
        "--nnodes",
        String(launch.world.nodes),
        "--node-rank",
        String(launch.rank),
        "--master-addr",
        launch.world.leader_addr,
        "--master-port",
        String(launch.world.rendezvous_port),
        ...(launch.rank > 0 ? ["--headless"] : []),
        ...extra,
      ],
      env,
    };
  }
  if (launch.rank > 0) {
    // A Ray worker node: it only joins the cluster; vLLM's Ray actors run in it.
    return {
      argv: [
        "ray",
        "start",
        `--address=${rendezvous}`,
        `--node-ip-address=${launch.node.mgmt_addr}`,
        "--block",
      ],
      env,
    };
  }
  return { argv: ["/bin/sh", "-c", rayLeaderScript(launch)], env };
}

/**
 * Rank 0 in Ray mode: the Ray head in the background (same process group, so
 * a group stop ends it too, design §9.1), a wait until it answers, then vLLM in
 * the shell's place. Workers that join later are waited for by vLLM itself,
 * which warns and waits for its placement group rather than failing.
 */
function rayLeaderScript(launch: ShardLaunch): string {
  const q = shellQuote;
  const w = launch.world;
  const address = `${w.leader_addr}:${w.rendezvous_port}`;
  const serve = [...serveArgv(launch), "--distributed-executor-backend", "ray"];
  return [
    `ray start --head --port=${q(String(w.rendezvous_port))} --node-ip-address=${
      q(launch.node.mgmt_addr)
    } --block &`,
    "ray_pid=$!",
    `until ray status --address=${q(address)} >/dev/null 2>&1; do`,
    `  kill -0 "$ray_pid" 2>/dev/null || { echo 'llmgw: ray head exited before it answered' >&2; exit 1; }`,
    "  sleep 1",
    "done",
    // vLLM's ray.init() checks RAY_ADDRESS first: join this cluster, not another on the node.
    `RAY_ADDRESS=${q(address)}`,
    "export RAY_ADDRESS",
    `exec ${[...serve, ...launch.profile.engine_args].map(q).join(" ")}`,
  ].join("\n");
}

/**
 * Probes (design §9.3, engine reference §1.4): vLLM opens its port only once weights,
 * KV cache and CUDA graphs are ready, so loading shows only in the log, and
 * `/v1/models` listing the served name means it is listening. Only rank 0
 * serves HTTP; headless and Ray worker ranks have nothing to probe but the
 * process itself.
 */
function probes(launch: ShardLaunch): EngineProbes {
  const loading_progress = VLLM_LOADING_PROGRESS.map((p) => ({ ...p }));
  const cold_start_phases = phasePatterns(VLLM_COLD_START_PHASES);
  if (launch.rank > 0) {
    return { serves_http: false, liveness: [], readiness: [], loading_progress, cold_start_phases };
  }
  return {
    serves_http: true,
    liveness: [{ path: "/health", expect_status: 200 }],
    readiness: [
      { path: "/health", expect_status: 200 },
      { path: "/v1/models", expect_status: 200, lists_model: launch.served_model_name },
    ],
    loading_progress,
    cold_start_phases,
  };
}

/**
 * Metric names (engine reference §1.5): `gpu_cache_usage_perc` was renamed
 * `kv_cache_usage_perc` (vllm#18354); 0.10.x emits both, and from about 0.11
 * only the new name is emitted by default. An unknown version gets both, new
 * first.
 */
function metrics(version: string | null): MetricNames {
  let kv: string[];
  if (version === null) kv = [KV_NEW, KV_OLD];
  else if (compareVersions(version, KV_RENAME_VERSION) < 0) kv = [KV_OLD];
  else if (compareVersions(version, KV_OLD_GONE_VERSION) < 0) kv = [KV_NEW, KV_OLD];
  else kv = [KV_NEW];
  return {
    running: ["vllm:num_requests_running"],
    waiting: ["vllm:num_requests_waiting"],
    kv_cache_usage: kv,
  };
}

/** The vLLM engine plugin (design §8). */
export const vllmPlugin: EnginePlugin = {
  name: "vllm",
  quantizations: VLLM_QUANTIZATIONS,
  version_command: ["vllm", "--version"],
  parseVersion,
  validate,
  command,
  probes,
  metrics,
  api_key: VLLM_TAKES_API_KEY,
};
