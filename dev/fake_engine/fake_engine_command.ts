/**
 * What the fake engine's argv asks for (dev/fake_engine/fake_engine.ts): `vllm
 * <vllm argv…>` or `sglang <args after "python3 -m sglang.launch_server">`,
 * read with each engine's defaults into an {@link EngineConfig}, and the
 * checks the real engines make after parsing.
 *
 * @module
 */

import {
  display,
  type FlagValue,
  parseFlags,
  parseHumanInt,
  UsageError,
} from "./fake_engine_argparse.ts";
import { SGLANG_FLAGS, VLLM_FLAGS } from "./fake_engine_flags.ts";
import { type EngineName, envGet, knobVersion } from "./fake_engine_knobs.ts";
import { type ConfigFiles, DENO_FILES, mergeConfigFile } from "./fake_engine_config_file.ts";
import { compareVersion } from "./fake_load_metrics.ts";
import { ConfigError } from "./fake_engine_config_error.ts";

export { ConfigError };

/** The first SGLang with `--config` (engine reference §6.2). */
const SGLANG_CONFIG_MIN_VERSION = "0.5.3";

const VLLM_SERVE_USAGE = "vllm serve [model_tag] [options]";
const VLLM_USAGE = "vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...";
const SGLANG_USAGE = "launch_server.py [-h] --model-path MODEL_PATH [options]";

export type { EngineName };

/** What the fake engine was asked to run, from its argv. */
export interface EngineConfig {
  /** Which engine. */
  engine: EngineName;
  /** The model (vLLM's model_tag or --model; SGLang's --model-path). */
  model: string;
  /** Served names; the first is the primary (responses, metrics label). */
  served_names: string[];
  /** Listen address. */
  host: string;
  /** Listen port. */
  port: number;
  /** Tensor-parallel size. */
  tp: number;
  /** Pipeline-parallel size. */
  pp: number;
  /** Nodes of the replica. */
  nnodes: number;
  /** This node's rank. */
  node_rank: number;
  /** vLLM `--headless`. */
  headless: boolean;
  /** --quantization, or null. */
  quantization: string | null;
  /** max_model_len reported by /v1/models. */
  max_model_len: number;
  /** Requests run at once; more wait (vLLM --max-num-seqs, SGLang --max-running-requests). */
  max_running: number;
  /** Whether /metrics is served (always for vLLM, --enable-metrics for SGLang). */
  metrics: boolean;
  /** Whether HTTP access lines are logged. */
  access_log: boolean;
  /**
   * The API keys a request may present; empty when the engine checks none.
   * vLLM: the `--api-key` values, else `VLLM_API_KEY`; SGLang: `--api-key`.
   */
  api_keys: string[];
  /** Where the keys came from, for the startup log: `--api-key` or `VLLM_API_KEY`; null without keys. */
  api_key_source: string | null;
  /** vLLM --distributed-executor-backend, or null. */
  executor_backend: string | null;
  /** SGLang --dist-init-addr, or vLLM --master-addr:--master-port, or null. */
  rendezvous: string | null;
  /** SGLang --skip-server-warmup. */
  skip_warmup: boolean;
  /** Flags as given, by canonical name (for the startup log). */
  flags: Map<string, FlagValue>;
}

/** What a command line asks for. */
export type Command =
  | { kind: "serve"; config: EngineConfig }
  | { kind: "print"; text: string };

const DEFAULT_MAX_MODEL_LEN = 32768;

/** The string value of flag `key`, if given. */
export function flagString(flags: Map<string, FlagValue>, key: string): string | undefined {
  const x = flags.get(key);
  return typeof x === "string" ? x : undefined;
}

/** The numeric value of flag `key` (argparse checked its type), else `dflt`. */
export function flagInt(flags: Map<string, FlagValue>, key: string, dflt: number): number {
  const x = flagString(flags, key);
  return x === undefined ? dflt : Number(x);
}

function checkTopology(c: EngineConfig): void {
  for (const [name, n] of [["tensor parallel size", c.tp], ["pipeline parallel size", c.pp]]) {
    if (!Number.isInteger(n) || (n as number) < 1) {
      throw new ConfigError(`${name} must be a positive integer, got ${n}`);
    }
  }
  if (c.nnodes < 1) throw new ConfigError(`nnodes must be at least 1, got ${c.nnodes}`);
  if (c.node_rank < 0 || c.node_rank >= c.nnodes) {
    throw new ConfigError(`node_rank ${c.node_rank} must be in [0, nnodes=${c.nnodes})`);
  }
  if ((c.tp * c.pp) % c.nnodes !== 0) {
    throw new ConfigError(
      `world size tp*pp=${c.tp * c.pp} is not divisible by nnodes=${c.nnodes}`,
    );
  }
  if (c.port < 0 || c.port > 65535) throw new ConfigError(`port ${c.port} is out of range`);
}

/**
 * Reads the fake engine's argv: `vllm <vllm argv…>` or `sglang <args after
 * "python3 -m sglang.launch_server">`, for vLLM `VLLM_API_KEY` from `env`,
 * and SGLang's `--config` file from `files`. Throws {@link UsageError} (exit
 * 2), {@link ConfigError} (exit 1) or FakeConfigFileError (exit 2).
 */
export function parseCommandLine(
  argv: readonly string[],
  env: (k: string) => string | undefined = envGet,
  files: ConfigFiles = DENO_FILES,
): Command {
  const [engine, ...rest] = argv;
  if (engine === "vllm") return parseVllm(rest, env);
  if (engine === "sglang") return parseSglang(rest, env, files);
  throw new UsageError(
    "fake_engine.ts",
    "fake_engine.ts {vllm,sglang} ARGS... (llmgw test tooling; see dev/fake_engine/README.md)",
    `argument engine: invalid choice: '${engine ?? ""}' (choose from 'vllm', 'sglang')`,
  );
}

/**
 * vLLM's keys: `[key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]`
 * (engine reference §6.1). Any `--api-key` hides the variable, even one whose
 * values are all empty; empty keys are dropped.
 */
function vllmApiKeys(
  flag: FlagValue | undefined,
  env: (k: string) => string | undefined,
): { keys: string[]; source: string | null } {
  const given = Array.isArray(flag) && flag.length > 0;
  const keys = (given ? flag : [env("VLLM_API_KEY") ?? ""]).filter((k) => k !== "");
  return { keys, source: keys.length === 0 ? null : given ? "--api-key" : "VLLM_API_KEY" };
}

function parseVllm(argv: readonly string[], env: (k: string) => string | undefined): Command {
  const first = argv[0];
  if (first === "--version" || first === "-v") {
    return { kind: "print", text: `${knobVersion("vllm")}\n` };
  }
  if (first === undefined) {
    throw new UsageError("vllm", VLLM_USAGE, "the following arguments are required: subparser");
  }
  if (first === "-h" || first === "--help") {
    return {
      kind: "print",
      text:
        `usage: ${VLLM_USAGE}\n\nllmgw FAKE vLLM (dev/fake_engine/fake_engine.ts): only "serve" is imitated.\n`,
    };
  }
  if (first !== "serve") {
    throw new UsageError(
      "vllm",
      VLLM_USAGE,
      `argument subparser: invalid choice: '${first}' (choose from 'chat', 'complete', 'serve', 'bench', 'collect-env', 'run-batch')`,
    );
  }
  const args = argv.slice(1);
  if (args.includes("-h") || args.includes("--help")) {
    return {
      kind: "print",
      text:
        `usage: ${VLLM_SERVE_USAGE}\n\nllmgw FAKE vLLM (dev/fake_engine/fake_engine.ts). Accepted flags:\n${
          VLLM_FLAGS.map((s) => `  ${display(s)}`).join("\n")
        }\n`,
    };
  }
  const { values, positionals } = parseFlags(args, VLLM_FLAGS, {
    prog: "vllm serve",
    usage: VLLM_SERVE_USAGE,
    extrasProg: "vllm",
    extrasUsage: VLLM_USAGE,
    allowAbbrev: false,
    underscoresAsDashes: true,
    maxPositionals: 1,
  });
  const model = positionals[0] ?? flagString(values, "--model") ?? "Qwen/Qwen3-0.6B";
  const names = values.get("--served-model-name");
  const maxLen = parseHumanInt(flagString(values, "--max-model-len") ?? "-1")!;
  const masterAddr = flagString(values, "--master-addr");
  const apiKeys = vllmApiKeys(values.get("--api-key"), env);
  const config: EngineConfig = {
    engine: "vllm",
    model,
    served_names: Array.isArray(names) ? names : [model],
    host: flagString(values, "--host") ?? "0.0.0.0",
    port: flagInt(values, "--port", 8000),
    tp: flagInt(values, "--tensor-parallel-size", 1),
    pp: flagInt(values, "--pipeline-parallel-size", 1),
    nnodes: flagInt(values, "--nnodes", 1),
    node_rank: flagInt(values, "--node-rank", 0),
    headless: values.get("--headless") === true,
    quantization: flagString(values, "--quantization") ?? null,
    max_model_len: maxLen > 0 ? maxLen : DEFAULT_MAX_MODEL_LEN,
    max_running: flagInt(values, "--max-num-seqs", 256),
    metrics: true,
    access_log: values.get("--disable-uvicorn-access-log") !== true,
    api_keys: apiKeys.keys,
    api_key_source: apiKeys.source,
    executor_backend: flagString(values, "--distributed-executor-backend") ?? null,
    rendezvous: masterAddr === undefined && !values.has("--master-port")
      ? null
      : `${masterAddr ?? "127.0.0.1"}:${flagInt(values, "--master-port", 29501)}`,
    skip_warmup: false,
    flags: values,
  };
  checkTopology(config);
  if (config.max_running < 1) throw new ConfigError("max_num_seqs must be at least 1");
  return { kind: "serve", config };
}

function parseSglang(
  cli: readonly string[],
  env: (k: string) => string | undefined,
  files: ConfigFiles,
): Command {
  // Not a launch_server flag: what the python3 shim runs for SGLang's version
  // command (engines/sglang.ts), so agents on the fake report SGLang too.
  if (cli.length === 1 && cli[0] === "--version") {
    return { kind: "print", text: `${knobVersion("sglang", env)}\n` };
  }
  if (cli.includes("-h") || cli.includes("--help")) {
    return {
      kind: "print",
      text:
        `usage: ${SGLANG_USAGE}\n\nllmgw FAKE SGLang (dev/fake_engine/fake_engine.ts). Accepted flags:\n${
          SGLANG_FLAGS.map((s) => `  ${display(s)}`).join("\n")
        }\n`,
    };
  }
  // Before 0.5.3 there is no --config: argparse refuses it as unrecognized.
  const hasConfig = compareVersion(knobVersion("sglang", env), SGLANG_CONFIG_MIN_VERSION) >= 0;
  const specs = hasConfig ? SGLANG_FLAGS : SGLANG_FLAGS.filter((s) => s.names[0] !== "--config");
  const merged = hasConfig ? mergeConfigFile(cli, specs, files) : { file: [], cli: [...cli] };
  const parse = (args: readonly string[], required = true) =>
    parseFlags(args, required ? specs : specs.map((s) => ({ ...s, required: false })), {
      prog: "launch_server.py",
      usage: SGLANG_USAGE,
      extrasProg: "launch_server.py",
      extrasUsage: SGLANG_USAGE,
      allowAbbrev: true,
      underscoresAsDashes: false,
      maxPositionals: 0,
    });
  const { values } = parse([...merged.file, ...merged.cli]);
  // For the startup line: the command line's key wins over the file's.
  const keyFromFile = merged.file.length > 0 && !parse(merged.cli, false).values.has("--api-key");
  const model = flagString(values, "--model-path")!;
  const dist = flagString(values, "--dist-init-addr");
  const apiKey = flagString(values, "--api-key") ?? "";
  if (dist !== undefined && !/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d+$/.test(dist)) {
    throw new ConfigError(`--dist-init-addr must be host:port (IPv6 in brackets), got '${dist}'`);
  }
  const config: EngineConfig = {
    engine: "sglang",
    model,
    served_names: [flagString(values, "--served-model-name") ?? model],
    host: flagString(values, "--host") ?? "127.0.0.1",
    port: flagInt(values, "--port", 30000),
    tp: flagInt(values, "--tp-size", 1),
    pp: flagInt(values, "--pp-size", 1),
    nnodes: flagInt(values, "--nnodes", 1),
    node_rank: flagInt(values, "--node-rank", 0),
    headless: false,
    quantization: flagString(values, "--quantization") ?? null,
    max_model_len: flagInt(values, "--context-length", DEFAULT_MAX_MODEL_LEN),
    max_running: flagInt(values, "--max-running-requests", 256),
    metrics: values.get("--enable-metrics") === true,
    access_log: true,
    // SGLang reads no key from its environment; an empty one is none (`if api_key:`).
    api_keys: apiKey === "" ? [] : [apiKey],
    api_key_source: apiKey === "" ? null : keyFromFile ? "--config" : "--api-key",
    executor_backend: null,
    rendezvous: dist ?? null,
    skip_warmup: values.get("--skip-server-warmup") === true,
    flags: values,
  };
  checkTopology(config);
  if (config.max_running < 1) throw new ConfigError("max_running_requests must be at least 1");
  return { kind: "serve", config };
}
