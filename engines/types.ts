/**
 * The engine plugin interface (design §8). A plugin turns one shard's launch
 * description into a command line, an environment and readiness probes. It
 * is pure: it never starts or watches a process (the supervisor does,
 * design §9). The same interface serves built-in plugins (vLLM, SGLang) and
 * third-party ones, in process or as an executable speaking JSON
 * (docs/plugins.md).
 *
 * These are wire types (an out-of-process plugin reads and writes them as
 * JSON), so field names are snake_case.
 *
 * @module
 */
import type { FabricPort } from "../discovery/types.ts";
import type { PhasePattern } from "./cold_start_phases.ts";

/** The version of the launch/response format; bumped on incompatible changes. */
export const ENGINE_API_VERSION = 1;

/** The profile fields a plugin needs (design §6.1). */
export interface LaunchProfile {
  /** Profile name. */
  name: string;
  /** Tensor-parallel size of the whole replica. */
  tensor_parallel: number;
  /** Pipeline-parallel size. */
  pipeline_parallel: number;
  /** Nodes in the replica. */
  nodes: number;
  /** GPUs each shard (node) uses. */
  gpus_per_node: number;
  /** Quantization: none, fp8, awq, … */
  quantization: string;
  /** Extra engine arguments, appended after llmgw's own. */
  engine_args: string[];
  /** Engine-specific options (e.g. vllm's multi_node_backend). */
  engine_options: Record<string, string | number | boolean>;
  /** Extra environment from the profile. */
  env: Record<string, string>;
}

/** One GPU a shard runs on. */
export interface LaunchGpu {
  /** nvidia-smi index (what CUDA_VISIBLE_DEVICES lists, with CUDA_DEVICE_ORDER=PCI_BUS_ID). */
  index: number;
  /** GPU class (design §2). */
  class: string;
  /** Compute capability, e.g. "9.0"; null when unknown. */
  compute_capability: string | null;
}

/**
 * The replica's world: how shards find each other. `Port` is `number` in a
 * launch a plugin receives, `number | null` in one the control plane sends
 * (rank 0's ports open until known).
 */
export interface LaunchWorld<Port extends number | null = number> {
  /** Nodes in the replica (= shards). */
  nodes: number;
  /** Management address of rank 0, the leader. */
  leader_addr: string;
  /** Port on the leader for the distributed rendezvous (torch/NCCL bootstrap, Ray). */
  rendezvous_port: Port;
  /** The HTTP port rank 0 serves on. */
  leader_http_port: Port;
}

/** The replica's fabric and this node's active ports on it. */
export interface LaunchFabric {
  /** The operator's fabric name. */
  name: string;
  /** The active ports on this node, in HCA then port order. */
  ports: FabricPort[];
}

/** The node a shard runs on. */
export interface LaunchNode {
  /** Node id. */
  id: string;
  /** The management address other shards reach this node on. */
  mgmt_addr: string;
  /** The management interface (for NCCL/Gloo socket interface variables); null when unknown. */
  mgmt_interface: string | null;
}

/** What every launch carries, whoever filled in its ports. */
export interface LaunchCommon {
  /** Format version: {@link ENGINE_API_VERSION}. */
  api_version: number;
  /** Deployment name. */
  deployment: string;
  /** Replica id. */
  replica_id: string;
  /** Shard id. */
  shard_id: string;
  /** Hub id or local path of the model. */
  model: string;
  /**
   * The commit the deployment revision's model revision resolved to (40 hex),
   * when the control plane knows it: the agent fetches exactly this commit.
   * Absent for a local path or while unresolved (issue #25 item 1).
   */
  model_commit?: string;
  /**
   * The deployment's model revision (branch, tag or commit) when it is not
   * `main`: an agent fetches it while `model_commit` is absent (resolution
   * pending), never `main` in its place. Absent for `main` and a local path,
   * so such launches hash as before (issue #25 item 1).
   */
  model_revision?: string;
  /** The name clients use (OpenAI `model`). */
  served_model_name: string;
  /** The profile chosen by placement. */
  profile: LaunchProfile;
  /** This shard's rank; rank 0 is the leader. */
  rank: number;
  /** This shard's GPUs. */
  gpus: LaunchGpu[];
  /** The replica's fabric and its active ports on this node; null for single-node replicas. */
  fabric: LaunchFabric | null;
  /** This node. */
  node: LaunchNode;
  /** The engine version installed on this node (design §14); null when unknown. */
  engine_version: string | null;
  /**
   * The model's directory on this host, which the engine is launched from
   * instead of `model` (a hub snapshot in the agent's model cache, or a
   * local path checked present). The agent fills it, as it fills its ports,
   * once the files are here (docs/plugins.md); absent from what the control
   * plane sends, and when the agent keeps no model cache.
   */
  model_path?: string;
}

/**
 * One shard's launch: everything a plugin receives to build it. The control
 * plane sends it with the ports its agent allocates open
 * ({@link DesiredLaunch}); the agent fills them (engines/port_block.ts
 * `withPorts`) before a plugin sees it ({@link ShardLaunch}). In the desired
 * state the agent checks it with protocol/shard_launch.ts, which a
 * compile-time check keeps identical to this interface.
 */
export interface Launch<Port extends number | null> extends LaunchCommon {
  /** The replica's world. */
  world: LaunchWorld<Port>;
  /** The port this shard serves HTTP on (when it serves HTTP); null until its agent allocates it. */
  port: Port;
}

/** A launch with every port filled in: what a plugin builds a command from. */
export type ShardLaunch = Launch<number>;

/**
 * A launch as the control plane sends it in a node's desired state: the
 * shard's own ports are its agent's to allocate, so `port` is null, and so
 * are rank 0's world ports; the other ranks carry rank 0's reported ports
 * (null until it has reported).
 */
export type DesiredLaunch = Launch<number | null>;

/** A desired launch's world: rank 0's ports, once known. */
export type DesiredLaunchWorld = LaunchWorld<number | null>;

/** A command line and environment for one shard. */
export interface EngineCommand {
  /** argv[0] is the program. */
  argv: string[];
  /** Environment to add to the agent's own. */
  env: Record<string, string>;
}

/** An HTTP check against the shard's port. */
export interface HttpCheck {
  /** Path, e.g. `/health`. */
  path: string;
  /** The status that means "yes". */
  expect_status: number;
  /** When set, the response must be an OpenAI model list whose `data[].id` includes this name. */
  lists_model?: string;
}

/**
 * A log line pattern that shows loading progress (design §9.3). A JavaScript
 * regular expression with named groups `percent`, or `done` and `total`.
 */
export interface ProgressPattern {
  /** The expression's source. */
  regex: string;
}

/** How the supervisor tells "up" and "weights loaded" for this shard (design §9.3). */
export interface EngineProbes {
  /** Whether this shard serves the OpenAI API (only rank 0 of a multi-node replica does). */
  serves_http: boolean;
  /** Checks that say the process is up; empty means "the process is alive" is all there is. */
  liveness: HttpCheck[];
  /** Checks that must all pass before traffic; empty for shards that serve no HTTP. */
  readiness: HttpCheck[];
  /** Log lines that show loading progress while the port is still closed. */
  loading_progress: ProgressPattern[];
  /**
   * Log lines that mark the phases of a cold start, for its receipt
   * (engines/cold_start_phases.ts). Absent or empty: the receipt has the
   * first ready probe only.
   */
  cold_start_phases?: PhasePattern[];
}

/** Prometheus metric names for the gateway's load signals, candidates in order of preference. */
export interface MetricNames {
  /** Requests running now. */
  running: string[];
  /** Requests waiting in the queue. */
  waiting: string[];
  /** KV-cache usage, 0-1. */
  kv_cache_usage: string[];
}

/**
 * How an engine takes the API key llmgw gives each shard (design §11.2): a
 * second lock behind the agent's engine proxy, which is the only caller that
 * holds the key. The supervisor generates the key when it spawns the shard
 * and adds it there, so the key is never part of a launch, a plugin's answer,
 * `llmgw plan` output or a pid file:
 *
 * - `{env: NAME}`: the variable is set to the key in the engine's
 *   environment. Preferred: `/proc/PID/environ` is readable only by the
 *   engine's user and root.
 * - `{flag: NAME}`: `NAME KEY` is appended to the argv. Every local user can
 *   read it in `ps` and `/proc/PID/cmdline`; use it only for engines that
 *   read the key from nowhere else.
 * - `{config_file: {flag, field}}`: the supervisor writes `"field": "KEY"`
 *   (YAML) to a fresh owner-only (0600) `.yaml` file in the shard's
 *   directory and appends `flag PATH` to the argv, so argv holds the path
 *   only. For engines that read their settings from a YAML file given on
 *   the command line (SGLang's `--config`, engine reference §6.2).
 *
 * Either way the engine must accept `Authorization: Bearer KEY`, the only
 * header llmgw sends, on every route it guards (docs/plugins.md); which
 * routes it leaves open is its own business (engine reference §6 for vLLM
 * and SGLang), since llmgw sends the key on every request.
 */
export type EngineApiKey =
  | { readonly env: string }
  | { readonly flag: string }
  | { readonly config_file: EngineKeyConfigFile };

/** The {@link EngineApiKey} form that passes the key in a YAML file named on the command line. */
export interface EngineKeyConfigFile {
  /** The option that names the file, e.g. SGLang's `--config`. */
  readonly flag: string;
  /** The file's key the engine reads the API key from, spelled as the engine expects (`api-key`). */
  readonly field: string;
}

/**
 * What one shard will run, or why it cannot. A plugin answers it for a
 * launch (an out-of-process plugin's `shard` verb prints it, docs/plugins.md);
 * engines/prepare.ts `finishShard` adds llmgw's shared checks and
 * environment; the agent adds the engine's `api_key`, and the supervisor
 * runs it.
 */
export interface ShardSpec {
  /** Why the shard cannot run; empty when `command` and `probes` are set. */
  problems: string[];
  /** argv and the environment llmgw adds (once finished: profile, engine, then llmgw's own). */
  command: EngineCommand | null;
  /** Liveness and readiness (design §9.3). */
  probes: EngineProbes | null;
  /** Metric names for the gateway's load signals, for the launch's engine version. */
  metrics: MetricNames | null;
  /**
   * How the engine takes an API key, when it can: the supervisor adds a key
   * of its own at spawn time, so none is in the command above. A plugin's
   * answer leaves it out (its `describe` says it).
   */
  api_key?: EngineApiKey;
}

/** An engine plugin (design §8). All methods are pure. */
export interface EnginePlugin {
  /** The engine name profiles use, e.g. `vllm`. */
  name: string;
  /** Quantizations this engine accepts (`none` included when it runs unquantized models). */
  quantizations: readonly string[];
  /** How to ask a host for the installed version (design §14), e.g. `["vllm", "--version"]`. */
  version_command: readonly string[];
  /** Reads the version from that command's output; null when it cannot. */
  parseVersion(output: string): string | null;
  /** Engine-specific problems with this launch (design §6.2); empty when it can run. */
  validate(launch: ShardLaunch): string[];
  /** The shard's command line and engine-specific environment. */
  command(launch: ShardLaunch): EngineCommand;
  /** The shard's probes. */
  probes(launch: ShardLaunch): EngineProbes;
  /** Metric names for an engine version (null: unknown version). */
  metrics(version: string | null): MetricNames;
  /** How the engine takes its API key; absent when it takes none (it then runs without one). */
  api_key?: EngineApiKey;
}
