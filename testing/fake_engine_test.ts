/**
 * Tests of the fake engine (testing/fake_engine.ts): its argparse imitation
 * against the exact argv the vLLM and SGLang plugins build, its progress
 * lines against the plugins' patterns, and, as real processes started
 * through the shims in testing/bin (PATH prefixed), its readiness behaviour,
 * OpenAI surface, metrics, crash knobs and process group.
 *
 * Every process a test starts is its own process group (`detached: true`)
 * and is SIGKILLed by group in a `finally`, even when the test fails. Waits
 * poll with generous deadlines; nothing asserts how fast anything is.
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import {
  isAlive,
  killLeftovers,
  processes,
  settleWithin,
  survivorsAfter,
} from "../tests/proc_probe.ts";
import { VLLM_LOADING_PROGRESS, VLLM_QUANTIZATIONS, vllmPlugin } from "../engines/vllm.ts";
import { SGLANG_QUANTIZATIONS, sglangPlugin } from "../engines/sglang.ts";
import { withApiKey } from "../engines/api_key.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "../engines/types.ts";
import {
  apiKeyAllows,
  ConfigError,
  type EngineConfig,
  FAKE_SGLANG_QUANTIZATIONS,
  FAKE_VLLM_QUANTIZATIONS,
  KnobError,
  metricsText,
  parseCommandLine,
  progressBar,
  readKnobs,
  SGLANG_OPEN_PREFIXES,
  UsageError,
  VLLM_GUARDED_PREFIXES,
} from "./fake_engine.ts";

// ---------------------------------------------------------------------------
// Builders and helpers

const BIN = new URL("./bin", import.meta.url).pathname;
/** Generous upper bound for any wait on a fake engine (deno start + load). */
const WAIT_MS = 30_000;

/** A shard launch like engines/launch.ts builds, for the plugins' command(). */
function launch(o: {
  tp?: number;
  nodes?: number;
  rank?: number;
  port: number;
  quantization?: string;
  engineArgs?: string[];
}): ShardLaunch {
  const tp = o.tp ?? 1;
  const nodes = o.nodes ?? 1;
  const rank = o.rank ?? 0;
  const perNode = tp / nodes;
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "demo",
    replica_id: "r-1",
    shard_id: `r-1/${rank}`,
    model: "org/fake-model-8b",
    served_model_name: "fake-model",
    profile: {
      name: "p",
      tensor_parallel: tp,
      pipeline_parallel: 1,
      nodes,
      gpus_per_node: perNode,
      quantization: o.quantization ?? "none",
      engine_args: o.engineArgs ?? [],
      engine_options: {},
      env: {},
    },
    rank,
    world: {
      nodes,
      leader_addr: "127.0.0.1",
      rendezvous_port: 29500,
      leader_http_port: o.port,
    },
    gpus: Array.from({ length: perNode }, (_, i) => ({
      index: i,
      class: "h100-80g",
      compute_capability: "9.0",
    })),
    fabric: null,
    node: { id: `node-${rank}`, mgmt_addr: "127.0.0.1", mgmt_interface: null },
    port: o.port,
    engine_version: "0.11.1",
  };
}

/** The fake's argv for a plugin-built command: what the shims pass on. */
function fakeArgv(argv: string[]): string[] {
  if (argv[0] === "vllm") return ["vllm", ...argv.slice(1)];
  assertEquals(argv.slice(0, 3), ["python3", "-m", "sglang.launch_server"]);
  return ["sglang", ...argv.slice(3)];
}

function serveConfig(argv: string[]): EngineConfig {
  const c = parseCommandLine(argv);
  assertOk(c.kind === "serve", `expected a serve command from ${argv.join(" ")}`);
  return c.config;
}

function usageError(argv: string[]): UsageError {
  try {
    parseCommandLine(argv);
  } catch (e) {
    assertOk(e instanceof UsageError, `expected a UsageError, got ${e}`);
    return e;
  }
  throw new Error(`expected ${argv.join(" ")} to be refused`);
}

/** A free loopback port (bound, read, released). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The environment of a fake engine: ours, minus knobs and GPU variables, PATH prefixed. */
function engineEnv(extra: Record<string, string>): Record<string, string> {
  const env = Deno.env.toObject();
  for (const k of Object.keys(env)) {
    if (k.startsWith("FAKE_ENGINE_") || k === "CUDA_VISIBLE_DEVICES" || k === "VLLM_API_KEY") {
      delete env[k];
    }
  }
  return { ...env, PATH: `${BIN}:${env.PATH ?? ""}`, ...extra };
}

/** How the waits here poll: a deno process starts, then loads. */
const POLL = { timeoutMs: WAIT_MS, intervalMs: 50 };

/** A fake engine process started through the shims, with its output collected. */
class Engine {
  readonly child: Deno.ChildProcess;
  readonly pid: number;
  readonly port: number;
  out = "";
  err = "";
  readonly #pumps: Promise<void>;
  readonly #http = Deno.createHttpClient({});

  constructor(argv: string[], port: number, env: Record<string, string> = {}) {
    this.port = port;
    this.child = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: engineEnv(env),
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
    this.pid = this.child.pid;
    const pump = async (s: ReadableStream<Uint8Array>, to: "out" | "err") => {
      for await (const text of s.pipeThrough(new TextDecoderStream())) this[to] += text;
    };
    this.#pumps = Promise.all([pump(this.child.stdout, "out"), pump(this.child.stderr, "err")])
      .then(() => {});
  }

  /** stdout and stderr (not interleaved). */
  get log(): string {
    return this.out + this.err;
  }

  /** Waits until the output contains `text`. */
  waitForLog(text: string | RegExp, ms = WAIT_MS): Promise<true> {
    return until(
      `log ${text}`,
      () => (typeof text === "string" ? this.log.includes(text) : text.test(this.log)) || undefined,
      { ...POLL, timeoutMs: ms },
    );
  }

  /** One HTTP request; null when nothing answers (refused). The body is always read. */
  async request(
    path: string,
    init: RequestInit = {},
  ): Promise<{ status: number; body: string; type: string | null } | null> {
    let res: Response;
    try {
      res = await fetch(`http://127.0.0.1:${this.port}${path}`, {
        ...init,
        client: this.#http,
        signal: AbortSignal.timeout(10_000),
      });
    } catch {
      return null;
    }
    const body = await res.text();
    return { status: res.status, body, type: res.headers.get("content-type") };
  }

  /** POSTs JSON. */
  post(path: string, body: unknown): ReturnType<Engine["request"]> {
    return this.request(path, {
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });
  }

  /** Starts a streaming request and returns its reader (the caller cancels it). */
  async stream(path: string, body: unknown): Promise<ReadableStreamDefaultReader<string>> {
    const res = await fetch(`http://127.0.0.1:${this.port}${path}`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
      client: this.#http,
    });
    assertEquals(res.status, 200);
    assertStringIncludes(res.headers.get("content-type") ?? "", "text/event-stream");
    return res.body!.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** Waits for the exit status (the process is killed if it does not come). */
  async exit(ms = WAIT_MS): Promise<Deno.CommandStatus> {
    const s = await settleWithin(this.child.status, ms, () => this.killNow());
    if (!s.ok) throw s.error;
    return s.value;
  }

  /** SIGKILLs the process group and any member or child that is left. */
  killNow(): void {
    try {
      Deno.kill(-this.pid, "SIGKILL");
    } catch {
      // The group is gone already.
    }
    killLeftovers([this.pid], [this.pid], ["deno", "sh", "sleep"]);
  }

  /** For `finally`: kills everything, then waits for the exit and the output pipes to close. */
  async dispose(): Promise<void> {
    this.killNow();
    await this.child.status;
    const s = await settleWithin(this.#pumps, 10_000, () => this.killNow());
    this.#http.close();
    if (!s.ok) throw s.error;
  }
}

/** Runs `body` with an engine that is always disposed of. */
async function withEngine(
  argv: string[],
  env: Record<string, string>,
  port: number,
  body: (e: Engine) => Promise<void>,
): Promise<void> {
  const e = new Engine(argv, port, env);
  try {
    await body(e);
  } catch (err) {
    // The engine's output is the diagnosis.
    console.error(`--- fake engine stdout ---\n${e.out}\n--- stderr ---\n${e.err}`);
    throw err;
  } finally {
    await e.dispose();
  }
}

function vllmArgv(port: number, extra: string[] = []): string[] {
  return [
    "vllm",
    "serve",
    "org/fake-model-8b",
    "--served-model-name",
    "fake-model",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--tensor-parallel-size",
    "1",
    "--pipeline-parallel-size",
    "1",
    ...extra,
  ];
}

function sglangArgv(port: number, extra: string[] = []): string[] {
  return [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "org/fake-model-8b",
    "--served-model-name",
    "fake-model",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--tp-size",
    "1",
    "--enable-metrics",
    ...extra,
  ];
}

/** tqdm updates in captured stderr: tqdm redraws with `\r`, so split on both. */
function barFragments(stderr: string): string[] {
  return stderr.split(/[\r\n]/).filter((l) => l.includes("checkpoint shards"));
}

const SGLANG_PROGRESS = sglangPlugin.probes(launch({ port: 1 })).loading_progress.map((p) =>
  new RegExp(p.regex)
);
const VLLM_PROGRESS = VLLM_LOADING_PROGRESS.map((p) => new RegExp(p.regex));

/** A metric's value for the model "fake-model" from Prometheus text. */
function metric(text: string, name: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) && line.includes('model_name="fake-model"')) {
      return Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return undefined;
}

/** Reads SSE text until `[DONE]` or the stream ends; returns the data payloads. */
async function readAll(reader: ReadableStreamDefaultReader<string>, first = ""): Promise<string[]> {
  let text = first;
  while (true) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  assertOk(text.endsWith("data: [DONE]\n\n"), `stream must end with [DONE]: ${text.slice(-200)}`);
  return text.split("\n\n").filter((e) => e !== "").map((e) => {
    assertOk(e.startsWith("data: "), `not an SSE data event: ${e}`);
    return e.slice("data: ".length);
  });
}

// ---------------------------------------------------------------------------
// Argument parsing (no processes)

Deno.test("the fake accepts the exact argv the vLLM plugin builds", () => {
  const single = vllmPlugin.command(launch({ port: 8000, tp: 2 })).argv;
  const c = serveConfig(fakeArgv(single));
  assertEquals(
    [
      c.engine,
      c.model,
      c.served_names,
      c.host,
      c.port,
      c.tp,
      c.pp,
      c.nnodes,
      c.node_rank,
      c.headless,
    ],
    ["vllm", "org/fake-model-8b", ["fake-model"], "127.0.0.1", 8000, 2, 1, 1, 0, false],
  );
  for (const rank of [0, 1]) {
    const multi = vllmPlugin.command(launch({ port: 8010, tp: 4, nodes: 2, rank })).argv;
    const m = serveConfig(fakeArgv(multi));
    assertEquals([m.nnodes, m.node_rank, m.headless, m.rendezvous], [
      2,
      rank,
      rank > 0,
      "127.0.0.1:29500",
    ]);
  }
  for (const q of VLLM_QUANTIZATIONS.filter((q) => q !== "none")) {
    assertOk(FAKE_VLLM_QUANTIZATIONS.includes(q), `fake vLLM lacks quantization ${q}`);
    const argv = vllmPlugin.command(launch({ port: 8000, quantization: q })).argv;
    assertEquals(serveConfig(fakeArgv(argv)).quantization, q);
  }
  const extras = [
    "--max-model-len",
    "32K",
    "--gpu-memory-utilization",
    "0.85",
    "--enforce-eager",
    "--no-enable-prefix-caching",
    "--dtype=bfloat16",
    "--trust-remote-code",
    "--max-num-seqs",
    "64",
    "--kv-cache-dtype",
    "fp8",
    "--max_num_batched_tokens",
    "8192",
    "--disable-log-stats",
  ];
  const e = serveConfig(
    fakeArgv(vllmPlugin.command(launch({ port: 8000, engineArgs: extras })).argv),
  );
  assertEquals([e.max_model_len, e.max_running], [32 * 1024, 64]);
  assertEquals(e.flags.get("--enable-prefix-caching"), false);
  assertEquals(e.flags.get("--max-num-batched-tokens"), "8192");
});

Deno.test("the fake accepts the exact argv the SGLang plugin builds, and argparse abbreviations", () => {
  const single = sglangPlugin.command(launch({ port: 8000, tp: 2 })).argv;
  const c = serveConfig(fakeArgv(single));
  assertEquals(
    [c.engine, c.model, c.served_names, c.host, c.port, c.tp, c.metrics],
    ["sglang", "org/fake-model-8b", ["fake-model"], "127.0.0.1", 8000, 2, true],
  );
  const m = serveConfig(
    fakeArgv(sglangPlugin.command(launch({ port: 8010, tp: 4, nodes: 2, rank: 1 })).argv),
  );
  assertEquals([m.nnodes, m.node_rank, m.rendezvous], [2, 1, "127.0.0.1:29500"]);
  for (const q of SGLANG_QUANTIZATIONS.filter((q) => q !== "none")) {
    assertOk(FAKE_SGLANG_QUANTIZATIONS.includes(q), `fake SGLang lacks quantization ${q}`);
    assertEquals(
      serveConfig(fakeArgv(sglangPlugin.command(launch({ port: 8000, quantization: q })).argv))
        .quantization,
      q,
    );
  }
  const abbrev = serveConfig([
    "sglang",
    "--model",
    "m",
    "--tp",
    "8",
    "--context-len=4096",
    "--mem-frac",
    "0.8",
  ]);
  assertEquals([abbrev.model, abbrev.tp, abbrev.max_model_len, abbrev.host, abbrev.port], [
    "m",
    8,
    4096,
    "127.0.0.1",
    30000,
  ]);
  assertEquals(abbrev.flags.get("--mem-fraction-static"), "0.8");
});

Deno.test("argparse-style refusals: unknown flags, missing values, bad types and choices", () => {
  const unknown = usageError(["vllm", "serve", "m", "--bogus", "--port", "1"]);
  // Real vLLM reports extras from its top-level parser: "vllm: error: …".
  assertEquals(
    unknown.render(),
    `usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\nvllm: error: unrecognized arguments: --bogus\n`,
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "extra-positional"]).message,
    "unrecognized arguments: extra-positional",
  );
  const missing = usageError(["vllm", "serve", "m", "--port"]);
  assertEquals([missing.prog, missing.message], [
    "vllm serve",
    "argument --port: expected one argument",
  ]);
  assertEquals(
    usageError(["vllm", "serve", "m", "--port", "--host", "h"]).message,
    "argument --port: expected one argument",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "-tp", "two"]).message,
    "argument --tensor-parallel-size/-tp: invalid int value: 'two'",
  );
  assertStringIncludes(
    usageError(["vllm", "serve", "m", "-q", "none"]).message,
    "argument --quantization/-q: invalid choice: 'none' (choose from 'fp8', ",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "--headless=1"]).message,
    "argument --headless: ignored explicit argument '1'",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "--no-headless"]).message,
    "unrecognized arguments: --no-headless",
  );
  // vLLM does not take abbreviations; SGLang does, unless ambiguous.
  assertEquals(
    usageError(["vllm", "serve", "m", "--tensor-parallel", "2"]).message,
    "unrecognized arguments: --tensor-parallel 2",
  );
  const sgUnknown = usageError(["sglang", "--model-path", "m", "--bogus"]);
  assertEquals(
    sgUnknown.render(),
    "usage: launch_server.py [-h] --model-path MODEL_PATH [options]\nlaunch_server.py: error: unrecognized arguments: --bogus\n",
  );
  assertStringIncludes(
    usageError(["sglang", "--model-path", "m", "--t", "2"]).message,
    "ambiguous option: --t could match",
  );
  assertEquals(
    usageError(["sglang", "--tp-size", "2"]).message,
    "the following arguments are required: --model-path/--model",
  );
  assertEquals(
    usageError(["sglang", "--model-path", "m", "--port"]).message,
    "argument --port: expected one argument",
  );
  assertEquals(
    usageError(["other"]).message,
    "argument engine: invalid choice: 'other' (choose from 'vllm', 'sglang')",
  );
  try {
    parseCommandLine(["vllm", "serve", "m", "--nnodes", "2", "--node-rank", "2"]);
    throw new Error("node rank 2 of 2 must be refused");
  } catch (e) {
    assertOk(e instanceof ConfigError, String(e));
  }
});

Deno.test("progress lines match the plugins' loading-progress patterns", () => {
  assertEquals(
    progressBar(1, 4, 1),
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.00s/it]",
  );
  assertEquals(
    progressBar(0, 4, 0),
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
  );
  for (let done = 0; done <= 4; done++) {
    const line = `(EngineCore_DP0 pid=42) ${progressBar(done, 4, done * 0.3)}`;
    for (const re of [...VLLM_PROGRESS, ...SGLANG_PROGRESS]) {
      const g = re.exec(line)?.groups;
      assertOk(g !== undefined, `${re} must match ${line}`);
      assertEquals([g.done, g.total], [String(done), "4"]);
      if (g.percent !== undefined) assertEquals(g.percent, String(done * 25));
    }
  }
});

Deno.test("knobs: defaults and refusals", () => {
  const none = (_: string) => undefined;
  assertEquals(readKnobs(none), {
    load_seconds: 2,
    worker: false,
    crash_after_requests: null,
    crash_after_seconds: null,
    never_ready: false,
    ignore_sigterm: false,
    tokens: 8,
    token_delay_ms: 5,
    progress: "cr",
    access_log: true,
    worker_max_seconds: 3600,
    leak_api_key: false,
  });
  assertEquals(
    readKnobs((k) => k === "FAKE_ENGINE_LEAK_API_KEY" ? "1" : undefined).leak_api_key,
    true,
  );
  const env = (vars: Record<string, string>) => (k: string) => vars[k];
  assertEquals(
    readKnobs(env({ FAKE_ENGINE_LOAD_SECONDS: "0.5", FAKE_ENGINE_WORKER: "1" })).load_seconds,
    0.5,
  );
  for (
    const bad of [
      { FAKE_ENGINE_TOKENS: "2.5" },
      { FAKE_ENGINE_WORKER: "maybe" },
      { FAKE_ENGINE_LOAD_SECONDS: "-1" },
    ] as Record<string, string>[]
  ) {
    try {
      readKnobs(env(bad));
      throw new Error(`${JSON.stringify(bad)} must be refused`);
    } catch (e) {
      assertOk(e instanceof KnobError, String(e));
    }
  }
});

Deno.test("metric names follow the engine and the vLLM version", () => {
  const s = {
    running: 2,
    waiting: 1,
    max: 4,
    completed: 0,
    prompt_tokens: 0,
    generation_tokens: 0,
  };
  const v011 = metricsText("vllm", "0.11.1", "fake-model", s);
  assertEquals([
    metric(v011, "vllm:num_requests_running"),
    metric(v011, "vllm:num_requests_waiting"),
    metric(v011, "vllm:kv_cache_usage_perc"),
  ], [2, 1, 0.5]);
  assertEquals(metric(v011, "vllm:gpu_cache_usage_perc"), undefined);
  const v010 = metricsText("vllm", "0.10.1", "fake-model", s);
  assertEquals([
    metric(v010, "vllm:kv_cache_usage_perc"),
    metric(v010, "vllm:gpu_cache_usage_perc"),
  ], [0.5, 0.5]);
  const sg = metricsText("sglang", "0.5.3", "fake-model", s);
  assertEquals([
    metric(sg, "sglang:num_running_reqs"),
    metric(sg, "sglang:num_queue_reqs"),
    metric(sg, "sglang:token_usage"),
  ], [2, 1, 0.5]);
});

// ---------------------------------------------------------------------------
// API keys (engine reference §6), no processes

Deno.test("API keys: where each engine reads them from", () => {
  const keys = (argv: string[], env: Record<string, string> = {}) => {
    const c = parseCommandLine(argv, (k) => env[k]);
    assertOk(c.kind === "serve", argv.join(" "));
    return [c.config.api_keys, c.config.api_key_source];
  };
  const v = ["vllm", "serve", "m"];
  assertEquals(keys(v), [[], null]);
  assertEquals(keys(v, { VLLM_API_KEY: "e" }), [["e"], "VLLM_API_KEY"]);
  assertEquals(keys(v, { VLLM_API_KEY: "" }), [[], null]);
  // --api-key takes several keys (nargs="+") and hides the variable.
  assertEquals(keys([...v, "--api-key", "a", "b"], { VLLM_API_KEY: "e" }), [
    ["a", "b"],
    "--api-key",
  ]);
  assertEquals(keys([...v, "--api_key=a"]), [["a"], "--api-key"]);
  // Even an empty --api-key hides the variable: vLLM then checks nothing.
  assertEquals(keys([...v, "--api-key", ""], { VLLM_API_KEY: "e" }), [[], null]);
  const s = ["sglang", "--model-path", "m"];
  assertEquals(keys([...s, "--api-key", "k"]), [["k"], "--api-key"]);
  // SGLang reads no key from its environment; an empty flag is no key.
  assertEquals(keys(s, { SGLANG_API_KEY: "e", VLLM_API_KEY: "e" }), [[], null]);
  assertEquals(keys([...s, "--api-key="]), [[], null]);
});

Deno.test("API keys: the routes each engine checks and the headers it takes", () => {
  const h = (o: Record<string, string> = {}) => new Headers(o);
  const K = "k-1";
  const ok = h({ authorization: `Bearer ${K}` });
  const cases: [
    "vllm" | "sglang",
    string,
    string,
    Headers,
    boolean,
  ][] = [
    // vLLM: /v1, /v2, /inference, /cohere, as prefixes (so /v1x too).
    ["vllm", "POST", "/v1/chat/completions", h(), false],
    ["vllm", "POST", "/v1/chat/completions", ok, true],
    ["vllm", "GET", "/v1/models", h(), false],
    ["vllm", "GET", "/v1nothing", h(), false],
    ["vllm", "POST", "/v2/rerank", h(), false],
    ["vllm", "POST", "/inference/v1/generate", h(), false],
    ["vllm", "POST", "/cohere/v2/chat", h(), false],
    ["vllm", "GET", "/health", h(), true],
    ["vllm", "GET", "/metrics", h(), true],
    ["vllm", "GET", "/version", h(), true],
    ["vllm", "POST", "/invocations", h(), true],
    ["vllm", "POST", "/tokenize", h(), true],
    ["vllm", "OPTIONS", "/v1/models", h(), true],
    ["vllm", "GET", "/v1/models", h({ authorization: `bearer ${K}` }), true],
    ["vllm", "GET", "/v1/models", h({ authorization: `Bearer  ${K}` }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: `Basic ${K}` }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: K }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: "Bearer k-2" }), false],
    ["vllm", "GET", "/v1/models", h({ "x-api-key": K }), false],
    // SGLang: everything but /health*, /ready*, /metrics*.
    ["sglang", "POST", "/v1/chat/completions", h(), false],
    ["sglang", "POST", "/v1/chat/completions", ok, true],
    ["sglang", "GET", "/v1/models", h(), false],
    ["sglang", "GET", "/get_model_info", h(), false],
    ["sglang", "GET", "/nowhere", h(), false],
    ["sglang", "GET", "/health", h(), true],
    ["sglang", "GET", "/health_generate", h(), true],
    ["sglang", "GET", "/ready", h(), true],
    ["sglang", "GET", "/metrics", h(), true],
    ["sglang", "OPTIONS", "/v1/models", h(), true],
    ["sglang", "GET", "/v1/models", h({ authorization: `BEARER ${K}` }), true],
    ["sglang", "GET", "/v1/models", h({ "x-api-key": K }), true],
    ["sglang", "GET", "/v1/models", h({ "x-api-key": "" }), false],
    ["sglang", "GET", "/v1/models", h({ authorization: `Token ${K}` }), false],
  ];
  for (const [engine, method, path, headers, want] of cases) {
    assertEquals(
      apiKeyAllows(engine, [K], method, path, headers),
      want,
      `${engine} ${method} ${path} ${JSON.stringify([...headers])}`,
    );
    // Without keys, nothing is checked.
    assertEquals(apiKeyAllows(engine, [], method, path, headers), true);
  }
  // vLLM takes any of its keys; SGLang has one.
  assertEquals(apiKeyAllows("vllm", ["a", K], "GET", "/v1/models", ok), true);
});

Deno.test("API keys: the key opens every route, any other credential none that is checked", () => {
  const key = fc.stringMatching(/^[\x21-\x7e]{1,64}$/);
  const path = fc.oneof(
    fc.constantFrom(...VLLM_GUARDED_PREFIXES, ...SGLANG_OPEN_PREFIXES, "/", "/x"),
    fc.webPath(),
  );
  fc.assert(
    fc.property(
      fc.constantFrom("vllm" as const, "sglang" as const),
      key,
      key,
      path,
      (engine, k, other, p) => {
        const bearer = (v: string) => new Headers({ authorization: `Bearer ${v}` });
        assertOk(apiKeyAllows(engine, [k], "POST", p, bearer(k)));
        const checked = engine === "vllm"
          ? VLLM_GUARDED_PREFIXES.some((g) => p.startsWith(g))
          : !SGLANG_OPEN_PREFIXES.some((o) => p.startsWith(o));
        assertEquals(apiKeyAllows(engine, [k], "POST", p, new Headers()), !checked);
        if (other !== k) {
          assertEquals(apiKeyAllows(engine, [k], "POST", p, bearer(other)), !checked);
        }
      },
    ),
  );
});

// ---------------------------------------------------------------------------
// Real processes through the shims

Deno.test("vLLM: port closed while loading, progress lines on stderr, then ready", async () => {
  const port = freePort();
  await withEngine(vllmArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "1.5" }, port, async (e) => {
    const res = await until("/health 200", async () => {
      // Snapshot the log before probing: an answer must come after the last shard loaded.
      const before = e.err;
      const r = await e.request("/health");
      if (r === null) return undefined;
      assertStringIncludes(
        e.err,
        "100% Completed | 4/4",
        `answered before loading finished; stderr before: ${before}`,
      );
      return r;
    }, POLL);
    assertEquals([res.status, res.body], [200, ""]);
    const bars = barFragments(e.err);
    assertEquals(bars.length, 5, bars.join("\n"));
    bars.forEach((line, i) => {
      const g = VLLM_PROGRESS[0].exec(line)?.groups;
      assertOk(g !== undefined, `${line} must match VLLM_LOADING_PROGRESS`);
      assertEquals([g.percent, g.done, g.total], [String(i * 25), String(i), "4"]);
    });
    // tqdm redraws with \r, after the worker prefix.
    assertOk(
      /\(EngineCore_DP0 pid=\d+\) \rLoading safetensors checkpoint shards: {3}0% Completed/.test(
        e.err,
      ),
      e.err,
    );
    assertStringIncludes(e.out, "INFO ");
    assertStringIncludes(e.out, "[api_server.py:1896] vLLM API server version 0.11.1");
    assertStringIncludes(e.err, "INFO:     Application startup complete.");
    const models = await e.request("/v1/models");
    assertEquals(models?.status, 200);
    const list = JSON.parse(models!.body);
    assertEquals(list.object, "list");
    assertEquals(
      list.data.map((
        m: { id: string; object: string; owned_by: string; max_model_len: number },
      ) => [m.id, m.object, m.owned_by, m.max_model_len]),
      [["fake-model", "model", "vllm", 32768]],
    );
    Deno.kill(e.pid, "SIGTERM");
    assertEquals((await e.exit()).code, 0);
    assertStringIncludes(e.out, "Shutting down FastAPI HTTP server.");
  });
});

Deno.test("vLLM: FAKE_ENGINE_NEVER_READY keeps the port closed while the process lives", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_NEVER_READY: "1", FAKE_ENGINE_PROGRESS: "lines" },
    port,
    async (e) => {
      await e.waitForLog("FAKE_ENGINE_NEVER_READY=1");
      const bar = e.err.split("\n").find((l) => l.includes("checkpoint shards"));
      assertOk(bar !== undefined && VLLM_PROGRESS[0].test(bar), e.err);
      for (let i = 0; i < 5; i++) {
        assertEquals(await e.request("/health"), null, "the port must refuse while loading");
        // Not a condition wait: the port must stay closed over a stretch of time.
        await new Promise((r) => setTimeout(r, 50));
      }
      assertOk(isAlive(e.pid));
    },
  );
});

Deno.test("SGLang: /v1/models 200 at once, /health 503 until loaded and warm, then 200", async () => {
  const port = freePort();
  await withEngine(sglangArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "1.5" }, port, async (e) => {
    const models = await until(
      "/v1/models",
      () => e.request("/v1/models").then((r) => r ?? undefined),
      POLL,
    );
    assertEquals(models.status, 200);
    assertEquals(JSON.parse(models.body).data[0].id, "fake-model");
    const health = await until("/health 200", async () => {
      const r = await e.request("/health");
      assertOk(r !== null, "SGLang's port closed after it opened");
      if (r.status === 503) return undefined;
      return r;
    }, POLL);
    assertEquals(health.status, 200);
    assertStringIncludes(e.err, "The server is fired up and ready to roll!");
    assertEquals((await e.request("/health_generate"))?.status, 200);
    const bars = barFragments(e.err);
    assertEquals(bars.length, 5, bars.join("\n"));
    for (const line of bars) assertOk(SGLANG_PROGRESS.every((re) => re.test(line)), line);
    Deno.kill(e.pid, "SIGTERM");
    assertEquals((await e.exit()).code, 0);
  });
});

Deno.test("SGLang: while never ready, /health and /health_generate 503, /v1/models 200, completions 503", async () => {
  const port = freePort();
  await withEngine(sglangArgv(port), { FAKE_ENGINE_NEVER_READY: "1" }, port, async (e) => {
    await e.waitForLog("FAKE_ENGINE_NEVER_READY=1");
    await until("port open", () => e.request("/v1/models").then((r) => r ?? undefined), POLL);
    assertEquals((await e.request("/health"))?.status, 503);
    assertEquals((await e.request("/health_generate"))?.status, 503);
    assertEquals((await e.request("/v1/models"))?.status, 200);
    const chat = await e.post("/v1/chat/completions", {
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(chat?.status, 503);
  });
});

Deno.test("vLLM: chat and text completions, streaming, embeddings and OpenAI errors", async (t) => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "6", FAKE_ENGINE_TOKEN_DELAY_MS: "20" },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      const messages = [{ role: "user", content: "Say something." }];

      await t.step("chat completion", async () => {
        const r = await e.post("/v1/chat/completions", { model: "fake-model", messages });
        assertEquals(r?.status, 200);
        const b = JSON.parse(r!.body);
        assertEquals([b.object, b.model, b.choices[0].message.role, b.choices[0].finish_reason], [
          "chat.completion",
          "fake-model",
          "assistant",
          "stop",
        ]);
        assertEquals(b.choices[0].message.content, "This is a reply from the");
        assertEquals(b.usage.completion_tokens, 6);
        assertEquals(b.usage.total_tokens, b.usage.prompt_tokens + 6);
        // No model means the served name, as in vLLM; max_tokens caps the reply.
        const short = JSON.parse(
          (await e.post("/v1/chat/completions", { messages, max_tokens: 2 }))!.body,
        );
        assertEquals([
          short.model,
          short.choices[0].message.content,
          short.choices[0].finish_reason,
        ], ["fake-model", "This is", "length"]);
      });

      await t.step("streaming chat completion", async () => {
        const reader = await e.stream("/v1/chat/completions", {
          model: "fake-model",
          messages,
          stream: true,
          stream_options: { include_usage: true },
        });
        const first = await reader.read();
        assertOk(
          !first.done && !first.value.includes("[DONE]"),
          "the first chunk comes before the end",
        );
        const events = await readAll(reader, first.value);
        assertEquals(events.at(-1), "[DONE]");
        const chunks = events.slice(0, -1).map((x) => JSON.parse(x));
        assertOk(
          chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "fake-model"),
        );
        assertEquals(chunks[0].choices[0].delta, { role: "assistant", content: "" });
        const content = chunks.slice(1, 7).map((c) => c.choices[0].delta.content);
        assertEquals(content, ["This", " is", " a", " reply", " from", " the"]);
        assertEquals(chunks[7].choices[0].finish_reason, "stop");
        assertEquals([chunks[8].choices, chunks[8].usage.completion_tokens], [[], 6]);
        assertEquals(chunks.length, 9);
      });

      await t.step("text completion, plain and streamed", async () => {
        const r = JSON.parse(
          (await e.post("/v1/completions", { model: "fake-model", prompt: "Once" }))!.body,
        );
        assertEquals([r.object, r.choices[0].text, r.choices[0].finish_reason], [
          "text_completion",
          "This is a reply from the",
          "stop",
        ]);
        const reader = await e.stream("/v1/completions", {
          model: "fake-model",
          prompt: "Once",
          stream: true,
        });
        const events = await readAll(reader);
        const texts = events.slice(0, -1).map((x) => JSON.parse(x).choices[0].text);
        assertEquals(texts.join(""), "This is a reply from the");
        assertEquals(events.length, 8); // 6 tokens, the finish chunk, [DONE]
      });

      await t.step("embeddings are deterministic", async () => {
        const a = JSON.parse(
          (await e.post("/v1/embeddings", { model: "fake-model", input: ["alpha", "beta"] }))!.body,
        );
        const b = JSON.parse(
          (await e.post("/v1/embeddings", { model: "fake-model", input: "alpha" }))!.body,
        );
        assertEquals([a.object, a.data.length, a.data[0].object, a.data[0].embedding.length], [
          "list",
          2,
          "embedding",
          8,
        ]);
        assertEquals(b.data[0].embedding, a.data[0].embedding);
        assertOk(JSON.stringify(a.data[0].embedding) !== JSON.stringify(a.data[1].embedding));
      });

      await t.step("wrong model → 404, bad JSON or fields → 400, unknown path → 404", async () => {
        for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]) {
          const r = await e.post(path, { model: "other", messages, prompt: "x", input: "x" });
          assertEquals(r?.status, 404);
          assertEquals(JSON.parse(r!.body).error, {
            message: "The model `other` does not exist.",
            type: "NotFoundError",
            param: "model",
            code: 404,
          });
          const bad = await e.post(path, "{not json");
          assertEquals(bad?.status, 400);
          assertEquals(JSON.parse(bad!.body).error.type, "BadRequestError");
        }
        assertEquals((await e.post("/v1/chat/completions", { model: "fake-model" }))?.status, 400);
        assertEquals(
          (await e.post("/v1/chat/completions", { model: "fake-model", messages, max_tokens: 0 }))
            ?.status,
          400,
        );
        assertEquals((await e.request("/v2/nothing"))?.status, 404);
        assertEquals((await e.request("/v1/chat/completions"))?.status, 405);
      });

      await t.step("/metrics counts what was served", async () => {
        const m = await e.request("/metrics");
        assertEquals(m?.status, 200);
        assertStringIncludes(m!.type ?? "", "text/plain");
        assertEquals(metric(m!.body, "vllm:num_requests_running"), 0);
        assertEquals(metric(m!.body, "vllm:num_requests_waiting"), 0);
        assertEquals(metric(m!.body, "vllm:kv_cache_usage_perc"), 0);
        assertEquals(metric(m!.body, "vllm:request_success_total"), 5);
      });
    },
  );
});

Deno.test("vLLM: n choices, plain and streamed, and the Responses API", async (t) => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "4", FAKE_ENGINE_TOKEN_DELAY_MS: "1" },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      const messages = [{ role: "user", content: "Say something." }];

      await t.step("n choices, each counted in usage", async () => {
        const r = JSON.parse(
          (await e.post("/v1/chat/completions", { model: "fake-model", messages, n: 3 }))!.body,
        );
        assertEquals(r.choices.map((c: { index: number }) => c.index), [0, 1, 2]);
        assertOk(
          r.choices.every((c: { message: { content: string } }) =>
            c.message.content === "This is a reply"
          ),
        );
        assertEquals([r.usage.completion_tokens, r.usage.total_tokens], [
          12,
          r.usage.prompt_tokens + 12,
        ]);
        const text = JSON.parse(
          (await e.post("/v1/completions", { model: "fake-model", prompt: "x", n: 2 }))!.body,
        );
        assertEquals(text.choices.map((c: { text: string }) => c.text), [
          "This is a reply",
          "This is a reply",
        ]);
        for (const n of [0, 1.5, "2", 129]) {
          const bad = await e.post("/v1/chat/completions", { model: "fake-model", messages, n });
          assertEquals(bad?.status, 400, `n=${JSON.stringify(n)}`);
          assertEquals(JSON.parse(bad!.body).error.param, "n");
        }
      });

      await t.step("n streamed choices, then the usage chunk", async () => {
        const reader = await e.stream("/v1/chat/completions", {
          model: "fake-model",
          messages,
          n: 2,
          stream: true,
          stream_options: { include_usage: true },
        });
        const chunks = (await readAll(reader)).slice(0, -1).map((x) => JSON.parse(x));
        const usage = chunks.at(-1);
        assertEquals([usage.choices, usage.usage.completion_tokens], [[], 8]);
        for (const index of [0, 1]) {
          const mine = chunks.slice(0, -1).map((c) => c.choices[0]).filter((c) =>
            c.index === index
          );
          assertEquals(mine[0].delta, { role: "assistant", content: "" });
          assertEquals(mine.map((c) => c.delta.content ?? "").join(""), "This is a reply");
          assertEquals(mine.at(-1).finish_reason, "stop");
        }
      });

      await t.step("a response: one assistant message of output_text, with usage", async () => {
        const r = await e.post("/v1/responses", {
          model: "fake-model",
          input: [{ role: "user", content: [{ type: "input_text", text: "Say something." }] }],
          instructions: "Be brief.",
        });
        assertEquals(r?.status, 200);
        const b = JSON.parse(r!.body);
        assertEquals([b.object, b.model, b.status, b.incomplete_details], [
          "response",
          "fake-model",
          "completed",
          null,
        ]);
        assertOk(b.id.startsWith("resp_"), b.id);
        assertEquals(b.output.length, 1);
        assertEquals([b.output[0].type, b.output[0].role, b.output[0].status], [
          "message",
          "assistant",
          "completed",
        ]);
        assertEquals(b.output[0].content, [
          { type: "output_text", text: "This is a reply", annotations: [] },
        ]);
        assertEquals(b.usage.output_tokens, 4);
        assertEquals(b.usage.total_tokens, b.usage.input_tokens + 4);
        const short = JSON.parse(
          (await e.post("/v1/responses", { input: "x", max_output_tokens: 2 }))!.body,
        );
        assertEquals([short.model, short.status, short.incomplete_details], [
          "fake-model",
          "incomplete",
          { reason: "max_output_tokens" },
        ]);
        assertEquals(short.output[0].content[0].text, "This is");
        for (
          const body of [{ model: "fake-model" }, { input: [] }, { input: "x", instructions: 1 }, {
            input: "x",
            max_output_tokens: 0,
          }]
        ) {
          assertEquals((await e.post("/v1/responses", body))?.status, 400, JSON.stringify(body));
        }
        assertEquals((await e.post("/v1/responses", { model: "other", input: "x" }))?.status, 404);
      });

      await t.step("a streamed response: response.* events, named and numbered", async () => {
        const reader = await e.stream("/v1/responses", { input: "x", stream: true });
        let text = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += value;
        }
        assertOk(!text.includes("[DONE]"), "the Responses API sends no [DONE]");
        const events = text.split("\n\n").filter((x) => x !== "").map((x) => {
          const m = /^event: (\S+)\ndata: (.*)$/.exec(x);
          assertOk(m !== null, `not an event: ${x}`);
          const data = JSON.parse(m[2]);
          assertEquals(data.type, m[1]);
          return data;
        });
        assertEquals(events.map((x) => x.type), [
          "response.created",
          "response.in_progress",
          "response.output_item.added",
          "response.content_part.added",
          ...Array(4).fill("response.output_text.delta"),
          "response.output_text.done",
          "response.content_part.done",
          "response.output_item.done",
          "response.completed",
        ]);
        assertEquals(events.map((x) => x.sequence_number), events.map((_, i) => i));
        const deltas = events.filter((x) => x.type === "response.output_text.delta");
        assertEquals(deltas.map((x) => x.delta).join(""), "This is a reply");
        assertEquals(events[0].response.usage, null);
        const done = events.at(-1).response;
        assertEquals([done.status, done.output[0].content[0].text, done.usage.output_tokens], [
          "completed",
          "This is a reply",
          4,
        ]);
      });
    },
  );
});

Deno.test("SGLang: no Responses API (FastAPI's 404), n choices served", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "2", FAKE_ENGINE_TOKEN_DELAY_MS: "1" },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      const r = await e.post("/v1/responses", { model: "fake-model", input: "x" });
      assertEquals([r?.status, r && JSON.parse(r.body)], [404, { detail: "Not Found" }]);
      const chat = JSON.parse(
        (await e.post("/v1/chat/completions", {
          model: "fake-model",
          messages: [{ role: "user", content: "x" }],
          n: 2,
        }))!.body,
      );
      assertEquals(chat.choices.length, 2);
    },
  );
});

/** Two slow streams with one slot: one runs, one waits; disconnects free the slots. */
async function runningAndWaiting(
  e: Engine,
  names: [string, string],
  chatBody: unknown,
): Promise<void> {
  const counts = async () => {
    const m = await e.request("/metrics");
    assertEquals(m?.status, 200);
    return [metric(m!.body, names[0]), metric(m!.body, names[1])];
  };
  assertEquals(await counts(), [0, 0]);
  const a = await e.stream("/v1/chat/completions", chatBody);
  try {
    const first = await a.read();
    assertOk(!first.done && first.value.startsWith("data: {"));
    assertEquals(await counts(), [1, 0]);
    const b = await e.stream("/v1/chat/completions", chatBody);
    try {
      await until("one running, one waiting", async () => {
        const c = await counts();
        return c[0] === 1 && c[1] === 1 || undefined;
      }, POLL);
      // Chunks keep arriving one by one while the request runs.
      const next = await a.read();
      assertOk(!next.done && !next.value.includes("[DONE]"));
      await a.cancel();
      await until("the waiting request to run", async () => {
        const c = await counts();
        return c[0] === 1 && c[1] === 0 || undefined;
      }, POLL);
      const bFirst = await b.read();
      assertOk(!bFirst.done && bFirst.value.startsWith("data: {"));
    } finally {
      await b.cancel();
    }
    await until("all slots free after disconnects", async () => {
      const c = await counts();
      return c[0] === 0 && c[1] === 0 || undefined;
    }, POLL);
  } finally {
    await a.cancel().catch(() => {});
  }
}

Deno.test("vLLM: /metrics shows running and waiting requests during slow streams", async () => {
  const port = freePort();
  const slow = {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "100000",
    FAKE_ENGINE_TOKEN_DELAY_MS: "50",
  };
  await withEngine(vllmArgv(port, ["--max-num-seqs", "1"]), slow, port, async (e) => {
    await until(
      "/health 200",
      () => e.request("/health").then((r) => r?.status === 200 || undefined),
      POLL,
    );
    await runningAndWaiting(e, ["vllm:num_requests_running", "vllm:num_requests_waiting"], {
      model: "fake-model",
      messages: [{ role: "user", content: "go on" }],
      stream: true,
    });
    const m = (await e.request("/metrics"))!.body;
    assertEquals(metric(m, "vllm:kv_cache_usage_perc"), 0);
  });
});

Deno.test("SGLang: /metrics shows sglang:num_running_reqs and num_queue_reqs during slow streams", async () => {
  const port = freePort();
  const slow = {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "100000",
    FAKE_ENGINE_TOKEN_DELAY_MS: "50",
  };
  await withEngine(sglangArgv(port, ["--max-running-requests", "1"]), slow, port, async (e) => {
    await until(
      "/health 200",
      () => e.request("/health").then((r) => r?.status === 200 || undefined),
      POLL,
    );
    const m = (await e.request("/metrics"))!.body;
    assertEquals(metric(m, "sglang:token_usage"), 0);
    await runningAndWaiting(e, ["sglang:num_running_reqs", "sglang:num_queue_reqs"], {
      model: "fake-model",
      messages: [{ role: "user", content: "go on" }],
      stream: true,
    });
  });
});

Deno.test("an unknown flag or a missing value exits 2 with argparse's message", async () => {
  const cases: [string[], string][] = [
    [vllmArgv(1, ["--bogus"]), "vllm: error: unrecognized arguments: --bogus\n"],
    [
      vllmArgv(1, ["--max-model-len"]),
      "vllm serve: error: argument --max-model-len: expected one argument\n",
    ],
    [
      sglangArgv(1, ["--bogus", "x"]),
      "launch_server.py: error: unrecognized arguments: --bogus x\n",
    ],
    [
      sglangArgv(1, ["--tp-size"]),
      "launch_server.py: error: argument --tp-size/--tensor-parallel-size: expected one argument\n",
    ],
  ];
  for (const [argv, message] of cases) {
    await withEngine(argv, {}, 1, async (e) => {
      assertEquals((await e.exit()).code, 2, argv.join(" "));
      assertOk(e.err.startsWith("usage: "), e.err);
      assertOk(
        e.err.endsWith(message),
        `${JSON.stringify(e.err)} must end with ${JSON.stringify(message)}`,
      );
    });
  }
});

Deno.test("FAKE_ENGINE_CRASH_AFTER_REQUESTS exits 1 after that many completions", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_CRASH_AFTER_REQUESTS: "2" },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      for (let i = 0; i < 2; i++) {
        const r = await e.post("/v1/completions", { model: "fake-model", prompt: "x" });
        assertEquals(r?.status, 200, `completion ${i + 1} must be answered`);
      }
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(
        e.out,
        "RuntimeError: CUDA error: an illegal memory access was encountered",
      );
      assertStringIncludes(e.out, "EngineDeadError");
    },
  );
});

Deno.test("FAKE_ENGINE_CRASH_AFTER_SECONDS exits 1 with a CUDA error, even while loading", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_NEVER_READY: "1", FAKE_ENGINE_CRASH_AFTER_SECONDS: "0.3" },
    port,
    async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(
        e.err,
        "TP0] RuntimeError: CUDA error: an illegal memory access was encountered",
      );
    },
  );
});

Deno.test("FAKE_ENGINE_WORKER: the worker shares the group, outlives a SIGKILLed leader, dies with the group", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      const worker = Number(
        await until("worker pid", () => /worker pid (\d+)/.exec(e.out)?.[1], POLL),
      );
      await e.waitForLog("fake VLLM::EngineCore worker started");
      const procs = processes();
      assertEquals(procs.get(e.pid)?.pgrp, e.pid, "the engine leads its own group (detached)");
      assertEquals([procs.get(worker)?.ppid, procs.get(worker)?.pgrp], [e.pid, e.pid]);
      // SIGKILL on the leader alone leaves the worker, as with vLLM's EngineCore.
      Deno.kill(e.pid, "SIGKILL");
      assertEquals((await e.exit()).signal, "SIGKILL");
      assertOk(isAlive(worker), "the worker must survive its leader's SIGKILL");
      assertEquals(processes().get(worker)?.pgrp, e.pid);
      Deno.kill(-e.pid, "SIGKILL");
      assertEquals(await survivorsAfter([e.pid, worker], [e.pid], 10_000), []);
    },
  );
});

Deno.test("SIGTERM to the group: a clean exit 0 of leader and worker", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      await e.waitForLog("fake sglang::scheduler_TP0 worker started");
      await e.waitForLog("ready to roll");
      Deno.kill(-e.pid, "SIGTERM");
      assertEquals((await e.exit()).code, 0);
      assertEquals(await survivorsAfter([e.pid], [e.pid], 10_000), []);
    },
  );
});

Deno.test("FAKE_ENGINE_IGNORE_SIGTERM: the group survives SIGTERM, only SIGKILL ends it", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_IGNORE_SIGTERM: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      const worker = Number(
        await until("worker pid", () => /worker pid (\d+)/.exec(e.out)?.[1], POLL),
      );
      await e.waitForLog("fake VLLM::EngineCore worker started");
      Deno.kill(-e.pid, "SIGTERM");
      await e.waitForLog("ignoring SIGTERM (FAKE_ENGINE_IGNORE_SIGTERM=1)");
      await e.waitForLog("fake worker ignoring SIGTERM");
      assertOk(isAlive(e.pid) && isAlive(worker));
      Deno.kill(-e.pid, "SIGKILL");
      assertEquals((await e.exit()).signal, "SIGKILL");
      assertEquals(await survivorsAfter([e.pid, worker], [e.pid], 10_000), []);
    },
  );
});

Deno.test("plugin-built commands run as is: vLLM headless rank never listens, SGLang rank 1 serves a dummy /health", async () => {
  // vLLM multi-node rank 1 (mp): --headless, no HTTP ever.
  const p1 = freePort();
  const vCmd = vllmPlugin.command(launch({ port: p1, tp: 2, nodes: 2, rank: 1 }));
  assertOk(vCmd.argv.includes("--headless"));
  await withEngine(vCmd.argv, { ...vCmd.env, FAKE_ENGINE_LOAD_SECONDS: "0" }, p1, async (e) => {
    await e.waitForLog("headless rank 1 loaded; serving no HTTP");
    assertEquals(await e.request("/health"), null);
    assertEquals(barFragments(e.err), [], "only global rank 0 shows tqdm bars");
    assertOk(isAlive(e.pid));
    assertStringIncludes(e.out, "VLLM_HOST_IP=127.0.0.1");
  });
  // SGLang rank 1: nothing until loaded, then /health 200 and no API.
  const p2 = freePort();
  const sCmd = sglangPlugin.command(launch({ port: p2, tp: 2, nodes: 2, rank: 1 }));
  await withEngine(sCmd.argv, { FAKE_ENGINE_LOAD_SECONDS: "0.5" }, p2, async (e) => {
    const h = await until(
      "dummy /health",
      () => e.request("/health").then((r) => r ?? undefined),
      POLL,
    );
    assertEquals(h.status, 200);
    assertStringIncludes(e.err, "Load weight end.");
    assertEquals((await e.request("/v1/models"))?.status, 404);
  });
  // Rank 0 of each, single node, on 0.0.0.0 as the plugins ask.
  for (const plugin of [vllmPlugin, sglangPlugin]) {
    const port = freePort();
    const cmd = plugin.command(launch({ port, tp: 1 }));
    await withEngine(cmd.argv, { FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
      const probes = plugin.probes(launch({ port }));
      for (const check of probes.readiness) {
        const r = await until(`${plugin.name} ${check.path}`, async () => {
          const r = await e.request(check.path);
          return r?.status === check.expect_status ? r : undefined;
        }, POLL);
        if (check.lists_model !== undefined) {
          assertOk(JSON.parse(r.body).data.some((m: { id: string }) => m.id === check.lists_model));
        }
      }
    });
  }
});

/** A random engine API key, as the supervisor would make one. */
function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return `ek-${btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, "x")}`;
}

/** What a request to a fake engine answers, as [status, body]. */
async function answer(
  e: Engine,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<[number, string] | null> {
  const r = await e.request(path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return r === null ? null : [r.status, r.body];
}

const CHAT = { model: "fake-model", messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
const UNAUTHORIZED: [number, string] = [401, '{"error":"Unauthorized"}'];

Deno.test("vLLM with VLLM_API_KEY: /v1 needs the key, /health, /metrics and the rest stay open, the key is never logged", async () => {
  const port = freePort();
  const key = randomKey();
  const cmd = withApiKey(vllmPlugin.command(launch({ port })), vllmPlugin.api_key!, key);
  assertOk(!cmd.argv.includes(key), "vLLM takes its key from the environment, never argv");
  await withEngine(cmd.argv, { ...cmd.env, FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
    await until(
      "/health 200",
      () => e.request("/health").then((r) => r?.status === 200 || undefined),
      POLL,
    );
    const auth = { authorization: `Bearer ${key}` };
    assertEquals(await answer(e, "/v1/chat/completions", {}, CHAT), UNAUTHORIZED);
    assertEquals(await answer(e, "/v1/models"), UNAUTHORIZED);
    assertEquals(await answer(e, "/v1/models", { authorization: "Bearer wrong" }), UNAUTHORIZED);
    // The middleware runs before routing: unknown paths under /v1 are 401 too.
    assertEquals(await answer(e, "/v1/nowhere"), UNAUTHORIZED);
    assertEquals((await answer(e, "/v1/nowhere", auth))?.[0], 404);
    const chat = await answer(e, "/v1/chat/completions", auth, CHAT);
    assertEquals(chat?.[0], 200);
    assertEquals(JSON.parse(chat![1]).object, "chat.completion");
    assertEquals((await answer(e, "/v1/models", auth))?.[0], 200);
    for (const open of ["/health", "/metrics", "/version", "/ping"]) {
      assertEquals((await answer(e, open))?.[0], 200, open);
    }
    assertEquals((await answer(e, "/nowhere"))?.[0], 404);
    await e.waitForLog('"POST /v1/chat/completions HTTP/1.1" 200');
    assertStringIncludes(e.log, '"GET /v1/models HTTP/1.1" 401');
    assertStringIncludes(
      e.log,
      "API key required (1 from VLLM_API_KEY) on paths starting with /v1",
    );
    assertOk(!e.log.includes(key), "the key must not appear in the fake's output");
  });
});

Deno.test("vLLM with --api-key: any of its keys, never logged, and 'api_key': '***' in non-default args", async () => {
  const port = freePort();
  const [k1, k2] = [randomKey(), randomKey()];
  await withEngine(
    vllmArgv(port, ["--api-key", k1, k2]),
    { FAKE_ENGINE_LOAD_SECONDS: "0", VLLM_API_KEY: "ignored-when-the-flag-is-given" },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      for (const k of [k1, k2]) {
        assertEquals((await answer(e, "/v1/models", { authorization: `Bearer ${k}` }))?.[0], 200);
      }
      assertEquals(
        await answer(e, "/v1/models", { authorization: "Bearer ignored-when-the-flag-is-given" }),
        UNAUTHORIZED,
      );
      assertStringIncludes(e.out, "'api_key': '***'");
      assertStringIncludes(e.out, "--api-key *** ***");
      for (const k of [k1, k2, "ignored-when-the-flag-is-given"]) {
        assertOk(!e.log.includes(k), `${k} must not appear in the fake's output`);
      }
    },
  );
});

Deno.test("SGLang with --api-key: all but /health and /metrics need the key, Bearer or x-api-key; never logged", async () => {
  const port = freePort();
  const key = randomKey();
  const cmd = withApiKey(sglangPlugin.command(launch({ port })), sglangPlugin.api_key!, key);
  assertEquals(cmd.argv.slice(-2), ["--api-key", key]);
  await withEngine(cmd.argv, { ...cmd.env, FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
    // /health answers without a key, 503 while warming up, then 200.
    await until(
      "/health 200",
      () => e.request("/health").then((r) => r?.status === 200 || undefined),
      POLL,
    );
    assertEquals((await answer(e, "/health_generate"))?.[0], 200);
    assertEquals((await answer(e, "/metrics"))?.[0], 200);
    for (const path of ["/v1/models", "/get_model_info", "/nowhere"]) {
      assertEquals(await answer(e, path), UNAUTHORIZED, path);
    }
    assertEquals(await answer(e, "/v1/chat/completions", {}, CHAT), UNAUTHORIZED);
    const credentials: Record<string, string>[] = [
      { authorization: `Bearer ${key}` },
      { "x-api-key": key },
    ];
    for (const auth of credentials) {
      assertEquals((await answer(e, "/v1/chat/completions", auth, CHAT))?.[0], 200);
      assertEquals((await answer(e, "/v1/models", auth))?.[0], 200);
    }
    assertEquals((await answer(e, "/nowhere", { authorization: `Bearer ${key}` }))?.[0], 404);
    await e.waitForLog('"POST /v1/chat/completions HTTP/1.1" 200');
    assertStringIncludes(e.log, "API key required (1 from --api-key) on every path but");
    assertOk(!e.log.includes(key), "the key must not appear in the fake's output");
  });
});

Deno.test("FAKE_ENGINE_LEAK_API_KEY=1 prints the key where the real engines do, to test scrubbing", async () => {
  const port = freePort();
  const key = randomKey();
  const cmd = withApiKey(sglangPlugin.command(launch({ port })), sglangPlugin.api_key!, key);
  await withEngine(
    cmd.argv,
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_LEAK_API_KEY: "1" },
    port,
    async (e) => {
      await e.waitForLog("server_args=ServerArgs(");
      assertStringIncludes(e.err, `api_key='${key}')`);
      // The fake's own argv line stays redacted.
      assertStringIncludes(e.err, "--api-key ***");
    },
  );
  const vPort = freePort();
  await withEngine(
    vllmArgv(vPort, ["--api-key", key]),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_LEAK_API_KEY: "1" },
    vPort,
    async (e) => {
      await e.waitForLog("non-default args:");
      assertStringIncludes(e.out, `'api_key': ['${key}']`);
    },
  );
});

Deno.test("a taken port or too few visible GPUs exit 1 with the engine's error", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  try {
    await withEngine(vllmArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(e.out, "address already in use");
    });
  } finally {
    listener.close();
  }
  const p = freePort();
  await withEngine(
    ["vllm", "serve", "org/fake-model-8b", "--host", "127.0.0.1", "--port", String(p), "-tp", "2"],
    { FAKE_ENGINE_LOAD_SECONDS: "0", CUDA_VISIBLE_DEVICES: "3" },
    p,
    async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(e.out, "needs 2 GPU(s)");
    },
  );
});

const realPython = (() => {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (dir !== "" && Deno.statSync(`${dir}/python3`).isFile) return true;
    } catch {
      // Not here.
    }
  }
  return false;
})();

Deno.test({
  name: "the python3 shim runs the real python3 for anything but sglang.launch_server",
  ignore: !realPython,
  fn: async () => {
    await withEngine(
      [
        "python3",
        "-c",
        "import os, sys; print('real', sys.version_info[0]); print(os.environ['PATH'])",
      ],
      {},
      1,
      async (e) => {
        assertEquals((await e.exit()).code, 0, e.err);
        assertOk(e.out.startsWith("real 3\n"), e.out);
        assertOk(
          !e.out.split("\n")[1].split(":").includes(BIN),
          "the shim's directory is taken off PATH",
        );
      },
    );
  },
});

Deno.test("the python3 shim never runs itself again when no other python3 is on PATH", async () => {
  await withEngine(
    ["python3", "-c", "print(1)"],
    { PATH: `${BIN}:${BIN}/.:/nonexistent` },
    1,
    async (e) => {
      assertEquals((await e.exit()).code, 127);
      assertStringIncludes(e.err, "python3: not found");
    },
  );
});

Deno.test("vLLM with a prefix cache: a repeated conversation is served from cache, and the counters say so", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    {
      FAKE_ENGINE_LOAD_SECONDS: "0",
      FAKE_ENGINE_TOKENS: "2",
      FAKE_ENGINE_TOKEN_DELAY_MS: "0",
      FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "1000",
    },
    port,
    async (e) => {
      await until(
        "/health 200",
        () => e.request("/health").then((r) => r?.status === 200 || undefined),
        POLL,
      );
      const messages = [
        { role: "system", content: "You are a helpful assistant. ".repeat(20) },
        { role: "user", content: "Plan a trip to Lisbon." },
      ];
      const cached = async () => {
        const r = await e.post("/v1/chat/completions", { model: "fake-model", messages });
        assertEquals(r?.status, 200);
        const usage = JSON.parse(r!.body).usage;
        return [usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens];
      };
      const [tokens, first] = await cached();
      assertEquals(first, 0, "nothing cached at first");
      const [, second] = await cached();
      // Every full block of 16 tokens is found the second time.
      assertEquals(second, Math.floor(tokens / 16) * 16);
      const metrics = (await e.request("/metrics"))!.body;
      const hits = /^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$/m.exec(metrics);
      assertEquals(Number(hits?.[1]), second);
    },
  );
});
