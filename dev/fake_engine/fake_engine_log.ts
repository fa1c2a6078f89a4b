/**
 * The fake engine's log output (dev/fake_engine/fake_engine.ts) in each engine's
 * style: vLLM's `INFO MM-DD HH:MM:SS [file.py:line]` lines and
 * `(EngineCore_DP0 pid=N)` prefixes, SGLang's `[YYYY-MM-DD HH:MM:SS TP0]`
 * lines, uvicorn's lines and tqdm's weight-loading bar.
 *
 * @module
 */

import type { EngineConfig } from "./fake_engine_command.ts";

const encoder = new TextEncoder();

/** Writes all of `text` to `file`; a reader that has gone away loses it silently. */
export function writeAll(file: { writeSync(p: Uint8Array): number }, text: string): void {
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
export function vllmTime(d = new Date()): string {
  return `${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${
    pad2(d.getMinutes())
  }:${pad2(d.getSeconds())}`;
}

/** `YYYY-MM-DD HH:MM:SS`, SGLang's log time. */
export function sglangTime(d = new Date()): string {
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
export class Logger {
  #barOpen = false;
  /** Lines for `cfg`'s engine and rank; `progressMode` is FAKE_ENGINE_PROGRESS. */
  constructor(
    /** What the command line asked for: the engine's style and the rank's TP tag. */
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

  /** A bare stderr line, as tqdm's other bars (vLLM's "Capturing CUDA graphs") print in captured output. */
  stderrLine(text: string): void {
    this.#write("err", `${text}\n`);
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
