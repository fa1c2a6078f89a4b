/**
 * The llmgw FAKE ENGINE: test and demo tooling that stands in for vLLM and
 * SGLang on machines without GPUs (design §1.4). It is not a mode of the real
 * engine plugins and never touches a GPU.
 *
 * ```sh
 * deno run -A testing/fake_engine.ts vllm serve MODEL --served-model-name N --port P …
 * deno run -A testing/fake_engine.ts sglang --model-path M --served-model-name N --port P …
 * ```
 *
 * The shims in `testing/bin/` (`vllm`, `python3 -m sglang.launch_server`)
 * run it with exactly the argv the plugins build. The argv must stay the real
 * engine's; behaviour is tuned with `FAKE_ENGINE_*` environment variables
 * (see testing/README.md and {@link readKnobs}).
 *
 * What it imitates (engine reference §1.4, §1.5, §2.2-2.4, §5):
 * - argparse: unknown flags, missing values, bad ints and choices exit 2 with
 *   an argparse-style message on stderr; SGLang also takes unambiguous prefixes
 *   (`--tp` for `--tp-size`), vLLM takes `--flag_name` for `--flag-name`.
 * - vLLM: the port stays closed while "loading" (tqdm progress bars on
 *   stderr), then opens; headless ranks never listen.
 * - SGLang rank 0: listens at once, `/health` 503 until loaded and warm, then
 *   200; `/v1/models` 200 from the start. Ranks ≥ 1: a dummy health server once
 *   loaded.
 * - The OpenAI surface (`/v1/models`, chat and text completions with SSE
 *   streaming, `n` choices and `stream_options.include_usage`, embeddings;
 *   vLLM's `/v1/responses`, plain and streamed) and `/metrics` with the
 *   engines' real metric names.
 * - API keys as each engine takes and checks them (engine reference §6):
 *   vLLM's `--api-key` or `VLLM_API_KEY` on `/v1`, `/v2`, `/inference` and
 *   `/cohere`; SGLang's `--api-key` on everything but `/health*`, `/ready*`
 *   and `/metrics*`. The key never appears in the fake's output.
 * - A worker child in the same process group that outlives a SIGKILLed leader,
 *   as vLLM's EngineCore and SGLang's schedulers do.
 * - Optionally (off by default), a prefix cache, a time to first token that
 *   grows with the uncached part of the prompt, and the engines' cache
 *   counters: testing/fake_prefix_cache.ts.
 *
 * Its one import, fake_prefix_cache.ts, has none, so it runs from any working
 * directory without a deno.json or network access.
 *
 * @module
 */

import {
  DEFAULT_BLOCK_TOKENS,
  EngineLoad,
  PrefixCache,
  PrefixCacheKnobError,
  type PrefixCacheKnobs,
  type PrefixCacheSettings,
  type PromptBlocks,
  promptBlocks,
  readPrefixCacheKnobs,
  ttftMs,
} from "./fake_prefix_cache.ts";
import {
  loadMetricsText,
  type LoadState,
  loadState,
  metricFamilies,
  type MetricRow,
  promLabel,
} from "./fake_load_metrics.ts";

// ---------------------------------------------------------------------------
// Command-line parsing (a small argparse)

/** How a flag takes its value, in argparse's terms. */
export type FlagKind =
  /** One value (`--port 8000`, `--port=8000`). */
  | "value"
  /** One or more values (`nargs="+"`). */
  | "multi"
  /** `store_true`: no value, no `--no-` form. */
  | "store_true"
  /** `BooleanOptionalAction`: `--x` and `--no-x`. */
  | "bool_optional";

/** One flag of a parser. */
export interface FlagSpec {
  /** Option strings, the canonical long one first (e.g. `--tensor-parallel-size`, `-tp`). */
  names: readonly string[];
  /** How it takes values. */
  kind: FlagKind;
  /** The value type argparse would convert to (default str). */
  type?: "int" | "float" | "str" | "human_int";
  /** Allowed values, when argparse has `choices`. */
  choices?: readonly string[];
  /** argparse's `required=True`. */
  required?: boolean;
}

/** A parsed value: a string, true/false for booleans, a list for `multi`. */
export type FlagValue = string | boolean | string[];

/** An argparse error: the caller prints usage and `PROG: error: MESSAGE` and exits 2. */
export class UsageError extends Error {
  /** The program name argparse would print (`vllm`, `vllm serve`, `launch_server.py`). */
  readonly prog: string;
  /** The usage line printed before the error. */
  readonly usage: string;
  constructor(prog: string, usage: string, message: string) {
    super(message);
    this.name = "UsageError";
    this.prog = prog;
    this.usage = usage;
  }
  /** Exactly what argparse writes to stderr. */
  render(): string {
    return `usage: ${this.usage}\n${this.prog}: error: ${this.message}\n`;
  }
}

/** Options of {@link parseFlags}. */
export interface ParserOptions {
  /** argparse `prog` for errors. */
  prog: string;
  /** The program that reports unrecognized arguments (argparse's top-level parser). */
  extrasProg: string;
  /** Usage line. */
  usage: string;
  /** Usage line of the top-level parser. */
  extrasUsage: string;
  /** argparse `allow_abbrev` (unambiguous prefixes of long flags). */
  allowAbbrev: boolean;
  /** vLLM's FlexibleArgumentParser: `--flag_name` means `--flag-name`. */
  underscoresAsDashes: boolean;
  /** Positional arguments accepted (vLLM's model_tag: 1; SGLang: 0). */
  maxPositionals: number;
}

/** The result of {@link parseFlags}: values by canonical flag name (`--port`). */
export interface ParsedFlags {
  /** Values by the canonical (first) option string of each flag given. */
  values: Map<string, FlagValue>;
  /** Positional arguments. */
  positionals: string[];
}

function looksLikeOption(arg: string): boolean {
  // argparse treats "-1" and "-0.5" as values when no option looks like a negative number.
  return arg.startsWith("-") && arg !== "-" && !/^-\d+$|^-\d*\.\d+$/.test(arg);
}

function display(spec: FlagSpec): string {
  return spec.names.join("/");
}

function checkValue(spec: FlagSpec, value: string, prog: string, usage: string): void {
  const fail = (msg: string) => {
    throw new UsageError(prog, usage, `argument ${display(spec)}: ${msg}`);
  };
  switch (spec.type) {
    case "int":
      if (!/^[+-]?\d+$/.test(value.trim())) fail(`invalid int value: '${value}'`);
      break;
    case "float":
      if (value.trim() === "" || !Number.isFinite(Number(value))) {
        fail(`invalid float value: '${value}'`);
      }
      break;
    case "human_int":
      if (parseHumanInt(value) === null) fail(`invalid human_readable_int value: '${value}'`);
      break;
  }
  if (spec.choices !== undefined && !spec.choices.includes(value)) {
    fail(
      `invalid choice: '${value}' (choose from ${spec.choices.map((c) => `'${c}'`).join(", ")})`,
    );
  }
}

/**
 * Parses `argv` the way Python's argparse would with these flags, or throws
 * {@link UsageError}. Like argparse, value errors stop at the first one, and
 * unknown arguments are collected and reported together at the end.
 */
export function parseFlags(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  o: ParserOptions,
): ParsedFlags {
  const exact = new Map<string, { spec: FlagSpec; negated: boolean }>();
  for (const spec of specs) {
    for (const name of spec.names) exact.set(name, { spec, negated: false });
    if (spec.kind === "bool_optional") {
      for (const name of spec.names) {
        if (name.startsWith("--")) exact.set(`--no-${name.slice(2)}`, { spec, negated: true });
      }
    }
  }
  const values = new Map<string, FlagValue>();
  const positionals: string[] = [];
  const unrecognized: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      for (const rest of argv.slice(i + 1)) {
        if (positionals.length < o.maxPositionals) positionals.push(rest);
        else unrecognized.push(rest);
      }
      break;
    }
    if (!looksLikeOption(arg)) {
      if (positionals.length < o.maxPositionals) positionals.push(arg);
      else unrecognized.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    let name = eq < 0 ? arg : arg.slice(0, eq);
    const inline = eq < 0 ? undefined : arg.slice(eq + 1);
    if (o.underscoresAsDashes && name.startsWith("--")) name = name.replaceAll("_", "-");
    let hit = exact.get(name);
    if (hit === undefined && o.allowAbbrev && name.startsWith("--") && name.length > 2) {
      const matches = [...exact.entries()].filter(([n]) => n.startsWith(name));
      const distinct = new Set(matches.map(([, h]) => `${h.spec.names[0]}/${h.negated}`));
      if (distinct.size > 1) {
        throw new UsageError(
          o.prog,
          o.usage,
          `ambiguous option: ${arg} could match ${matches.map(([n]) => n).join(", ")}`,
        );
      }
      if (matches.length > 0) hit = matches[0][1];
    }
    if (hit === undefined) {
      unrecognized.push(arg);
      continue;
    }
    const { spec, negated } = hit;
    const key = spec.names[0];
    if (spec.kind === "store_true" || spec.kind === "bool_optional") {
      if (inline !== undefined) {
        throw new UsageError(
          o.prog,
          o.usage,
          `argument ${display(spec)}: ignored explicit argument '${inline}'`,
        );
      }
      values.set(key, !negated);
      continue;
    }
    if (spec.kind === "value") {
      let value = inline;
      if (value === undefined) {
        if (i + 1 >= argv.length || looksLikeOption(argv[i + 1])) {
          throw new UsageError(o.prog, o.usage, `argument ${display(spec)}: expected one argument`);
        }
        value = argv[++i];
      }
      checkValue(spec, value, o.prog, o.usage);
      values.set(key, value);
      continue;
    }
    // multi (nargs="+")
    const list: string[] = [];
    if (inline !== undefined) list.push(inline);
    else {
      while (i + 1 < argv.length && !looksLikeOption(argv[i + 1]) && argv[i + 1] !== "--") {
        list.push(argv[++i]);
      }
    }
    if (list.length === 0) {
      throw new UsageError(
        o.prog,
        o.usage,
        `argument ${display(spec)}: expected at least one argument`,
      );
    }
    for (const v of list) checkValue(spec, v, o.prog, o.usage);
    values.set(key, list);
  }
  const missing = specs.filter((s) => s.required === true && !values.has(s.names[0]));
  if (missing.length > 0) {
    throw new UsageError(
      o.prog,
      o.usage,
      `the following arguments are required: ${missing.map(display).join(", ")}`,
    );
  }
  if (unrecognized.length > 0) {
    throw new UsageError(
      o.extrasProg,
      o.extrasUsage,
      `unrecognized arguments: ${unrecognized.join(" ")}`,
    );
  }
  return { values, positionals };
}

/** vLLM's `human_readable_int`: `32768`, `32k` (×1000), `32K` (×1024), `-1`/`auto`; null when invalid. */
export function parseHumanInt(value: string): number | null {
  if (value === "-1" || value === "auto") return -1;
  const m = /^(\d+(?:\.\d+)?)([kmgKMG]?)$/.exec(value.trim());
  if (m === null) return null;
  const mult: Record<string, number> = {
    "": 1,
    k: 1e3,
    m: 1e6,
    g: 1e9,
    K: 1024,
    M: 1024 ** 2,
    G: 1024 ** 3,
  };
  const n = Number(m[1]) * mult[m[2]];
  return Number.isInteger(n) ? n : null;
}

const v = (names: string[], type: FlagSpec["type"] = "str", choices?: string[]): FlagSpec => ({
  names,
  kind: "value",
  type,
  choices,
});
const flag = (names: string[]): FlagSpec => ({ names, kind: "store_true" });
const boolOpt = (names: string[]): FlagSpec => ({ names, kind: "bool_optional" });
const multi = (names: string[]): FlagSpec => ({ names, kind: "multi" });

/**
 * Values the fake's vLLM accepts for `--quantization`: llmgw's choices plus
 * other methods vLLM knows, so that an engine_args override is not refused
 * here when real vLLM would take it. Note that `none` is not one (llmgw
 * omits the flag for unquantized models).
 */
export const FAKE_VLLM_QUANTIZATIONS: readonly string[] = [
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
  "deepspeedfp",
  "tpu_int8",
  "fbgemm_fp8",
  "ptpc_fp8",
  "marlin",
  "gptq_marlin_24",
  "bitblas",
  "gptq_bitblas",
  "experts_int8",
  "hqq",
  "torchao",
  "quark",
  "inc",
  "ipex",
  "cpu_awq",
];

/** Values the fake's SGLang accepts for `--quantization` (llmgw's choices plus a few others). */
export const FAKE_SGLANG_QUANTIZATIONS: readonly string[] = [
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
  "modelopt_mixed",
  "petit_nvfp4",
  "quark",
  "mxfp8",
  "qoq",
  "auto-round",
];

const DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"];

/**
 * The `vllm serve` flags the fake accepts: every flag llmgw emits or owns
 * (engines/vllm.ts) plus common tuning flags. Anything else is an
 * unrecognized argument, as in real vLLM.
 */
export const VLLM_FLAGS: readonly FlagSpec[] = [
  v(["--model"]),
  multi(["--served-model-name"]),
  v(["--host"]),
  v(["--port"], "int"),
  v(["--uds"]),
  v(["--tensor-parallel-size", "-tp"], "int"),
  v(["--pipeline-parallel-size", "-pp"], "int"),
  v(["--quantization", "-q"], "str", [...FAKE_VLLM_QUANTIZATIONS]),
  v(["--nnodes", "-n"], "int"),
  v(["--node-rank", "-r"], "int"),
  v(["--master-addr"]),
  v(["--master-port"], "int"),
  flag(["--headless"]),
  v(["--distributed-executor-backend"], "str", ["ray", "mp", "uni", "external_launcher"]),
  v(["--data-parallel-size", "-dp"], "int"),
  v(["--data-parallel-size-local", "-dpl"], "int"),
  v(["--data-parallel-rank", "-dpn"], "int"),
  v(["--data-parallel-start-rank", "-dpr"], "int"),
  v(["--data-parallel-address", "-dpa"]),
  v(["--data-parallel-rpc-port", "-dpp"], "int"),
  v(["--data-parallel-backend", "-dpb"], "str", ["mp", "ray"]),
  boolOpt(["--data-parallel-hybrid-lb", "-dph"]),
  boolOpt(["--data-parallel-external-lb", "-dpe"]),
  v(["--prefill-context-parallel-size", "-pcp"], "int"),
  v(["--api-server-count", "-asc"], "int"),
  // Common extras.
  v(["--max-model-len"], "human_int"),
  v(["--gpu-memory-utilization"], "float"),
  boolOpt(["--enforce-eager"]),
  v(["--dtype"], "str", DTYPES),
  boolOpt(["--trust-remote-code"]),
  v(["--max-num-seqs"], "int"),
  v(["--max-num-batched-tokens"], "human_int"),
  v(["--kv-cache-dtype"]),
  v(["--download-dir"]),
  v(["--load-format"]),
  v(["--tokenizer"]),
  v(["--tokenizer-mode"]),
  v(["--revision"]),
  v(["--tokenizer-revision"]),
  v(["--code-revision"]),
  v(["--seed"], "int"),
  v(["--block-size"], "int"),
  v(["--swap-space"], "float"),
  v(["--cpu-offload-gb"], "float"),
  v(["--num-gpu-blocks-override"], "int"),
  boolOpt(["--enable-prefix-caching"]),
  boolOpt(["--enable-chunked-prefill"]),
  boolOpt(["--async-scheduling"]),
  boolOpt(["--enable-expert-parallel", "-ep"]),
  boolOpt(["--disable-custom-all-reduce"]),
  boolOpt(["--enable-lora"]),
  v(["--max-lora-rank"], "int"),
  v(["--max-loras"], "int"),
  multi(["--lora-modules"]),
  flag(["--disable-log-stats"]),
  boolOpt(["--enable-log-requests"]),
  flag(["--disable-log-requests"]),
  flag(["--disable-uvicorn-access-log"]),
  v(["--uvicorn-log-level"], "str", ["critical", "error", "warning", "info", "debug", "trace"]),
  v(["--max-logprobs"], "int"),
  v(["--chat-template"]),
  v(["--generation-config"]),
  v(["--override-generation-config"]),
  v(["--hf-overrides"]),
  v(["--compilation-config", "-O"]),
  v(["--speculative-config"]),
  v(["--kv-transfer-config"]),
  v(["--limit-mm-per-prompt"]),
  v(["--mm-processor-kwargs"]),
  v(["--reasoning-parser"]),
  v(["--tool-call-parser"]),
  flag(["--enable-auto-tool-choice"]),
  v(["--response-role"]),
  multi(["--api-key"]),
  v(["--root-path"]),
  v(["--ssl-keyfile"]),
  v(["--ssl-certfile"]),
  v(["--allowed-origins"]),
  v(["--config"]),
  v(["--distributed-timeout-seconds"], "int"),
  v(["--shutdown-timeout"], "int"),
  v(["--runner"]),
  v(["--convert"]),
  v(["--task"]),
];

/**
 * The `python -m sglang.launch_server` flags the fake accepts: every flag
 * llmgw emits or owns (engines/sglang.ts) plus common tuning flags.
 */
export const SGLANG_FLAGS: readonly FlagSpec[] = [
  { ...v(["--model-path", "--model"]), required: true },
  v(["--tokenizer-path"]),
  v(["--tokenizer-mode"]),
  v(["--served-model-name"]),
  v(["--host"]),
  v(["--port"], "int"),
  v(["--tp-size", "--tensor-parallel-size"], "int"),
  v(["--pp-size", "--pipeline-parallel-size"], "int"),
  v(["--dp-size", "--data-parallel-size"], "int"),
  v(["--ep-size", "--expert-parallel-size", "--ep"], "int"),
  v(["--nnodes"], "int"),
  v(["--node-rank"], "int"),
  v(["--dist-init-addr", "--nccl-init-addr"]),
  v(["--dist-timeout"], "int"),
  v(["--nccl-port"], "int"),
  v(["--base-gpu-id"], "int"),
  v(["--gpu-id-step"], "int"),
  v(["--quantization"], "str", [...FAKE_SGLANG_QUANTIZATIONS]),
  v(["--kv-cache-dtype"]),
  v(["--dtype"], "str", DTYPES),
  v(["--context-length"], "int"),
  v(["--mem-fraction-static"], "float"),
  v(["--max-running-requests"], "int"),
  v(["--max-total-tokens"], "int"),
  v(["--chunked-prefill-size"], "int"),
  v(["--max-prefill-tokens"], "int"),
  flag(["--trust-remote-code"]),
  flag(["--enable-metrics"]),
  flag(["--enable-metrics-for-all-schedulers"]),
  flag(["--skip-server-warmup"]),
  v(["--download-dir"]),
  v(["--api-key"]),
  v(["--log-level"]),
  v(["--log-level-http"]),
  flag(["--log-requests"]),
  flag(["--disable-cuda-graph"]),
  v(["--cuda-graph-max-bs"], "int"),
  flag(["--enable-dp-attention"]),
  v(["--load-balance-method"]),
  v(["--attention-backend"]),
  v(["--random-seed"], "int"),
  v(["--schedule-policy"]),
  v(["--chat-template"]),
  v(["--reasoning-parser"]),
  v(["--tool-call-parser"]),
  v(["--revision"]),
  v(["--load-format"]),
  flag(["--enable-torch-compile"]),
  flag(["--disable-radix-cache"]),
  flag(["--disable-overlap-schedule"]),
  flag(["--enable-mixed-chunk"]),
  flag(["--enable-cache-report"]),
  flag(["--disable-custom-all-reduce"]),
  flag(["--is-embedding"]),
  v(["--stream-interval"], "int"),
  v(["--watchdog-timeout"], "float"),
  v(["--decode-log-interval"], "int"),
  v(["--sampling-backend"]),
  v(["--speculative-algorithm"]),
  v(["--json-model-override-args"]),
  v(["--config"]),
];

const VLLM_SERVE_USAGE = "vllm serve [model_tag] [options]";
const VLLM_USAGE = "vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...";
const SGLANG_USAGE = "launch_server.py [-h] --model-path MODEL_PATH [options]";

/** The engine being imitated. */
export type EngineName = "vllm" | "sglang";

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

function str(flags: Map<string, FlagValue>, key: string): string | undefined {
  const x = flags.get(key);
  return typeof x === "string" ? x : undefined;
}

function int(flags: Map<string, FlagValue>, key: string, dflt: number): number {
  const x = str(flags, key);
  return x === undefined ? dflt : Number(x);
}

/** Rejects a configuration the real engine would reject after parsing (exit 1, not 2). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
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
 * "python3 -m sglang.launch_server">`, and for vLLM `VLLM_API_KEY` from `env`.
 * Throws {@link UsageError} (exit 2) or {@link ConfigError} (exit 1).
 */
export function parseCommandLine(
  argv: readonly string[],
  env: (k: string) => string | undefined = envGet,
): Command {
  const [engine, ...rest] = argv;
  if (engine === "vllm") return parseVllm(rest, env);
  if (engine === "sglang") return parseSglang(rest);
  throw new UsageError(
    "fake_engine.ts",
    "fake_engine.ts {vllm,sglang} ARGS... (llmgw test tooling; see testing/README.md)",
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
        `usage: ${VLLM_USAGE}\n\nllmgw FAKE vLLM (testing/fake_engine.ts): only "serve" is imitated.\n`,
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
        `usage: ${VLLM_SERVE_USAGE}\n\nllmgw FAKE vLLM (testing/fake_engine.ts). Accepted flags:\n${
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
  const model = positionals[0] ?? str(values, "--model") ?? "Qwen/Qwen3-0.6B";
  const names = values.get("--served-model-name");
  const maxLen = parseHumanInt(str(values, "--max-model-len") ?? "-1")!;
  const masterAddr = str(values, "--master-addr");
  const apiKeys = vllmApiKeys(values.get("--api-key"), env);
  const config: EngineConfig = {
    engine: "vllm",
    model,
    served_names: Array.isArray(names) ? names : [model],
    host: str(values, "--host") ?? "0.0.0.0",
    port: int(values, "--port", 8000),
    tp: int(values, "--tensor-parallel-size", 1),
    pp: int(values, "--pipeline-parallel-size", 1),
    nnodes: int(values, "--nnodes", 1),
    node_rank: int(values, "--node-rank", 0),
    headless: values.get("--headless") === true,
    quantization: str(values, "--quantization") ?? null,
    max_model_len: maxLen > 0 ? maxLen : DEFAULT_MAX_MODEL_LEN,
    max_running: int(values, "--max-num-seqs", 256),
    metrics: true,
    access_log: values.get("--disable-uvicorn-access-log") !== true,
    api_keys: apiKeys.keys,
    api_key_source: apiKeys.source,
    executor_backend: str(values, "--distributed-executor-backend") ?? null,
    rendezvous: masterAddr === undefined && !values.has("--master-port")
      ? null
      : `${masterAddr ?? "127.0.0.1"}:${int(values, "--master-port", 29501)}`,
    skip_warmup: false,
    flags: values,
  };
  checkTopology(config);
  if (config.max_running < 1) throw new ConfigError("max_num_seqs must be at least 1");
  return { kind: "serve", config };
}

function parseSglang(argv: readonly string[]): Command {
  if (argv.includes("-h") || argv.includes("--help")) {
    return {
      kind: "print",
      text:
        `usage: ${SGLANG_USAGE}\n\nllmgw FAKE SGLang (testing/fake_engine.ts). Accepted flags:\n${
          SGLANG_FLAGS.map((s) => `  ${display(s)}`).join("\n")
        }\n`,
    };
  }
  const { values } = parseFlags(argv, SGLANG_FLAGS, {
    prog: "launch_server.py",
    usage: SGLANG_USAGE,
    extrasProg: "launch_server.py",
    extrasUsage: SGLANG_USAGE,
    allowAbbrev: true,
    underscoresAsDashes: false,
    maxPositionals: 0,
  });
  const model = str(values, "--model-path")!;
  const dist = str(values, "--dist-init-addr");
  const apiKey = str(values, "--api-key") ?? "";
  if (dist !== undefined && !/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d+$/.test(dist)) {
    throw new ConfigError(`--dist-init-addr must be host:port (IPv6 in brackets), got '${dist}'`);
  }
  const config: EngineConfig = {
    engine: "sglang",
    model,
    served_names: [str(values, "--served-model-name") ?? model],
    host: str(values, "--host") ?? "127.0.0.1",
    port: int(values, "--port", 30000),
    tp: int(values, "--tp-size", 1),
    pp: int(values, "--pp-size", 1),
    nnodes: int(values, "--nnodes", 1),
    node_rank: int(values, "--node-rank", 0),
    headless: false,
    quantization: str(values, "--quantization") ?? null,
    max_model_len: int(values, "--context-length", DEFAULT_MAX_MODEL_LEN),
    max_running: int(values, "--max-running-requests", 256),
    metrics: values.get("--enable-metrics") === true,
    access_log: true,
    // SGLang reads no key from its environment; an empty one is none (`if api_key:`).
    api_keys: apiKey === "" ? [] : [apiKey],
    api_key_source: apiKey === "" ? null : "--api-key",
    executor_backend: null,
    rendezvous: dist ?? null,
    skip_warmup: values.get("--skip-server-warmup") === true,
    flags: values,
  };
  checkTopology(config);
  if (config.max_running < 1) throw new ConfigError("max_running_requests must be at least 1");
  return { kind: "serve", config };
}

// ---------------------------------------------------------------------------
// Knobs

/** Behaviour knobs, from `FAKE_ENGINE_*` environment variables. */
export interface Knobs {
  /** FAKE_ENGINE_LOAD_SECONDS (default 2): from start to ready. */
  load_seconds: number;
  /** FAKE_ENGINE_WORKER=1: fork a worker child in the same process group. */
  worker: boolean;
  /** FAKE_ENGINE_CRASH_AFTER_REQUESTS=N: exit 1 after N completed completions. */
  crash_after_requests: number | null;
  /** FAKE_ENGINE_CRASH_AFTER_SECONDS=S: exit 1 with a CUDA error S seconds after start. */
  crash_after_seconds: number | null;
  /** FAKE_ENGINE_NEVER_READY=1: loading never finishes. */
  never_ready: boolean;
  /** FAKE_ENGINE_IGNORE_SIGTERM=1: SIGTERM and SIGINT are logged and ignored (leader and worker). */
  ignore_sigterm: boolean;
  /** FAKE_ENGINE_TOKENS (default 8): tokens per completion (capped by max_tokens). */
  tokens: number;
  /** FAKE_ENGINE_TOKEN_DELAY_MS (default 5): delay before each token. */
  token_delay_ms: number;
  /** FAKE_ENGINE_PROGRESS: `cr` (default; tqdm's `\r` redraws) or `lines` (one line per update). */
  progress: "cr" | "lines";
  /** FAKE_ENGINE_ACCESS_LOG=0 turns off uvicorn-style access lines. */
  access_log: boolean;
  /** FAKE_ENGINE_WORKER_MAX_SECONDS (default 3600): a worker's safety lifetime. */
  worker_max_seconds: number;
  /**
   * FAKE_ENGINE_LEAK_API_KEY=1: the startup log prints the API key as the real
   * engines can (SGLang's `server_args=` line; vLLM's `non-default args` for
   * `--api-key` before it redacted them), to test that llmgw scrubs engine logs.
   */
  leak_api_key: boolean;
}

/** A knob with a bad value. */
export class KnobError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KnobError";
  }
}

/** The version the fake reports: FAKE_ENGINE_VERSION, else 0.11.1 (vLLM) or 0.5.3 (SGLang). */
export function knobVersion(
  engine: EngineName,
  env: (k: string) => string | undefined = envGet,
): string {
  return env("FAKE_ENGINE_VERSION") ?? (engine === "vllm" ? "0.11.1" : "0.5.3");
}

function envGet(key: string): string | undefined {
  return Deno.env.get(key);
}

/** Reads the knobs; throws {@link KnobError} on a value that is not understood. */
export function readKnobs(env: (k: string) => string | undefined = envGet): Knobs {
  const num = (key: string, dflt: number | null, integer: boolean): number | null => {
    const raw = env(key);
    if (raw === undefined || raw.trim() === "") return dflt;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
      throw new KnobError(
        `${key} must be a ${integer ? "whole" : ""} number ≥ 0, got ${JSON.stringify(raw)}`,
      );
    }
    return n;
  };
  const bool = (key: string): boolean => {
    const raw = (env(key) ?? "").trim().toLowerCase();
    if (["", "0", "false", "no", "off"].includes(raw)) return false;
    if (["1", "true", "yes", "on"].includes(raw)) return true;
    throw new KnobError(`${key} must be 1 or 0, got ${JSON.stringify(env(key))}`);
  };
  const progress = env("FAKE_ENGINE_PROGRESS") ?? "cr";
  if (progress !== "cr" && progress !== "lines") {
    throw new KnobError(
      `FAKE_ENGINE_PROGRESS must be cr or lines, got ${JSON.stringify(progress)}`,
    );
  }
  const accessRaw = env("FAKE_ENGINE_ACCESS_LOG");
  return {
    load_seconds: num("FAKE_ENGINE_LOAD_SECONDS", 2, false)!,
    worker: bool("FAKE_ENGINE_WORKER"),
    crash_after_requests: num("FAKE_ENGINE_CRASH_AFTER_REQUESTS", null, true),
    crash_after_seconds: num("FAKE_ENGINE_CRASH_AFTER_SECONDS", null, false),
    never_ready: bool("FAKE_ENGINE_NEVER_READY"),
    ignore_sigterm: bool("FAKE_ENGINE_IGNORE_SIGTERM"),
    tokens: num("FAKE_ENGINE_TOKENS", 8, true)!,
    token_delay_ms: num("FAKE_ENGINE_TOKEN_DELAY_MS", 5, false)!,
    progress,
    access_log: accessRaw === undefined ? true : bool("FAKE_ENGINE_ACCESS_LOG"),
    worker_max_seconds: num("FAKE_ENGINE_WORKER_MAX_SECONDS", 3600, false)!,
    leak_api_key: bool("FAKE_ENGINE_LEAK_API_KEY"),
  };
}

// ---------------------------------------------------------------------------
// Log output

const encoder = new TextEncoder();

function writeAll(file: { writeSync(p: Uint8Array): number }, text: string): void {
  const data = encoder.encode(text);
  let off = 0;
  try {
    while (off < data.length) off += file.writeSync(data.subarray(off));
  } catch {
    // Whoever read our output is gone: losing log lines is better than dying on them.
  }
}

const pad2 = (n: number) => String(n).padStart(2, "0");

/** `MM-DD HH:MM:SS`, vLLM's log time. */
function vllmTime(d = new Date()): string {
  return `${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${
    pad2(d.getMinutes())
  }:${pad2(d.getSeconds())}`;
}

/** `YYYY-MM-DD HH:MM:SS`, SGLang's log time. */
function sglangTime(d = new Date()): string {
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${
    pad2(d.getMinutes())
  }:${pad2(d.getSeconds())}`;
}

/** `mm:ss`, tqdm's elapsed/remaining format. */
function tqdmTime(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return `${pad2(Math.floor(s / 60))}:${pad2(s % 60)}`;
}

/**
 * One tqdm update of the weight-loading bar, with vLLM's and SGLang's
 * `bar_format` ("{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt}
 * [{elapsed}<{remaining}, {rate_fmt}{postfix}]"), e.g.
 * `Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.00s/it]`.
 */
export function progressBar(done: number, total: number, elapsedSeconds: number): string {
  const pct = String(Math.round((100 * done) / total)).padStart(3, " ");
  let tail: string;
  if (done === 0 || elapsedSeconds <= 0) {
    tail = `[${tqdmTime(elapsedSeconds)}<?, ?it/s]`;
  } else {
    const secPerIt = elapsedSeconds / done;
    const rate = secPerIt >= 1
      ? `${secPerIt.toFixed(2).padStart(5, " ")}s/it`
      : `${(1 / secPerIt).toFixed(2).padStart(5, " ")}it/s`;
    tail = `[${tqdmTime(elapsedSeconds)}<${tqdmTime(secPerIt * (total - done))}, ${rate}]`;
  }
  return `Loading safetensors checkpoint shards: ${pct}% Completed | ${done}/${total} ${tail}`;
}

const STATUS_TEXT: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  401: "Unauthorized",
  404: "Not Found",
  405: "Method Not Allowed",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** Engine-styled logging to stdout/stderr, keeping an open tqdm bar from swallowing lines. */
class Logger {
  #barOpen = false;
  constructor(
    private readonly cfg: EngineConfig,
    /** The pid the engine-core/scheduler lines name (the worker's, when there is one). */
    private readonly corePid: number,
    private readonly progressMode: "cr" | "lines",
  ) {}

  #write(stream: "out" | "err", text: string): void {
    if (this.#barOpen) {
      // tqdm would not do this; it keeps other lines from being glued onto a bar.
      writeAll(Deno.stderr, "\n");
      this.#barOpen = false;
    }
    writeAll(stream === "out" ? Deno.stdout : Deno.stderr, text);
  }

  /** The vLLM worker prefix, e.g. `(EngineCore_DP0 pid=123) `. */
  get corePrefix(): string {
    return `(EngineCore_DP0 pid=${this.corePid}) `;
  }

  /** SGLang's scheduler tag, e.g. `TP0`. */
  get tpTag(): string {
    const perNode = (this.cfg.tp * this.cfg.pp) / this.cfg.nnodes;
    return `TP${this.cfg.node_rank * perNode}`;
  }

  /** A line of the API-server process (vLLM: stdout; SGLang: stderr). */
  api(level: string, src: string, msg: string): void {
    if (this.cfg.engine === "vllm") this.#write("out", `${level} ${vllmTime()} [${src}] ${msg}\n`);
    else this.#write("err", `[${sglangTime()}] ${msg}\n`);
  }

  /** A line of the engine core / scheduler process. */
  core(level: string, src: string, msg: string): void {
    if (this.cfg.engine === "vllm") {
      this.#write("out", `${this.corePrefix}${level} ${vllmTime()} [${src}] ${msg}\n`);
    } else {
      this.#write("err", `[${sglangTime()} ${this.tpTag}] ${msg}\n`);
    }
  }

  /** A uvicorn line (`INFO:     Started server process [pid]`), stderr. */
  uvicorn(msg: string): void {
    const prefix = this.cfg.engine === "sglang" ? `[${sglangTime()}] ` : "";
    this.#write("err", `${prefix}INFO:     ${msg}\n`);
  }

  /** A uvicorn access line; vLLM's go to stdout. */
  access(remote: string, method: string, path: string, status: number): void {
    const line = `INFO:     ${remote} - "${method} ${path} HTTP/1.1" ${status} ${
      STATUS_TEXT[status] ?? ""
    }`;
    if (this.cfg.engine === "vllm") this.#write("out", `${line}\n`);
    else this.#write("err", `[${sglangTime()}] ${line}\n`);
  }

  /** A line from the fake itself, marked as such. */
  fake(msg: string): void {
    if (this.cfg.engine === "vllm") this.api("INFO", "fake_engine.ts", msg);
    else this.#write("err", `[${sglangTime()}] [fake_engine.ts] ${msg}\n`);
  }

  /** One tqdm update on stderr. */
  bar(done: number, total: number, elapsedSeconds: number): void {
    const text = progressBar(done, total, elapsedSeconds);
    const prefix = this.cfg.engine === "vllm" ? this.corePrefix : "";
    if (this.progressMode === "lines") {
      this.#write("err", `${prefix}${text}\n`);
      return;
    }
    if (!this.#barOpen) {
      writeAll(Deno.stderr, prefix);
      this.#barOpen = true;
    }
    writeAll(Deno.stderr, `\r${text}`);
    if (done === total) {
      writeAll(Deno.stderr, "\n");
      this.#barOpen = false;
    }
  }
}

// ---------------------------------------------------------------------------
// Request accounting

/** In-flight requests and counters, behind /metrics; who runs and who waits is {@link EngineLoad}'s. */
class Scheduler {
  completed = 0;
  prompt_tokens = 0;
  generation_tokens = 0;
  readonly load: EngineLoad;
  #wake = new Map<number, () => void>();
  /** `pool`: the prefix cache's KV pool, which running requests' blocks must fit; null without one. */
  constructor(readonly max: number, pool: PrefixCacheSettings | null) {
    this.load = new EngineLoad(max, pool);
  }

  get running(): number {
    return this.load.running;
  }

  get waiting(): number {
    return this.load.waiting;
  }

  /** Waits for a slot for a request holding `tokens` (counted as waiting meanwhile); returns its ticket. */
  async acquire(tokens: number): Promise<number> {
    const ticket = this.load.arrive(tokens);
    if (!this.load.isRunning(ticket)) {
      await new Promise<void>((resolve) => this.#wake.set(ticket, resolve));
    }
    return ticket;
  }

  /** Ends a request, handing its slot to the waiters that now fit. */
  release(ticket: number): void {
    for (const next of this.load.finish(ticket)) {
      this.#wake.get(next)!();
      this.#wake.delete(next);
    }
  }
}

// ---------------------------------------------------------------------------
// HTTP

interface Runtime {
  cfg: EngineConfig;
  knobs: Knobs;
  log: Logger;
  sched: Scheduler;
  /** The prefix cache; null when FAKE_ENGINE_PREFIX_CACHE_BLOCKS is unset or 0. */
  cache: PrefixCache | null;
  /** The prefix-cache and TTFT knobs. */
  prefix: PrefixCacheKnobs;
  /** SGLang rank 0: loaded and warm. vLLM: listening implies ready. */
  ready: boolean;
  version: string;
  started_ms: number;
  /** Called after each completed completion. */
  onCompleted: () => void;
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** An OpenAI-style error body. */
function apiError(status: number, type: string, message: string, param: string | null = null) {
  return json(status, { error: { message, type, param, code: status } });
}

const WORDS = [
  "This",
  " is",
  " a",
  " reply",
  " from",
  " the",
  " llmgw",
  " fake",
  " engine",
  ".",
];

function token(i: number): string {
  return WORDS[i % WORDS.length];
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function approxTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map(textOf).join(" ");
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>;
    if (typeof o.text === "string") return o.text;
    if ("content" in o) return textOf(o.content);
  }
  return typeof value === "number" ? "x" : "";
}

/**
 * A request's prefill, once it runs: looks its prompt up in the prefix cache,
 * waits the modelled time to first token, then caches its blocks. With the
 * knobs off it sets no timer, so timing is as before.
 */
/** The prefill: looks the prompt up, waits the TTFT model's time, caches it; returns the cached tokens. */
async function prefill(
  rt: Runtime,
  blocks: PromptBlocks | null,
  promptTokens: number,
): Promise<number> {
  const found = rt.cache === null || blocks === null ? null : rt.cache.lookup(blocks);
  const ms = ttftMs(rt.prefix.ttft, found?.uncachedTokens ?? promptTokens);
  if (ms > 0) await sleep(ms);
  if (rt.cache !== null && blocks !== null) rt.cache.insert(blocks);
  return found?.cachedTokens ?? 0;
}

function hexId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/** Reads a JSON object body, or returns the 400 response to send. */
async function readBody(req: Request): Promise<Record<string, unknown> | Response> {
  let text: string;
  try {
    text = await req.text();
  } catch (e) {
    return apiError(400, "BadRequestError", `could not read the request body: ${e}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    return apiError(
      400,
      "BadRequestError",
      `JSON decode error: ${e instanceof Error ? e.message : e}`,
    );
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return apiError(400, "BadRequestError", "the request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/** The model a request names, or the 404 to send. Absent means the primary name (as vLLM does). */
function checkModel(rt: Runtime, body: Record<string, unknown>): string | Response {
  const model = body.model;
  if (model === undefined || model === null) return rt.cfg.served_names[0];
  if (typeof model !== "string" || !rt.cfg.served_names.includes(model)) {
    return apiError(
      404,
      "NotFoundError",
      `The model \`${typeof model === "string" ? model : JSON.stringify(model)}\` does not exist.`,
      "model",
    );
  }
  return model;
}

/** The most choices (`n`) one request may ask for. */
const MAX_CHOICES = 128;

async function completion(
  rt: Runtime,
  req: Request,
  kind: "chat" | "text",
): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  let promptText: string;
  if (kind === "chat") {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return apiError(
        400,
        "BadRequestError",
        "messages: Field required (a non-empty list)",
        "messages",
      );
    }
    promptText = textOf(body.messages);
  } else {
    const p = body.prompt;
    if (typeof p !== "string" && !Array.isArray(p)) {
      return apiError(400, "BadRequestError", "prompt: Field required (string or list)", "prompt");
    }
    promptText = textOf(p);
  }
  const maxRaw = body.max_completion_tokens ?? body.max_tokens;
  if (
    maxRaw !== undefined && maxRaw !== null &&
    (typeof maxRaw !== "number" || !Number.isInteger(maxRaw) || maxRaw < 1)
  ) {
    return apiError(400, "BadRequestError", "max_tokens must be a positive integer", "max_tokens");
  }
  const nRaw = body.n;
  if (
    nRaw !== undefined && nRaw !== null &&
    (typeof nRaw !== "number" || !Number.isInteger(nRaw) || nRaw < 1 || nRaw > MAX_CHOICES)
  ) {
    return apiError(
      400,
      "BadRequestError",
      `n must be an integer from 1 to ${MAX_CHOICES}, got ${JSON.stringify(nRaw)}`,
      "n",
    );
  }
  // n choices, as vLLM and SGLang generate them: each its own sequence (here the same words).
  const n = typeof nRaw === "number" ? nRaw : 1;
  const max = typeof maxRaw === "number" ? maxRaw : Infinity;
  const count = Math.min(rt.knobs.tokens, max);
  const finish = count < rt.knobs.tokens ? "length" : "stop";
  const promptTokens = approxTokens(promptText);
  // Token ids are cached as ids; anything else as the text the fake reads.
  const ids = kind === "text" && Array.isArray(body.prompt) && body.prompt.length > 0 &&
      body.prompt.every((x) => Number.isSafeInteger(x))
    ? body.prompt as number[]
    : null;
  const blocks = rt.cache === null ? null : promptBlocks(ids ?? promptText, rt.cache.blockTokens);
  // What the request holds in the KV cache while it runs: its prompt and every choice's output.
  const held = promptTokens + count * n;
  const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${hexId()}`;
  const created = Math.floor(Date.now() / 1000);
  // With the prefix cache on, the cached part is reported as vLLM does
  // (`--enable-prompt-tokens-details`): usage.prompt_tokens_details.cached_tokens.
  const usage: {
    prompt_tokens: number;
    total_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens: number };
  } = {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + count * n,
    completion_tokens: count * n,
  };
  const cachedUsage = (cached: number) => {
    if (rt.cache !== null) usage.prompt_tokens_details = { cached_tokens: cached };
  };
  const stream = body.stream === true;
  const includeUsage = stream &&
    (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;

  // Not req.signal: Deno.serve aborts it on successful responses too. A
  // streaming client that goes away cancels the body stream instead.
  let cancelled = false;
  const finished = () => {
    rt.sched.completed++;
    rt.sched.prompt_tokens += promptTokens;
    rt.onCompleted();
  };

  if (!stream) {
    const ticket = await rt.sched.acquire(held);
    let text = "";
    try {
      cachedUsage(await prefill(rt, blocks, promptTokens));
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        text += token(i);
        rt.sched.generation_tokens += n;
      }
    } finally {
      rt.sched.release(ticket);
    }
    const choice = (index: number) =>
      kind === "chat"
        ? {
          index,
          message: { role: "assistant", content: text, tool_calls: [] },
          logprobs: null,
          finish_reason: finish,
          stop_reason: null,
        }
        : { index, text, logprobs: null, finish_reason: finish, stop_reason: null };
    finished();
    return json(200, {
      id,
      object: kind === "chat" ? "chat.completion" : "text_completion",
      created,
      model,
      choices: Array.from({ length: n }, (_, index) => choice(index)),
      usage,
    });
  }

  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const chunk = (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}) =>
    encoder.encode(
      `data: ${
        JSON.stringify({
          id,
          object,
          created,
          model,
          choices: choice === null ? [] : [choice],
          ...extra,
        })
      }\n\n`,
    );
  const body$ = new ReadableStream<Uint8Array>({
    start(controller) {
      const run = async () => {
        const ticket = await rt.sched.acquire(held);
        try {
          // The role chunk, like every chunk, comes after the prefill.
          cachedUsage(await prefill(rt, blocks, promptTokens));
          if (cancelled) return;
          // One chunk per choice and step, each naming its choice's index.
          if (kind === "chat") {
            for (let index = 0; index < n; index++) {
              controller.enqueue(
                chunk({
                  index,
                  delta: { role: "assistant", content: "" },
                  logprobs: null,
                  finish_reason: null,
                }),
              );
            }
          }
          for (let i = 0; i < count; i++) {
            await sleep(rt.knobs.token_delay_ms);
            if (cancelled) return;
            rt.sched.generation_tokens += n;
            for (let index = 0; index < n; index++) {
              controller.enqueue(
                chunk(
                  kind === "chat"
                    ? { index, delta: { content: token(i) }, logprobs: null, finish_reason: null }
                    : { index, text: token(i), logprobs: null, finish_reason: null },
                ),
              );
            }
          }
          for (let index = 0; index < n; index++) {
            controller.enqueue(
              chunk(
                kind === "chat"
                  ? { index, delta: {}, logprobs: null, finish_reason: finish, stop_reason: null }
                  : { index, text: "", logprobs: null, finish_reason: finish, stop_reason: null },
              ),
            );
          }
          if (includeUsage) controller.enqueue(chunk(null, { usage }));
          controller.enqueue(encoder.encode("data: [DONE]\n\n"));
          controller.close();
          finished();
        } catch {
          // The client went away (enqueue on a cancelled stream).
        } finally {
          rt.sched.release(ticket);
        }
      };
      void run();
    },
    cancel() {
      cancelled = true;
    },
  });
  return new Response(body$, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    },
  });
}

/**
 * `POST /v1/responses` of vLLM (the fake SGLang does not serve it): one
 * assistant message of `output_text`, usage in input/output tokens, and with
 * `stream: true` the `response.*` SSE events (each with `event:` and
 * `data:` lines and no `[DONE]`, as vLLM and OpenAI send them).
 */
async function responses(rt: Runtime, req: Request): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  const input = body.input;
  if (typeof input !== "string" && !(Array.isArray(input) && input.length > 0)) {
    return apiError(
      400,
      "BadRequestError",
      "input: Field required (a string or a non-empty list of input items)",
      "input",
    );
  }
  const instructions = body.instructions ?? null;
  if (instructions !== null && typeof instructions !== "string") {
    return apiError(400, "BadRequestError", "instructions must be a string", "instructions");
  }
  const maxRaw = body.max_output_tokens ?? null;
  if (
    maxRaw !== null && (typeof maxRaw !== "number" || !Number.isInteger(maxRaw) || maxRaw < 1)
  ) {
    return apiError(
      400,
      "BadRequestError",
      "max_output_tokens must be a positive integer",
      "max_output_tokens",
    );
  }
  const count = Math.min(rt.knobs.tokens, maxRaw ?? Infinity);
  const status = count < rt.knobs.tokens ? "incomplete" : "completed";
  const inputTokens = approxTokens(textOf(input)) +
    (instructions === null ? 0 : approxTokens(instructions));
  const blocks = rt.cache === null ? null : promptBlocks(
    instructions === null ? textOf(input) : `${instructions} ${textOf(input)}`,
    rt.cache.blockTokens,
  );
  const held = inputTokens + count;
  const id = `resp_${hexId()}`;
  const itemId = `msg_${hexId()}`;
  const createdAt = Math.floor(Date.now() / 1000);
  const usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: count,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + count,
  };
  const part = (text: string) => ({ type: "output_text", text, annotations: [] });
  const message = (text: string | null, itemStatus: string) => ({
    type: "message",
    id: itemId,
    status: itemStatus,
    role: "assistant",
    content: text === null ? [] : [part(text)],
  });
  const response = (
    state: string,
    output: unknown[],
    used: typeof usage | null,
  ) => ({
    id,
    object: "response",
    created_at: createdAt,
    model,
    status: state,
    incomplete_details: state === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions,
    max_output_tokens: maxRaw,
    output,
    parallel_tool_calls: true,
    temperature: null,
    top_p: null,
    tool_choice: "auto",
    tools: [],
    text: { format: { type: "text" } },
    error: null,
    metadata: {},
    usage: used,
  });
  const finished = () => {
    rt.sched.completed++;
    rt.sched.prompt_tokens += inputTokens;
    rt.onCompleted();
  };

  if (body.stream !== true) {
    const ticket = await rt.sched.acquire(held);
    let text = "";
    try {
      usage.input_tokens_details.cached_tokens = await prefill(rt, blocks, inputTokens);
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        text += token(i);
        rt.sched.generation_tokens++;
      }
    } finally {
      rt.sched.release(ticket);
    }
    finished();
    return json(200, response(status, [message(text, status)], usage));
  }

  let cancelled = false;
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) =>
    encoder.encode(
      `event: ${type}\ndata: ${
        JSON.stringify({ type, sequence_number: sequence++, ...fields })
      }\n\n`,
    );
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const run = async () => {
        const ticket = await rt.sched.acquire(held);
        try {
          usage.input_tokens_details.cached_tokens = await prefill(rt, blocks, inputTokens);
          if (cancelled) return;
          controller.enqueue(
            event("response.created", { response: response("in_progress", [], null) }),
          );
          controller.enqueue(
            event("response.in_progress", { response: response("in_progress", [], null) }),
          );
          controller.enqueue(
            event("response.output_item.added", {
              output_index: 0,
              item: message(null, "in_progress"),
            }),
          );
          controller.enqueue(event("response.content_part.added", { ...at, part: part("") }));
          let text = "";
          for (let i = 0; i < count; i++) {
            await sleep(rt.knobs.token_delay_ms);
            if (cancelled) return;
            rt.sched.generation_tokens++;
            text += token(i);
            controller.enqueue(
              event("response.output_text.delta", { ...at, delta: token(i), logprobs: [] }),
            );
          }
          controller.enqueue(event("response.output_text.done", { ...at, text, logprobs: [] }));
          controller.enqueue(event("response.content_part.done", { ...at, part: part(text) }));
          controller.enqueue(
            event("response.output_item.done", { output_index: 0, item: message(text, status) }),
          );
          controller.enqueue(
            event(`response.${status}`, {
              response: response(status, [message(text, status)], usage),
            }),
          );
          controller.close();
          finished();
        } catch {
          // The client went away (enqueue on a cancelled stream).
        } finally {
          rt.sched.release(ticket);
        }
      };
      void run();
    },
    cancel() {
      cancelled = true;
    },
  });
  return new Response(stream, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    },
  });
}

/** A deterministic unit vector of 8 floats for a text. */
export function fakeEmbedding(text: string): number[] {
  // FNV-1a, then a xorshift stream.
  let h = 0x811c9dc5;
  for (const b of encoder.encode(text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  const out: number[] = [];
  let x = h || 1;
  for (let i = 0; i < 8; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push((x / 0xffffffff) * 2 - 1);
  }
  const norm = Math.hypot(...out) || 1;
  return out.map((n) => Math.round((n / norm) * 1e6) / 1e6);
}

async function embeddings(rt: Runtime, req: Request): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  const input = body.input;
  let items: string[];
  if (typeof input === "string") items = [input];
  else if (Array.isArray(input) && input.length > 0) {
    items = input.every((x) => typeof x === "number")
      ? [input.join(" ")]
      : input.map((x) => (typeof x === "string" ? x : Array.isArray(x) ? x.join(" ") : ""));
  } else {
    return apiError(400, "BadRequestError", "input: Field required (string or list)", "input");
  }
  const base64 = body.encoding_format === "base64";
  let tokens = 0;
  const data = items.map((text, index) => {
    tokens += approxTokens(text);
    const vec = fakeEmbedding(text);
    const embedding = base64
      ? btoa(String.fromCharCode(...new Uint8Array(new Float32Array(vec).buffer)))
      : vec;
    return { object: "embedding", index, embedding };
  });
  return json(200, {
    id: `embd-${hexId()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  });
}

function modelList(rt: Runtime): Response {
  const created = Math.floor(rt.started_ms / 1000);
  return json(200, {
    object: "list",
    data: rt.cfg.served_names.map((id) => ({
      id,
      object: "model",
      created,
      owned_by: rt.cfg.engine,
      root: rt.cfg.model,
      parent: null,
      max_model_len: rt.cfg.max_model_len,
    })),
  });
}

/** Live counts behind /metrics. */
export interface MetricCounts {
  /** Requests running. */
  running: number;
  /** Requests waiting for a slot. */
  waiting: number;
  /** Slots. */
  max: number;
  /** Completions finished. */
  completed: number;
  /** Prompt tokens seen. */
  prompt_tokens: number;
  /** Tokens generated. */
  generation_tokens: number;
  /** The load and prefix-cache state; without it, KV usage is running / max and no cache is shown. */
  load?: LoadState;
}

/** Prometheus text with the engine's metric names, from the live request counts. */
export function metricsText(
  engine: EngineName,
  version: string,
  modelName: string,
  s: MetricCounts,
): string {
  const load: LoadState = s.load ?? {
    running: s.running,
    waiting: s.waiting,
    kvUsage: Math.min(1, s.running / s.max),
    usedTokens: s.running * 64,
    cache: null,
  };
  const m = promLabel(modelName);
  // [name, type, help, value]; null values are left out.
  const rows: MetricRow[] = engine === "vllm"
    ? [
      [
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens,
      ],
      [
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens,
      ],
      [
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        s.completed,
      ],
    ]
    : [
      ["sglang:gen_throughput", "gauge", "The generation throughput (token/s).", 0],
      [
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens,
      ],
      [
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens,
      ],
    ];
  const labels = engine === "vllm" ? `engine="0",model_name="${m}"` : `model_name="${m}"`;
  return loadMetricsText(engine, version, modelName, load) + metricFamilies(rows, labels);
}

function metricsResponse(rt: Runtime): Response {
  return new Response(
    metricsText(rt.cfg.engine, rt.version, rt.cfg.served_names[0], {
      running: rt.sched.running,
      waiting: rt.sched.waiting,
      max: rt.sched.max,
      completed: rt.sched.completed,
      prompt_tokens: rt.sched.prompt_tokens,
      generation_tokens: rt.sched.generation_tokens,
      load: loadState(rt.sched.load, rt.cache),
    }),
    { status: 200, headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } },
  );
}

/**
 * Path prefixes vLLM's `AuthenticationMiddleware` checks, as `str.startswith`
 * (`GUARDED_PREFIX`, vllm/entrypoints/serve/middleware/authenticate.py;
 * engine reference §6.1). Everything else (`/health`, `/metrics`, `/ping`,
 * `/version`, `/invocations`, `/tokenize`, …) is open.
 */
export const VLLM_GUARDED_PREFIXES: readonly string[] = ["/v1", "/v2", "/inference", "/cohere"];

/**
 * Path prefixes SGLang's API-key middleware leaves open
 * (`decide_request_auth`, python/sglang/srt/utils/auth.py; engine reference
 * §6.2); it checks everything else, `/v1/models` included.
 */
export const SGLANG_OPEN_PREFIXES: readonly string[] = ["/health", "/ready", "/metrics"];

/** Equal strings, compared in time that depends on the length only (as the engines do). */
function sameSecret(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  }
  return diff === 0;
}

/** The credential of `Authorization: <scheme> <credential>` when the scheme is Bearer (any case). */
function bearer(headers: Headers): string | null {
  const value = headers.get("authorization");
  if (value === null) return null;
  const space = value.indexOf(" ");
  // Python's partition/split at the first space: "Bearer  k" presents " k".
  if (space < 0 || value.slice(0, space).toLowerCase() !== "bearer") return null;
  return value.slice(space + 1);
}

/**
 * Whether a request passes the engine's API-key check (engine reference
 * §6): always when there are no keys or for `OPTIONS` (CORS preflight).
 * vLLM checks only {@link VLLM_GUARDED_PREFIXES} and takes
 * `Authorization: Bearer KEY` with any of its keys; SGLang checks all but
 * {@link SGLANG_OPEN_PREFIXES} and also takes `x-api-key: KEY`. `path` is
 * the decoded path, as the engines' ASGI servers see it.
 */
export function apiKeyAllows(
  engine: EngineName,
  keys: readonly string[],
  method: string,
  path: string,
  headers: Headers,
): boolean {
  if (keys.length === 0 || method === "OPTIONS") return true;
  const presented = bearer(headers);
  if (engine === "vllm") {
    if (!VLLM_GUARDED_PREFIXES.some((p) => path.startsWith(p))) return true;
    // Every key is compared, so the time taken does not say which one matched.
    let ok = false;
    for (const k of keys) ok = sameSecret(presented ?? "", k) || ok;
    return ok;
  }
  if (SGLANG_OPEN_PREFIXES.some((p) => path.startsWith(p))) return true;
  const xApiKey = headers.get("x-api-key");
  return (presented !== null && sameSecret(presented, keys[0])) ||
    (xApiKey !== null && xApiKey !== "" && sameSecret(xApiKey, keys[0]));
}

/** The percent-decoded path (what an ASGI app's `scope["path"]` holds); the raw one when malformed. */
function decodedPath(pathname: string): string {
  try {
    return decodeURIComponent(pathname);
  } catch {
    return pathname;
  }
}

/** What vLLM and SGLang answer a request their API-key check refuses. */
const UNAUTHORIZED = () => json(401, { error: "Unauthorized" });

const NOT_FOUND = () => json(404, { detail: "Not Found" });
const NOT_ALLOWED = () => json(405, { detail: "Method Not Allowed" });

type Route = (rt: Runtime, req: Request) => Response | Promise<Response>;

/** The routes of the main API server, by path, then method. */
function mainRoutes(engine: EngineName): Map<string, Map<string, Route>> {
  const r = new Map<string, Map<string, Route>>();
  const add = (method: string, path: string, route: Route) => {
    if (!r.has(path)) r.set(path, new Map());
    r.get(path)!.set(method, route);
  };
  const notReady = (rt: Runtime) =>
    rt.cfg.engine === "sglang" && !rt.ready
      ? apiError(
        503,
        "ServiceUnavailableError",
        "The server is not ready yet (loading or warming up).",
      )
      : null;
  if (engine === "vllm") {
    add("GET", "/health", () => new Response(null, { status: 200 }));
    add("GET", "/ping", () => new Response(null, { status: 200 }));
    add("POST", "/ping", () => new Response(null, { status: 200 }));
    add("GET", "/version", (rt) => json(200, { version: rt.version }));
  } else {
    const health = (rt: Runtime) => new Response(null, { status: rt.ready ? 200 : 503 });
    add("GET", "/health", health);
    add("GET", "/health_generate", health);
    add("GET", "/get_model_info", (rt) =>
      json(200, {
        model_path: rt.cfg.model,
        tokenizer_path: rt.cfg.model,
        is_generation: true,
        served_model_name: rt.cfg.served_names[0],
      }));
  }
  add("GET", "/v1/models", (rt) => modelList(rt));
  add("POST", "/v1/chat/completions", (rt, req) => notReady(rt) ?? completion(rt, req, "chat"));
  add("POST", "/v1/completions", (rt, req) => notReady(rt) ?? completion(rt, req, "text"));
  add("POST", "/v1/embeddings", (rt, req) => notReady(rt) ?? embeddings(rt, req));
  // vLLM serves it (engine reference §6.1); the fake SGLang answers FastAPI's 404
  // there, so gateways are tested against an engine without the Responses API.
  if (engine === "vllm") add("POST", "/v1/responses", (rt, req) => responses(rt, req));
  add("GET", "/metrics", (rt) => rt.cfg.metrics ? metricsResponse(rt) : NOT_FOUND());
  return r;
}

/** SGLang ranks ≥ 1: the dummy health server (engine reference §2.2). */
function dummyRoutes(): Map<string, Map<string, Route>> {
  const ok = () => new Response(null, { status: 200 });
  return new Map([
    ["/health", new Map([["GET", ok]])],
    ["/health_generate", new Map([["GET", ok]])],
    ["/ping", new Map([["GET", ok]])],
    [
      "/metrics",
      new Map([["GET", (rt: Runtime) => rt.cfg.metrics ? metricsResponse(rt) : NOT_FOUND()]]),
    ],
  ]);
}

/**
 * Serves `routes`; `keys` are the API keys checked before routing, as the
 * engines' middleware does, so an unknown path under a guarded prefix is 401
 * too (empty: no check, as on SGLang's dummy health server).
 */
function handler(rt: Runtime, routes: Map<string, Map<string, Route>>, keys: readonly string[]) {
  return async (req: Request, info: Deno.ServeHandlerInfo): Promise<Response> => {
    const url = new URL(req.url);
    const methods = routes.get(url.pathname);
    let res: Response;
    if (!apiKeyAllows(rt.cfg.engine, keys, req.method, decodedPath(url.pathname), req.headers)) {
      res = UNAUTHORIZED();
    } else if (methods === undefined) res = NOT_FOUND();
    else {
      const route = methods.get(req.method) ??
        (req.method === "HEAD" ? methods.get("GET") : undefined);
      if (route === undefined) res = NOT_ALLOWED();
      else {
        try {
          res = await route(rt, req);
        } catch (e) {
          res = apiError(
            500,
            "InternalServerError",
            `fake engine: ${e instanceof Error ? e.message : e}`,
          );
        }
      }
    }
    if (rt.cfg.access_log && rt.knobs.access_log) {
      const a = info.remoteAddr as Deno.NetAddr;
      rt.log.access(`${a.hostname}:${a.port}`, req.method, url.pathname + url.search, res.status);
    }
    return res;
  };
}

// ---------------------------------------------------------------------------
// Lifecycle

/** Exits with the engine's CUDA-error crash output. */
function crash(rt: { cfg: EngineConfig; log: Logger }, why: string): never {
  const { cfg, log } = rt;
  const cuda = "RuntimeError: CUDA error: an illegal memory access was encountered";
  if (cfg.engine === "vllm") {
    log.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.");
    log.core("ERROR", "core.py:710", "Traceback (most recent call last):");
    log.core(
      "ERROR",
      "core.py:710",
      '  File "vllm/v1/engine/core.py", line 701, in run_engine_core',
    );
    log.core("ERROR", "core.py:710", cuda);
    log.core(
      "ERROR",
      "core.py:710",
      "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    );
    log.api("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.");
    log.api(
      "ERROR",
      "async_llm.py:480",
      "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    );
  } else {
    log.core(
      "ERROR",
      "scheduler.py",
      "Scheduler hit an exception: Traceback (most recent call last):",
    );
    log.core(
      "ERROR",
      "scheduler.py",
      '  File "sglang/srt/managers/scheduler.py", line 2700, in run_scheduler_process',
    );
    log.core("ERROR", "scheduler.py", cuda);
    log.api(
      "ERROR",
      "",
      "Received sigquit from a child process. It usually means the child failed.",
    );
  }
  log.fake(`exiting with code 1 (${why})`);
  Deno.exit(1);
}

function spawnWorker(cfg: EngineConfig): Deno.ChildProcess {
  // Same process group (no detached), stdout/stderr inherited: like vLLM's
  // EngineCore it holds the log pipe open for as long as it lives.
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      "--no-config",
      import.meta.filename ?? new URL(import.meta.url).pathname,
      "--worker",
      cfg.engine,
      String(Deno.pid),
    ],
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
}

/** The worker child: stays alive (even when its parent is SIGKILLed) until signalled. */
function runWorker(args: string[]): void {
  const engine = args[0] === "sglang" ? "sglang" : "vllm";
  const leader = args[1] ?? "?";
  const knobs = readKnobs();
  const name = engine === "vllm" ? `VLLM::EngineCore` : `sglang::scheduler_TP0`;
  const line = (msg: string) => {
    const text = engine === "vllm"
      ? `(EngineCore_DP0 pid=${Deno.pid}) INFO ${vllmTime()} [fake_engine.ts] ${msg}\n`
      : `[${sglangTime()} TP0] [fake_engine.ts] ${msg}\n`;
    writeAll(engine === "vllm" ? Deno.stdout : Deno.stderr, text);
  };
  line(`fake ${name} worker started (leader pid ${leader}); it does not watch its parent`);
  const onSignal = (sig: Deno.Signal) => {
    if (knobs.ignore_sigterm) {
      line(`fake worker ignoring ${sig} (FAKE_ENGINE_IGNORE_SIGTERM=1)`);
      return;
    }
    line(`fake worker shutting down on ${sig}`);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => onSignal("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => onSignal("SIGINT"));
  setTimeout(() => {
    line(`fake worker exiting after FAKE_ENGINE_WORKER_MAX_SECONDS=${knobs.worker_max_seconds}`);
    Deno.exit(0);
  }, knobs.worker_max_seconds * 1000);
}

function pyRepr(value: unknown): string {
  if (typeof value === "string") {
    return `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  }
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  return "None";
}

/**
 * vLLM's `non-default args` dict. Flags in `redact` show `'***'`, as vLLM's
 * `redact_sensitive_args` prints `api_key` (engine reference §6.1).
 */
function flagDict(
  flags: Map<string, FlagValue>,
  extra: [string, unknown][] = [],
  redact: ReadonlySet<string> = new Set(),
): string {
  const entries: [string, unknown][] = [...extra];
  for (const [k, val] of flags) {
    const key = k.replace(/^-+/, "").replaceAll("-", "_");
    if (redact.has(k)) {
      entries.push([key, "***"]);
      continue;
    }
    const spec = [...VLLM_FLAGS, ...SGLANG_FLAGS].find((s) => s.names[0] === k);
    const typed = typeof val === "string" && (spec?.type === "int" || spec?.type === "float")
      ? Number(val)
      : val;
    entries.push([key, typed]);
  }
  return `{${entries.map(([k, x]) => `'${k}': ${pyRepr(x)}`).join(", ")}}`;
}

/** `text` with every API key in it replaced by `***`. */
function redactKeys(text: string, keys: readonly string[]): string {
  return keys.reduce((t, k) => t.replaceAll(k, "***"), text);
}

/** The GPU, NCCL and engine variables, for the fake's own startup line; keys show as `***`. */
function gpuEnvSummary(apiKeys: readonly string[]): string {
  const env = Deno.env.toObject();
  const names = Object.keys(env)
    .filter((k) => /^(CUDA_|NCCL_|GLOO_|VLLM_|SGLANG_|RAY_ADDRESS$)/.test(k))
    .sort();
  if (names.length === 0) return "(none)";
  return names.map((k) =>
    k === "VLLM_API_KEY" && env[k] !== "" ? `${k}=***` : `${k}=${redactKeys(env[k], apiKeys)}`
  ).join(" ");
}

/** GPUs this node needs, checked against CUDA_VISIBLE_DEVICES when that is set. */
function checkVisibleGpus(cfg: EngineConfig): string | null {
  const cvd = Deno.env.get("CUDA_VISIBLE_DEVICES");
  if (cvd === undefined) return null;
  const visible = cvd.split(",").map((s) => s.trim()).filter((s) => s !== "" && s !== "-1").length;
  const needed = (cfg.tp * cfg.pp) / cfg.nnodes;
  if (visible >= needed) return null;
  return `this node needs ${needed} GPU(s) (tp ${cfg.tp} × pp ${cfg.pp} / nnodes ${cfg.nnodes}) but CUDA_VISIBLE_DEVICES=${
    JSON.stringify(cvd)
  } makes ${visible} visible`;
}

/** Loading: tqdm bar (when shown) over 70% of the load time, then the rest; never returns when never_ready. */
async function load(rt: Runtime, showBar: boolean, fraction: number): Promise<void> {
  const total = 4;
  const ms = rt.knobs.load_seconds * 1000 * fraction;
  const t0 = performance.now();
  const elapsed = () => (performance.now() - t0) / 1000;
  const isVllm = rt.cfg.engine === "vllm";
  if (isVllm) {
    rt.log.core("INFO", "gpu_model_runner.py:2338", `Starting to load model ${rt.cfg.model}...`);
  } else {
    rt.log.core("INFO", "", "Load weight begin. avail mem=78.50 GB");
  }
  if (showBar) rt.log.bar(0, total, 0);
  if (rt.knobs.never_ready) {
    rt.log.fake("FAKE_ENGINE_NEVER_READY=1: loading will never finish");
    await new Promise<never>(() => {});
  }
  for (let i = 1; i <= total; i++) {
    await sleep((ms * 0.7) / total);
    if (showBar) rt.log.bar(i, total, elapsed());
  }
  const weightSecs = elapsed().toFixed(2);
  if (isVllm) {
    rt.log.core("INFO", "default_loader.py:267", `Loading weights took ${weightSecs} seconds`);
    rt.log.core(
      "INFO",
      "gpu_model_runner.py:2370",
      `Model loading took 14.99 GiB and ${weightSecs} seconds`,
    );
    await sleep(ms * 0.15);
    rt.log.core("INFO", "gpu_worker.py:298", "Available KV cache memory: 48.00 GiB");
    rt.log.core("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 393,216 tokens");
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "gpu_model_runner.py:3480",
      "Graph capturing finished in 1 secs, took 0.50 GiB",
    );
    rt.log.core(
      "INFO",
      "core.py:218",
      `init engine (profile, create kv cache, warmup model) took ${elapsed().toFixed(2)} seconds`,
    );
  } else {
    rt.log.core(
      "INFO",
      "",
      "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.50 GB, mem usage=15.00 GB.",
    );
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "",
      "KV Cache is allocated. #tokens: 393216, K size: 24.00 GB, V size: 24.00 GB",
    );
    rt.log.core(
      "INFO",
      "",
      "Capture cuda graph begin. This can take up to several minutes. avail mem=14.00 GB",
    );
    await sleep(ms * 0.15);
    rt.log.core(
      "INFO",
      "",
      "Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.50 GB. avail mem=13.50 GB.",
    );
    rt.log.core(
      "INFO",
      "",
      `max_total_num_tokens=393216, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=${rt.cfg.max_running}, context_len=${rt.cfg.max_model_len}, available_gpu_mem=13.50 GB`,
    );
  }
}

function listen(
  rt: Runtime,
  routes: Map<string, Map<string, Route>>,
  keys: readonly string[],
  onListen: () => void,
): void {
  try {
    Deno.serve({
      hostname: rt.cfg.host,
      port: rt.cfg.port,
      onListen,
      onError: (e) =>
        apiError(500, "InternalServerError", `fake engine: ${e instanceof Error ? e.message : e}`),
    }, handler(rt, routes, keys));
  } catch (e) {
    const msg = e instanceof Deno.errors.AddrInUse
      ? `OSError: [Errno 98] error while attempting to bind on address ('${rt.cfg.host}', ${rt.cfg.port}): address already in use`
      : `OSError: cannot listen on ${rt.cfg.host}:${rt.cfg.port}: ${
        e instanceof Error ? e.message : e
      }`;
    rt.log.api("ERROR", "launcher.py:80", msg);
    rt.log.fake("exiting with code 1 (cannot listen)");
    Deno.exit(1);
  }
}

async function serve(cfg: EngineConfig, knobs: Knobs, prefix: PrefixCacheKnobs): Promise<void> {
  const started = Date.now();
  // Signal listeners and a pending promise do not keep Deno alive on their own.
  setInterval(() => {}, 1 << 30);
  const worker = knobs.worker ? spawnWorker(cfg) : null;
  const log = new Logger(cfg, worker?.pid ?? Deno.pid, knobs.progress);
  const version = knobVersion(cfg.engine);
  const sched = new Scheduler(cfg.max_running, prefix.cache);
  const rt: Runtime = {
    cfg,
    knobs,
    log,
    sched,
    cache: prefix.cache === null ? null : new PrefixCache(prefix.cache),
    prefix,
    ready: false,
    version,
    started_ms: started,
    onCompleted: () => {
      if (knobs.crash_after_requests !== null && sched.completed >= knobs.crash_after_requests) {
        // Let the response that completed it reach the client first.
        setTimeout(
          () => crash(rt, `FAKE_ENGINE_CRASH_AFTER_REQUESTS=${knobs.crash_after_requests}`),
          200,
        );
      }
    },
  };

  let stopping = false;
  const onSignal = (sig: Deno.Signal) => {
    if (knobs.ignore_sigterm) {
      log.fake(`ignoring ${sig} (FAKE_ENGINE_IGNORE_SIGTERM=1)`);
      return;
    }
    if (stopping) return;
    stopping = true;
    if (cfg.engine === "vllm") {
      log.api("INFO", "launcher.py:101", "Shutting down FastAPI HTTP server.");
    } else {
      log.api("INFO", "", `Received ${sig}. Shutting down.`);
    }
    log.uvicorn("Shutting down");
    log.uvicorn("Finished server process [" + Deno.pid + "]");
    if (worker !== null) {
      try {
        Deno.kill(worker.pid, "SIGTERM");
      } catch {
        // Already gone.
      }
    }
    log.fake(`exiting with code 0 after ${sig}`);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => onSignal("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => onSignal("SIGINT"));
  if (knobs.crash_after_seconds !== null) {
    setTimeout(
      () => crash(rt, `FAKE_ENGINE_CRASH_AFTER_SECONDS=${knobs.crash_after_seconds}`),
      knobs.crash_after_seconds * 1000,
    );
  }

  const role = cfg.engine === "vllm"
    ? (cfg.headless || cfg.node_rank > 0
      ? `headless rank ${cfg.node_rank}`
      : `rank ${cfg.node_rank} (API server)`)
    : (cfg.node_rank > 0 ? `rank ${cfg.node_rank} (dummy health server)` : "rank 0 (API server)");
  log.fake(
    `llmgw FAKE ENGINE standing in for ${cfg.engine} ${version}, ${role}; no GPU is used (testing/fake_engine.ts)`,
  );
  log.fake(`argv: ${redactKeys(Deno.args.join(" "), cfg.api_keys)}`);
  log.fake(`GPU/NCCL environment: ${gpuEnvSummary(cfg.api_keys)}`);
  if (cfg.api_key_source !== null) {
    const guarded = cfg.engine === "vllm"
      ? `paths starting with ${VLLM_GUARDED_PREFIXES.join(", ")}`
      : `every path but those starting with ${SGLANG_OPEN_PREFIXES.join(", ")}`;
    log.fake(
      `API key required (${cfg.api_keys.length} from ${cfg.api_key_source}) on ${guarded}`,
    );
  }
  if (worker !== null) log.fake(`worker pid ${worker.pid} (same process group)`);

  const gpuProblem = checkVisibleGpus(cfg);
  const isVllm = cfg.engine === "vllm";
  if (isVllm) {
    log.api("INFO", "api_server.py:1896", `vLLM API server version ${version}`);
    log.api(
      "INFO",
      "utils.py:328",
      `non-default args: ${
        flagDict(
          cfg.flags,
          [["model_tag", cfg.model]],
          new Set(knobs.leak_api_key ? [] : ["--api-key"]),
        )
      }`,
    );
    if (cfg.executor_backend === "ray") {
      log.fake("--distributed-executor-backend ray: no Ray cluster is contacted");
    }
    log.core(
      "INFO",
      "core.py:93",
      `Initializing a V1 LLM engine (v${version}) with config: model='${cfg.model}', served_model_name=${
        cfg.served_names[0]
      }, tensor_parallel_size=${cfg.tp}, pipeline_parallel_size=${cfg.pp}, quantization=${
        cfg.quantization ?? "None"
      }, max_seq_len=${cfg.max_model_len}`,
    );
    if (cfg.nnodes > 1) {
      log.core(
        "INFO",
        "multiproc_executor.py:720",
        `nnodes=${cfg.nnodes} node_rank=${cfg.node_rank} master=${
          cfg.rendezvous ?? "127.0.0.1:29501"
        }`,
      );
    }
  } else {
    log.api(
      "INFO",
      "",
      `server_args=ServerArgs(model_path='${cfg.model}', served_model_name='${
        cfg.served_names[0]
      }', host='${cfg.host}', port=${cfg.port}, tp_size=${cfg.tp}, pp_size=${cfg.pp}, nnodes=${cfg.nnodes}, node_rank=${cfg.node_rank}, dist_init_addr=${
        cfg.rendezvous === null ? "None" : `'${cfg.rendezvous}'`
      }, quantization=${
        cfg.quantization === null ? "None" : `'${cfg.quantization}'`
      }, enable_metrics=${cfg.metrics ? "True" : "False"}${
        // Real SGLang prints the key here; the fake only when asked to.
        knobs.leak_api_key && cfg.api_keys.length > 0 ? `, api_key='${cfg.api_keys[0]}'` : ""})`,
    );
  }
  if (gpuProblem !== null) {
    if (isVllm) log.core("ERROR", "core.py:710", `ValueError: ${gpuProblem}`);
    else log.core("ERROR", "", `ValueError: ${gpuProblem}`);
    log.fake("exiting with code 1 (not enough visible GPUs)");
    Deno.exit(1);
  }

  const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${cfg.port}`;
  const uvicornUp = () => {
    log.uvicorn(`Started server process [${Deno.pid}]`);
    log.uvicorn("Waiting for application startup.");
    log.uvicorn("Application startup complete.");
  };

  if (isVllm) {
    if (cfg.headless || cfg.node_rank > 0) {
      log.api(
        "INFO",
        "api_server.py:1710",
        `Launching vLLM in headless mode (node rank ${cfg.node_rank} of ${cfg.nnodes}); no API server on this node.`,
      );
      // Only global rank 0 shows tqdm bars (vLLM's enable_tqdm).
      await load(rt, false, 1);
      log.fake(`headless rank ${cfg.node_rank} loaded; serving no HTTP, waiting for a signal`);
      return;
    }
    await load(rt, true, 1);
    rt.ready = true;
    log.api("INFO", "api_server.py:1971", `Starting vLLM API server 0 on ${url}`);
    log.api(
      "INFO",
      "launcher.py:36",
      "Available routes are: /health, /ping, /version, /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /metrics",
    );
    listen(rt, mainRoutes("vllm"), cfg.api_keys, uvicornUp);
    return;
  }

  if (cfg.node_rank > 0) {
    await load(rt, false, 1);
    // A separate app without the key middleware (engine.py `launch_dummy_health_check_server`).
    listen(rt, dummyRoutes(), [], () => {
      log.api(
        "INFO",
        "",
        `Dummy health check server started on ${url} (node rank ${cfg.node_rank}); /health answers 200.`,
      );
    });
    return;
  }
  listen(rt, mainRoutes("sglang"), cfg.api_keys, () => {
    uvicornUp();
    log.uvicorn(`Uvicorn running on ${url} (Press CTRL+C to quit)`);
  });
  await load(rt, true, cfg.skip_warmup ? 1 : 0.9);
  if (!cfg.skip_warmup) {
    log.core(
      "INFO",
      "",
      "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
    );
    await sleep(knobs.load_seconds * 1000 * 0.1);
  }
  rt.ready = true;
  log.api("INFO", "", "The server is fired up and ready to roll!");
}

/**
 * The prefix-cache knobs with the engine's own flags: vLLM's `--block-size`
 * sets the block size FAKE_ENGINE_BLOCK_TOKENS overrides, and vLLM's
 * `--no-enable-prefix-caching` or SGLang's `--disable-radix-cache` turns the
 * cache off.
 */
function prefixKnobs(command: Command): PrefixCacheKnobs {
  const flags = command.kind === "serve" ? command.config.flags : new Map<string, FlagValue>();
  const blockTokens = int(flags, "--block-size", DEFAULT_BLOCK_TOKENS);
  if (!Number.isSafeInteger(blockTokens) || blockTokens < 1) {
    throw new ConfigError(`--block-size must be a whole number ≥ 1, got ${blockTokens}`);
  }
  const knobs = readPrefixCacheKnobs(envGet, { blockTokens });
  const off = flags.get("--enable-prefix-caching") === false ||
    flags.get("--disable-radix-cache") === true;
  return off ? { ...knobs, cache: null } : knobs;
}

/** Entry point: `fake_engine.ts <vllm|sglang> ARGS…` or `fake_engine.ts --worker ENGINE LEADER_PID`. */
export async function main(args: string[]): Promise<void> {
  if (args[0] === "--worker") {
    runWorker(args.slice(1));
    return;
  }
  let command: Command;
  let knobs: Knobs;
  let prefix: PrefixCacheKnobs;
  try {
    command = parseCommandLine(args);
    knobs = readKnobs();
    prefix = prefixKnobs(command);
  } catch (e) {
    if (e instanceof UsageError) {
      writeAll(Deno.stderr, e.render());
      Deno.exit(2);
    }
    if (e instanceof KnobError || e instanceof PrefixCacheKnobError) {
      writeAll(Deno.stderr, `fake_engine.ts: error: ${e.message}\n`);
      Deno.exit(2);
    }
    if (e instanceof ConfigError) {
      writeAll(Deno.stderr, `ValueError: ${e.message}\n`);
      Deno.exit(1);
    }
    throw e;
  }
  if (command.kind === "print") {
    writeAll(Deno.stdout, command.text);
    return;
  }
  await serve(command.config, knobs, prefix);
}

if (import.meta.main) {
  await main(Deno.args);
}
