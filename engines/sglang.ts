/**
 * The built-in SGLang engine plugin (design §8): one `python3 -m
 * sglang.launch_server` per shard, following SGLang's own multi-node recipe
 * (the same command on every node, only `--node-rank` differs; engine reference
 * §2.2). Pure: it builds argv and probes, it never runs anything.
 *
 * Flags were checked against SGLang's argument declarations
 * (`python/sglang/srt/arg_groups/fields/{model,parallel,serving,
 * observability,device}.py`, `arg_groups/choices.py`) and the multi-node
 * deployment docs (docs.sglang.io). The GPU and NCCL environment is not built
 * here: prepare.ts merges the shared one (design §5.3) over whatever a plugin
 * returns.
 *
 * @example Build a single-node shard's command
 * ```ts ignore
 * import { sglangPlugin } from "./sglang.ts";
 * const { argv } = sglangPlugin.command(launch);
 * // ["python3", "-m", "sglang.launch_server", "--model-path", …, "--enable-metrics"]
 * ```
 *
 * @module
 */
import { apiKeyProblems } from "./api_key.ts";
import { modelArgument } from "./model_arg.ts";
import { compareVersions, ownedFlagProblems } from "./args.ts";
import { phasePatterns, SGLANG_COLD_START_PHASES } from "./cold_start_patterns.ts";
import type {
  EngineApiKey,
  EngineCommand,
  EnginePlugin,
  EngineProbes,
  MetricNames,
  ProgressPattern,
  ShardLaunch,
} from "./types.ts";

/**
 * Quantizations llmgw accepts for SGLang: `none` (no `--quantization` flag)
 * plus values of SGLang's `--quantization` choices. Source:
 * `QUANTIZATION_CHOICES` in sgl-project/sglang
 * `python/sglang/srt/arg_groups/choices.py` (formerly in `server_args.py`);
 * every value here is present in both. Left out on purpose: choices for other
 * platforms (NPU `modelslim`, `mxfp_w4a8`; AMD `quark*`, `petit_nvfp4`; Apple
 * `mlx_q4`, `mlx_q8`), `marlin` (gone from current SGLang), and internal or
 * experimental ones (`unquant`, `humming`, `nvfp4_online`, `modelopt_mixed`,
 * `auto-round*`, `mxfp8`).
 *
 * The fp8 ones (`fp8`, `w8a8_fp8`, `w4afp8`, `modelopt_fp8`, and `modelopt`,
 * which defaults to FP8) are refused below compute capability 8.9 by the
 * shared checks (design §6.2, deployment/quantization.ts), not here.
 */
export const SGLANG_QUANTIZATIONS: readonly string[] = [
  "none",
  "fp8",
  "awq",
  "awq_marlin",
  "gptq",
  "gptq_marlin",
  "bitsandbytes",
  "gguf",
  "compressed-tensors",
  "w8a8_int8",
  "w8a8_fp8",
  "w4afp8",
  "moe_wna16",
  "mxfp4",
  "modelopt",
  "modelopt_fp8",
  "modelopt_fp4",
];

/**
 * Flags llmgw sets from the profile and placement (design §8), with SGLang's
 * aliases (`--model`, `--tensor-parallel-size`, `--nccl-init-addr`, …). An
 * engine_args entry naming one, or an argparse abbreviation of one (`--tp`
 * is how SGLang's own docs write `--tp-size`), is refused rather than left
 * to conflict. `--dp-size` is owned because data parallelism inside one
 * process would multiply the GPUs placement counted; llmgw scales with
 * replicas instead. `--base-gpu-id`/`--gpu-id-step` would move the shard off
 * the GPUs that CUDA_VISIBLE_DEVICES gives it.
 */
export const SGLANG_OWNED_FLAGS: readonly string[] = [
  "--model-path",
  "--model",
  "--served-model-name",
  "--host",
  "--port",
  "--tp-size",
  "--tensor-parallel-size",
  "--pp-size",
  "--pipeline-parallel-size",
  "--dp-size",
  "--data-parallel-size",
  "--nnodes",
  "--node-rank",
  "--dist-init-addr",
  "--nccl-init-addr",
  "--quantization",
  "--base-gpu-id",
  "--gpu-id-step",
];

/**
 * SGLang has no environment variable for its API key, only `--api-key`,
 * which would put the key in argv for every local user to read in `ps`
 * (engine reference §6.2). Since 0.5.3 it also reads its flags from a YAML
 * file named by `--config` (file first, the command line after), so the
 * supervisor writes `"api-key": KEY` to an owner-only file and argv holds
 * only `--config PATH`. A profile setting `--api-key` or `--config` is
 * refused (engines/api_key.ts). SGLang still prints the key in its
 * `server_args=` startup line; the agent scrubs its log.
 */
export const SGLANG_TAKES_API_KEY: EngineApiKey = {
  config_file: { flag: "--config", field: "api-key" },
};

/** The first SGLang with `--config` (sglang PR #10534, merged after 0.5.2; engine reference §6.2). */
export const SGLANG_CONFIG_FILE_MIN_VERSION = "0.5.3";

/**
 * Flags llmgw does not set but cannot work with, and why. Matched like
 * owned flags (exact, `--flag=value`, or an abbreviation).
 */
const INCOMPATIBLE_FLAGS: ReadonlyMap<string, string> = new Map([
  // `--config` is refused by apiKeyProblems: it is where llmgw puts the key.
  [
    "--smg-grpc-mode",
    "it serves gRPC instead of the HTTP API that llmgw probes and routes to",
  ],
  [
    "--grpc-mode",
    "it serves gRPC instead of the HTTP API that llmgw probes and routes to",
  ],
]);

/** The argparse matching of args.ts: exact, `--flag=value`, or an unambiguous prefix. */
function flagHit(arg: string, flags: Iterable<string>): string | undefined {
  if (!arg.startsWith("-") || arg === "-" || arg === "--") return undefined;
  const flag = arg.split("=")[0];
  for (const f of flags) {
    if (f === flag || (flag.startsWith("--") && flag.length > 3 && f.startsWith(flag))) {
      return f;
    }
  }
  return undefined;
}

/**
 * SGLang's weight-loading progress bars (tqdm), e.g.
 * `Loading safetensors checkpoint shards:  63% Completed | 100/158 [00:14<00:08,  6.75it/s]`.
 * `Loading pt checkpoint shards` is the `.bin` loader; `Multi-thread loading
 * shards` is newer versions' multi-threaded safetensors loader (what their
 * documentation's recorded logs show). tqdm redraws with `\r`, so one captured "line" can hold several
 * updates; the expression matches one update.
 */
const BAR_NAMES = "(?:Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading shards)";
const BAR_COUNT = String.raw`:\s+\d+% Completed \| (?<done>\d+)/(?<total>\d+)`;
const LOADING_PROGRESS: readonly ProgressPattern[] = [{ regex: BAR_NAMES + BAR_COUNT }];

/** Fresh copies, so a caller that edits its probes cannot change another shard's. */
function loadingProgress(): ProgressPattern[] {
  return LOADING_PROGRESS.map((p) => ({ ...p }));
}

/** Metric names; stable across SGLang versions that have `--enable-metrics` (engine reference §2.4). */
const METRICS: MetricNames = {
  running: ["sglang:num_running_reqs"],
  waiting: ["sglang:num_queue_reqs"],
  kv_cache_usage: ["sglang:token_usage"],
};

/** `host:port`, with an IPv6 host in brackets as SGLang's `--dist-init-addr` parser expects. */
function hostPort(host: string, port: number): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}

function validate(launch: ShardLaunch): string[] {
  const p = launch.profile;
  const problems = [
    ...ownedFlagProblems(p.name, "sglang", p.engine_args, SGLANG_OWNED_FLAGS),
    ...apiKeyProblems("sglang", p, { key: SGLANG_TAKES_API_KEY }),
  ];
  for (const arg of p.engine_args) {
    const hit = flagHit(arg, INCOMPATIBLE_FLAGS.keys());
    if (hit !== undefined) {
      // Name the flag only: the argument is the profile's, and may be long or secret.
      problems.push(
        `profile "${p.name}": engine_args sets ${hit}, which llmgw cannot run sglang with: ${
          INCOMPATIBLE_FLAGS.get(hit)
        }`,
      );
    }
  }
  // Which of 0.5.3's pre-releases had --config is unverified: they count below it.
  const noConfigFile = (version: string) =>
    compareVersions(version, SGLANG_CONFIG_FILE_MIN_VERSION, { preReleases: "below" }) < 0;
  if (launch.rank === 0 && launch.engine_version !== null && noConfigFile(launch.engine_version)) {
    // Only rank 0 gets the key (the supervisor's rule), so only rank 0 needs the file.
    problems.push(
      `SGLang ${launch.engine_version} on node ${launch.node.id} has no --config, so llmgw could pass the shard's API key only in argv, where every local user can read it; upgrade SGLang to ${SGLANG_CONFIG_FILE_MIN_VERSION} or later`,
    );
  }
  for (const key of Object.keys(p.engine_options)) {
    problems.push(
      `profile "${p.name}": engine_options.${key} is not an sglang option (sglang takes no engine_options); pass SGLang flags in engine_args`,
    );
  }
  // fp8 below compute capability 8.9 is refused by the shared checks
  // (prepare.ts, design §6.2). Left alone, SGLang would run it weight-only
  // through Marlin on SM 8.0-8.8 (PR #8990; engine reference §3): a silent slow path.
  return problems;
}

function command(launch: ShardLaunch): EngineCommand {
  const p = launch.profile;
  const argv = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    modelArgument(launch),
    "--served-model-name",
    launch.served_model_name,
    // Loopback only: the agent's engine proxy is the one door to the engine
    // (design §11.2). Ranks ≥ 1 bind the same --host/--port for their dummy
    // health server only (engine.py `launch_dummy_health_check_server`),
    // which only the local agent probes; the ranks meet on --dist-init-addr.
    "--host",
    "127.0.0.1",
    // The shard's own port on every rank, not the leader's: a rank ≥ 1 binds
    // it on its own node, where the leader's port may belong to another shard.
    "--port",
    String(launch.port),
    // The total across nodes (engine reference §2.2). The full name: `--tp` only
    // works through argparse abbreviation.
    "--tp-size",
    String(p.tensor_parallel),
  ];
  if (p.pipeline_parallel > 1) argv.push("--pp-size", String(p.pipeline_parallel));
  if (p.quantization !== "none") argv.push("--quantization", p.quantization);
  // Off by default; the gateway's load signals read /metrics (engine reference §2.4).
  argv.push("--enable-metrics");
  if (launch.world.nodes > 1) {
    // SGLang's recipe: the same launch on every node, only --node-rank
    // differs; --dist-init-addr is rank 0's rendezvous address (design §8).
    argv.push(
      "--nnodes",
      String(launch.world.nodes),
      "--node-rank",
      String(launch.rank),
      "--dist-init-addr",
      hostPort(launch.world.leader_addr, launch.world.rendezvous_port),
    );
  }
  argv.push(...p.engine_args);
  // The GPU and NCCL environment is the shared one (design §5.3), merged by prepare.ts.
  return { argv, env: {} };
}

function probes(launch: ShardLaunch): EngineProbes {
  if (launch.rank > 0) {
    // Ranks ≥ 1 serve no API. Once their schedulers are up they do start a
    // dummy server whose /health is an unconditional 200 (engine reference §2.2),
    // but that says nothing about the replica (design §9.3), its existence and
    // reachability vary by version (sglang PR #12297 fixed it being
    // unreachable), and the replica's readiness already waits for every rank:
    // rank 0's /health runs a generation through all of them. So, as for any
    // shard that serves no HTTP: the process being alive is all we check.
    return {
      serves_http: false,
      liveness: [],
      readiness: [],
      loading_progress: loadingProgress(),
      cold_start_phases: phasePatterns(SGLANG_COLD_START_PHASES),
    };
  }
  return {
    serves_http: true,
    // Process alive only. /health answers 503 during warm-up and when its
    // 1-token generation times out under load (engine reference §2.3), so a
    // /health liveness check would kill warming or busy engines.
    liveness: [],
    // Design §9.3: /health 200 (warm-up done; 503 before) and /v1/models listing
    // the served name (it answers 200 as soon as the port opens, so alone it
    // proves nothing; together they also catch a wrong --served-model-name).
    readiness: [
      { path: "/health", expect_status: 200 },
      { path: "/v1/models", expect_status: 200, lists_model: launch.served_model_name },
    ],
    loading_progress: loadingProgress(),
    cold_start_phases: phasePatterns(SGLANG_COLD_START_PHASES),
  };
}

/**
 * Reads SGLang's version from the output of {@link sglangPlugin}'s
 * `version_command`: the last line that is a version (`0.5.3`,
 * `0.4.6.post1`, `0.5.0rc2`, `0.5.3+cu128`), tolerating a `sglang`,
 * `sglang==` or `Version:` prefix. Null when there is none (sglang not
 * installed prints a Python error).
 */
export function parseSglangVersion(output: string): string | null {
  const re =
    /^(?:sglang\s*(?:==)?\s*|version:\s*|v)?(\d+\.\d+(?:\.\d+)*(?:[.-]?(?:post|dev|rc|a|b)\d*)*(?:\+[0-9A-Za-z.]+)?)$/i;
  const lines = output.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "");
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = re.exec(lines[i]);
    if (m !== null) return m[1];
  }
  return null;
}

/** The SGLang engine plugin (design §8). */
export const sglangPlugin: EnginePlugin = {
  name: "sglang",
  quantizations: SGLANG_QUANTIZATIONS,
  // Package metadata, not `import sglang`: no torch/CUDA initialisation and no
  // import-time warnings, and it never starts a server (design §14).
  version_command: [
    "python3",
    "-c",
    "import importlib.metadata as m; print(m.version('sglang'))",
  ],
  parseVersion: parseSglangVersion,
  validate,
  command,
  probes,
  // The names have not changed across versions, so the version is not needed.
  metrics: (_version: string | null): MetricNames => structuredClone(METRICS),
  api_key: SGLANG_TAKES_API_KEY,
};
