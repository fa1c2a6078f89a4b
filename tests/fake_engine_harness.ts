/**
 * What the fake engine's tests share (dev/fake_engine/fake_engine*_test.ts): shard
 * launches like engines/launch.ts builds, the argv the shims pass on, and
 * {@link Engine}, a fake engine started as a real process through the shims
 * in dev/fake_engine/bin (PATH prefixed), with its output collected.
 *
 * Every process started here is its own process group (`detached: true`)
 * and {@link withEngine} SIGKILLs it by group in a `finally`, even when the
 * test fails. Waits poll with generous deadlines; nothing asserts how fast
 * anything is.
 *
 * @module
 */
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { killLeftovers, settleWithin } from "./proc_probe.ts";
import { VLLM_LOADING_PROGRESS } from "../engines/vllm.ts";
import { sglangPlugin } from "../engines/sglang.ts";
import { ENGINE_API_VERSION, type ShardLaunch } from "../engines/types.ts";

/** The shims' directory. */
export const BIN = new URL("../dev/fake_engine/bin", import.meta.url).pathname;
/** Generous upper bound for any wait on a fake engine (deno start + load). */
export const WAIT_MS = 30_000;

/** A shard launch like engines/launch.ts builds, for the plugins' command(). */
export function launch(o: {
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
export function fakeArgv(argv: string[]): string[] {
  if (argv[0] === "vllm") return ["vllm", ...argv.slice(1)];
  assertEquals(argv.slice(0, 3), ["python3", "-m", "sglang.launch_server"]);
  return ["sglang", ...argv.slice(3)];
}

/** A free loopback port (bound, read, released). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The environment of a fake engine: ours, minus knobs and GPU variables, PATH prefixed. */
export function engineEnv(extra: Record<string, string>): Record<string, string> {
  const env = Deno.env.toObject();
  for (const k of Object.keys(env)) {
    if (k.startsWith("FAKE_ENGINE_") || k === "CUDA_VISIBLE_DEVICES" || k === "VLLM_API_KEY") {
      delete env[k];
    }
  }
  return { ...env, PATH: `${BIN}:${env.PATH ?? ""}`, ...extra };
}

/** How the waits here poll: a deno process starts, then loads. */
export const POLL = { timeoutMs: WAIT_MS, intervalMs: 50 };

/** A fake engine process started through the shims, with its output collected. */
export class Engine {
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

  /** Waits until /health answers 200 (503 while loading, refused before it binds). */
  async waitHealthy(): Promise<void> {
    await until(
      "/health 200",
      () => this.request("/health").then((r) => r?.status === 200 || undefined),
      POLL,
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
export async function withEngine(
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

/** A `vllm serve` argv for the model "fake-model" on 127.0.0.1:`port`, then `extra`. */
export function vllmArgv(port: number, extra: string[] = []): string[] {
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

/** A `python3 -m sglang.launch_server` argv like {@link vllmArgv}'s, with `--enable-metrics`. */
export function sglangArgv(port: number, extra: string[] = []): string[] {
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
export function barFragments(stderr: string): string[] {
  return stderr.split(/[\r\n]/).filter((l) => l.includes("checkpoint shards"));
}

/** The SGLang plugin's loading-progress patterns. */
export const SGLANG_PROGRESS = sglangPlugin.probes(launch({ port: 1 })).loading_progress.map((p) =>
  new RegExp(p.regex)
);
/** The vLLM plugin's loading-progress patterns. */
export const VLLM_PROGRESS = VLLM_LOADING_PROGRESS.map((p) => new RegExp(p.regex));

/** A metric's value for the model "fake-model" from Prometheus text. */
export function metric(text: string, name: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) && line.includes('model_name="fake-model"')) {
      return Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return undefined;
}

/** Reads SSE text until `[DONE]` or the stream ends; returns the data payloads. */
export async function readAll(
  reader: ReadableStreamDefaultReader<string>,
  first = "",
): Promise<string[]> {
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
