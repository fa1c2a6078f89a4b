/**
 * The gateway against REAL fake engines (dev/fake_engine/fake_engine.ts through the
 * `dev/fake_engine/bin/vllm` shim), for gateway/proxy*_test.ts: engines on free
 * loopback ports and a gateway over them.
 *
 * Every engine is its own process group (`detached: true`) and is SIGKILLed
 * by group in a `finally`.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { until } from "./until.ts";
import { type EndpointSpec, EndpointTable } from "../gateway/endpoints.ts";
import { type RunningGateway, startGateway } from "../gateway/server.ts";
import type { GatewayOptions } from "../gateway/app.ts";

const SHIMS = fileURLToPath(new URL("../dev/fake_engine/bin", import.meta.url));

/** A free loopback port (closed again, so a connection to it is refused). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A fake vLLM (or SGLang) on a free loopback port. */
export class Engine {
  readonly port = freePort();
  readonly url = `http://127.0.0.1:${this.port}`;
  readonly child: Deno.ChildProcess;
  constructor(
    readonly model: string,
    env: Record<string, string>,
    engine: "vllm" | "sglang" = "vllm",
  ) {
    const where = [
      "--served-model-name",
      model,
      "--host",
      "127.0.0.1",
      "--port",
      String(this.port),
    ];
    const [command, args] = engine === "vllm"
      ? [`${SHIMS}/vllm`, ["serve", `org/${model}`, ...where]]
      : [`${SHIMS}/python3`, [
        "-m",
        "sglang.launch_server",
        "--model-path",
        `org/${model}`,
        ...where,
      ]];
    this.child = new Deno.Command(command, {
      args,
      env: {
        PATH: `${SHIMS}:${Deno.env.get("PATH")}`,
        FAKE_ENGINE_LOAD_SECONDS: "0",
        FAKE_ENGINE_ACCESS_LOG: "0",
        ...env,
      },
      stdin: "null",
      stdout: "null",
      stderr: "null",
      detached: true,
    }).spawn();
  }
  spec(replica_id: string): EndpointSpec {
    return { model: this.model, replica_id, url: this.url };
  }
  async ready(): Promise<void> {
    // A refused connection is "not listening yet": until retries it.
    await until(`the engine on ${this.port} to answer /health`, async () => {
      const r = await fetch(`${this.url}/health`);
      await r.body?.cancel();
      return r.ok;
    }, { timeoutMs: 20_000 });
  }
  async running(): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const m = /^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(text);
    return Number(m?.[1] ?? NaN);
  }
  kill(): void {
    try {
      Deno.kill(-this.child.pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

/** Starts engines and a gateway over them; kills and closes everything after `fn`. */
export async function withGateway(
  engines: { model: string; env?: Record<string, string>; engine?: "vllm" | "sglang" }[],
  setup: (engines: Engine[], table: EndpointTable) => void,
  options: GatewayOptions & { random?: () => number },
  fn: (gw: RunningGateway, engines: Engine[], table: EndpointTable) => Promise<void>,
): Promise<void> {
  const started: Engine[] = [];
  let gw: RunningGateway | undefined;
  try {
    for (const e of engines) started.push(new Engine(e.model, e.env ?? {}, e.engine));
    await Promise.all(started.map((e) => e.ready()));
    const table = new EndpointTable({ random: options.random });
    setup(started, table);
    gw = startGateway(table, { hostname: "127.0.0.1", port: 0, ...options });
    await fn(gw, started, table);
  } finally {
    await gw?.close();
    for (const e of started) e.kill();
    await Promise.all(started.map((e) => e.child.status));
  }
}

/** POSTs `body` (JSON unless a string) to the gateway's `path`. */
export function post(gw: RunningGateway, path: string, body: unknown, init: RequestInit = {}) {
  return fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

/** A chat completion request for `model`. */
export const chat = (model: string, stream = false) => ({
  model,
  stream,
  messages: [{ role: "user", content: "hello" }],
});
