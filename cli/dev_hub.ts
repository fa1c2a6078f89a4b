/**
 * The hub of `llmgw dev` (issue #25 item 1): without `HF_ENDPOINT` in its
 * environment, dev starts the fake hub (dev/fake_hub) as a child process,
 * by path (`deno run -A --no-config dev/fake_hub/fake_hub.ts`: production
 * code never imports dev/), on its port block's P+40 and P+41, with small
 * synthetic models for its samples whose `config.json` are the real
 * models', so the whole path (resolve a commit, read facts, download,
 * verify, start offline) runs on a machine with no network. The hub stops
 * with dev: by SIGTERM on every exit path, and by its own standard input
 * closing when dev is killed outright (`--stop-on-stdin-close`).
 *
 * With `HF_ENDPOINT` set, dev starts no hub and passes the operator's
 * endpoint and `HF_TOKEN` through. A `HF_TOKEN` set without `HF_ENDPOINT`
 * is passed to the fake hub as its one account, so it accepts it.
 *
 * @module
 */
import { join } from "node:path";
import { errorMessage } from "../text/error_message.ts";

/**
 * The synthetic models dev's samples (dev/samples) name, as the fake hub's
 * `--synthetic` takes them: the real repo id and `config.json` (its preset),
 * 64–128 MiB of files so dev starts in seconds, with an index that claims
 * the real model's weights (`claim=real`). So dev's facts are the real
 * model's: the memory estimate, `apply`'s refusals and the fake engines'
 * out-of-memory failures see 16 GB for the 8B and 410 GB for the 405B,
 * while the disk check (`insufficient_disk`) counts the revision's files,
 * what is really fetched, and dev places the same on any disk.
 */
export const DEV_HUB_MODELS: readonly string[] = [
  "meta-llama/Llama-3.1-8B-Instruct,preset=llama-3.1-8b-instruct,shards=2,bytes=64MiB,claim=real",
  "Qwen/Qwen2.5-7B-Instruct,preset=qwen2.5-7b-instruct,shards=2,bytes=64MiB,claim=real",
  "meta-llama/Llama-3.1-405B-Instruct-FP8,preset=llama-3.1-405b-instruct-fp8,shards=4,bytes=128MiB,claim=real",
];

/** How long the fake hub may take to make its models and listen. */
const START_TIMEOUT_MS = 60_000;
/** How long it may take to stop after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 5_000;

/** The hub dev's control plane and agents use. */
export interface DevHub {
  /** `HF_ENDPOINT` for them. */
  endpoint: string;
  /** `HF_TOKEN` for them, when the operator set one. */
  token?: string;
  /** The fake hub's process id; null when the operator's hub is used. */
  pid: number | null;
  /** The banner's line about it. */
  describe: string;
  /** Stops the fake hub (nothing for the operator's); safe to call twice. */
  stop(): Promise<void>;
  /** The environment the hub client reads (`HF_ENDPOINT`, `HF_TOKEN`, …), dev's hub first. */
  env(name: string): string | undefined;
}

/** The fake hub did not start; the message says why, with its own words. */
export class DevHubError extends Error {
  /** Builds one. */
  constructor(message: string) {
    super(message);
    this.name = "DevHubError";
  }
}

/** Where the fake hub listens, and the repository root its program is under. */
export interface DevHubPlace {
  /** The listen address (loopback). */
  host: string;
  /** The hub's port. */
  port: number;
  /** Its CDN's port. */
  cdnPort: number;
  /** The repository root (dev/fake_hub/fake_hub.ts is read from there). */
  root: string;
}

/**
 * The hub for dev: the operator's when `env` names `HF_ENDPOINT`, else a
 * fake hub started now and listening when this returns.
 *
 * @throws {DevHubError} When the fake hub exits or says nothing in time.
 */
export async function startDevHub(
  env: (name: string) => string | undefined,
  place: DevHubPlace,
): Promise<DevHub> {
  const token = env("HF_TOKEN")?.trim() || undefined;
  const endpoint = env("HF_ENDPOINT")?.trim();
  if (endpoint) {
    return {
      endpoint,
      token,
      pid: null,
      describe: `${endpoint} (HF_ENDPOINT)${token === undefined ? "" : ", with HF_TOKEN"}`,
      stop: () => Promise.resolve(),
      env,
    };
  }
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-config",
      join(place.root, "dev/fake_hub/fake_hub.ts"),
      "--host",
      place.host,
      "--port",
      String(place.port),
      "--cdn-port",
      String(place.cdnPort),
      "--stop-on-stdin-close",
      ...DEV_HUB_MODELS.flatMap((m) => ["--synthetic", m]),
    ],
    // The token reaches the fake hub through its environment, never argv (ps shows argv).
    // NO_COLOR: its errors, quoted in dev's, carry no terminal colours.
    env: { NO_COLOR: "1", ...(token === undefined ? {} : { FAKE_HUB_TOKENS: token }) },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Dev holds the pipe; the hub stops when it closes (dev gone, however it went).
  const stdin = child.stdin.getWriter();
  let stopped: Promise<void> | null = null;
  const stop = () =>
    stopped ??= (async () => {
      await stdin.close().catch(() => {});
      try {
        child.kill("SIGTERM");
      } catch {
        // Gone already.
      }
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // Gone meanwhile.
        }
      }, STOP_TIMEOUT_MS);
      await child.status;
      clearTimeout(timer);
    })();
  const stderr = collect(child.stderr);
  try {
    const listening = await firstJsonLine(child.stdout, child.status, START_TIMEOUT_MS);
    const hubEndpoint = String(listening.endpoint);
    const models = (listening.repos as { id: string }[] | undefined)?.length ?? 0;
    return {
      endpoint: hubEndpoint,
      token,
      pid: child.pid,
      describe: `${hubEndpoint} (the fake hub, pid ${child.pid}: ${models} synthetic models; ` +
        `set HF_ENDPOINT to use another)`,
      stop,
      env: (name) => name === "HF_ENDPOINT" ? hubEndpoint : env(name),
    };
  } catch (e) {
    await stop();
    // Its own words, without colours or a stack trace: what an operator can act on.
    const said = (await stderr).split("\n")
      .filter((l) => l.trim() !== "" && !/^\s+at /.test(l)).slice(-3).join("\n");
    throw new DevHubError(
      `the fake hub did not start: ${errorMessage(e)}${said ? `\n${said}` : ""}`,
    );
  }
}

/** The first line of `stream` that is the fake hub's `listening` JSON. */
async function firstJsonLine(
  stream: ReadableStream<Uint8Array>,
  exited: Promise<Deno.CommandStatus>,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no "listening" line within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
  });
  const gone = exited.then((s) => {
    throw new Error(`it exited with status ${s.code}`);
  });
  const read = (async () => {
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("it closed its output before listening");
      buffer += value;
      let newline: number;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        try {
          const parsed = JSON.parse(line);
          if (parsed?.fake_hub === "listening") return parsed as Record<string, unknown>;
        } catch {
          // Not its JSON line.
        }
      }
    }
  })();
  gone.catch(() => {});
  read.catch(() => {});
  try {
    return await Promise.race([read, timeout, gone]);
  } finally {
    clearTimeout(timer);
    // The rest of its output is read and dropped, so a full pipe never blocks it.
    read.then(async () => {
      while (!(await reader.read()).done) {
        // Dropped.
      }
    }).catch(() => {});
  }
}

/** Everything `stream` says, as text, once it ends (bounded to its last 64 kB). */
async function collect(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  try {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      text = (text + chunk).slice(-65_536);
    }
  } catch {
    // The stream broke: what came is what there is.
  }
  return text;
}
