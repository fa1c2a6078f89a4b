/**
 * What the agent's engine proxy (agent/engine_proxy.ts, design §11.2) adds to
 * a request, against the direct path to the engine, in one run.
 *
 * Three kinds of process, as in production, all on loopback:
 *
 * - the engine: bench/instant_upstream.ts, which answers a chat completion at
 *   once (a whole JSON answer, or with `"stream": true` two SSE events);
 * - the proxy: `engineProxy` served by `Deno.serve`, as the agent serves it,
 *   in its own process (`proxy` role below). A second proxy process
 *   (`passthrough`) serves bare `fetch` with no checks and returns fetch's
 *   response as is: the floor of any fetch-based proxy in Deno, so what is
 *   left between it and the engine proxy is the engine proxy's own work;
 * - the load generator: this script's main role, with the gateway's own
 *   keep-alive HTTP/1.1 client (gateway/upstream_client.ts), which costs
 *   less per request than `fetch`.
 *
 * Every cell (request kind × clients × path) runs once per round, bounded by
 * `--requests` and `--seconds`; the paths of a cell run back to back, in an
 * order that rotates by round, so load from elsewhere hits them alike. The
 * latency of a request is from sending it to the last body byte; every
 * answer is checked (status 200 and its body). The proxies' CPU time per
 * request comes from /proc/PID/stat.
 *
 * With `--variants`, two more engine proxy processes send on differently
 * (through the proxy's `fetch` option): `fetch` without the caller's signal,
 * and the gateway's HTTP/1.1 client; docs/benchmarks.md uses them to say
 * where the hop's time goes.
 *
 * Run: `deno run -A bench/engine_proxy_hop.ts [--rounds 3] [--seconds 2]
 * [--requests 20000] [--clients 1,64] [--variants]`: per cell and round at
 * most that many requests and seconds. Prints a markdown table.
 *
 * @module
 */
import { engineProxy, SHARD_HEADER } from "../agent/engine_proxy.ts";
import { relayBody } from "../gateway/relay.ts";
import { UpstreamClient, type UpstreamRequest } from "../gateway/upstream_client.ts";

const TOKEN = "llmgw_proxy_bench_0123456789abcdef0123";
const ENGINE_KEY = "bench-engine-key";
const SHARD = "bench-r0-s0";
const here = new URL(".", import.meta.url);

/** A bad option, or a process that does not answer as it should. */
class BenchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BenchError";
  }
}

// ---------------------------------------------------------------- proxy roles

/** The engine proxy's ways of sending on (`--variants`), through its `fetch` option. */
const SENDERS: Record<string, (input: string, init: RequestInit) => Promise<Response>> = {
  // What the agent runs.
  fetch: (input, init) => fetch(input, init),
  // Without the caller's signal (the proxy still reads req.signal): what wiring it costs.
  "fetch-no-signal": (input, init) => fetch(input, { ...init, signal: undefined }),
  // The gateway's keep-alive HTTP/1.1 client and relay instead of fetch.
  "own-client": async (input, init) => {
    const url = new URL(input);
    const r = await ownClient.request({
      origin: url.origin,
      method: init.method ?? "GET",
      target: url.pathname + url.search,
      headers: new Headers(init.headers),
      body: new Uint8Array(await new Response(init.body).arrayBuffer()),
      signal: init.signal ?? undefined,
    });
    const body = r.body === null ? null : relayBody(r.body, { sse: false, onEnd() {} });
    return new Response(body, { status: r.status, headers: r.headers });
  },
};
const ownClient = new UpstreamClient();

function serveProxy(port: number, upstreamPort: number, sender: string): void {
  const send = SENDERS[sender];
  if (send === undefined) throw new BenchError(`Unknown sender ${sender}`);
  const handler = engineProxy({
    token: TOKEN,
    target: (id) => id === SHARD ? { port: upstreamPort, key: ENGINE_KEY } : null,
    fetch: send,
  });
  Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, handler);
}

function servePassthrough(port: number, upstreamPort: number): void {
  const origin = `http://127.0.0.1:${upstreamPort}`;
  Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, (req) => {
    const url = new URL(req.url);
    return fetch(origin + url.pathname, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
  });
}

// ------------------------------------------------------------ load generator

/** A path to the engine, as the load generator sees it. */
interface Path {
  name: string;
  port: number;
  headers: Headers;
  /** The process whose CPU time per request is reported, if any. */
  pid?: number;
}

type Kind = "plain" | "stream";

const enc = new TextEncoder();
const dec = new TextDecoder();
const BODIES: Record<Kind, Uint8Array> = {
  plain: enc.encode('{"model":"bench","messages":[{"role":"user","content":"hi"}]}'),
  stream: enc.encode('{"model":"bench","messages":[{"role":"user","content":"hi"}],"stream":true}'),
};
const LABELS: Record<Kind, string> = { plain: "chat", stream: "chat, stream" };
/** What a correct answer ends with. */
const ENDINGS: Record<Kind, string> = { plain: '"finish_reason":"stop"}]}', stream: "[DONE]\n\n" };

/** The measurements of one cell, summed over rounds. */
interface Cell {
  latenciesMs: number[];
  seconds: number;
  cpuSeconds: number;
}

function parseArgs(args: string[]) {
  const opts = { rounds: 3, seconds: 2, requests: 20_000, clients: [1, 64], variants: false };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i];
    if (flag === "--variants") {
      opts.variants = true;
      continue;
    }
    const value = args[++i];
    if (value === undefined) throw new BenchError(`Cannot parse ${flag}: value is missing`);
    const number = (name: string) => {
      const n = Number(value);
      if (!Number.isFinite(n) || n <= 0) {
        throw new BenchError(`Cannot parse ${name}: "${value}" is not a positive number`);
      }
      return n;
    };
    if (flag === "--rounds") opts.rounds = number(flag);
    else if (flag === "--seconds") opts.seconds = number(flag);
    else if (flag === "--requests") opts.requests = number(flag);
    else if (flag === "--clients") {
      opts.clients = value.split(",").map((c) => {
        const n = Number(c);
        if (!Number.isInteger(n) || n <= 0) {
          throw new BenchError(`Cannot parse --clients: "${c}" is not a positive integer`);
        }
        return n;
      });
    } else {
      throw new BenchError(
        `Unknown option ${flag} (--rounds, --seconds, --requests, --clients, --variants)`,
      );
    }
  }
  return opts;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close();
  return port;
}

/** CPU seconds (user + system) a process used so far, from /proc/PID/stat. */
function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime at USER_HZ 100
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** One request, to the last body byte; throws on a wrong answer. */
async function once(client: UpstreamClient, path: Path, kind: Kind): Promise<void> {
  const r: UpstreamRequest = {
    origin: `http://127.0.0.1:${path.port}`,
    method: "POST",
    target: "/v1/chat/completions",
    headers: path.headers,
    body: BODIES[kind],
  };
  const res = await client.request(r);
  let text = "";
  if (res.body !== null) {
    for (let c = await res.body.read(); !c.done; c = await res.body.read()) {
      text += dec.decode(c.value, { stream: true });
    }
  }
  if (res.status !== 200 || !text.endsWith(ENDINGS[kind])) {
    throw new BenchError(`${path.name}, ${kind}: status ${res.status}, body ${text.slice(0, 200)}`);
  }
}

/** `clients` loops of requests until `requests` are sent or `seconds` passed. */
async function load(
  client: UpstreamClient,
  path: Path,
  kind: Kind,
  clients: number,
  requests: number,
  seconds: number,
): Promise<Cell> {
  const latenciesMs: number[] = [];
  let started = 0;
  const cpu0 = path.pid === undefined ? 0 : cpuSeconds(path.pid);
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (started < requests && performance.now() < deadline) {
      started++;
      const t = performance.now();
      await once(client, path, kind);
      latenciesMs.push(performance.now() - t);
    }
  }));
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = path.pid === undefined ? 0 : cpuSeconds(path.pid) - cpu0;
  return { latenciesMs, seconds: elapsed, cpuSeconds: cpu };
}

/** Waits until `path` answers correctly, or its process ended, or 30 s passed. */
async function ready(client: UpstreamClient, path: Path, child: Deno.ChildProcess) {
  let exited = false;
  child.status.then(() => exited = true);
  const deadline = performance.now() + 30_000;
  for (;;) {
    try {
      return await once(client, path, "plain");
    } catch (e) {
      if (exited) throw new BenchError(`${path.name}: its process exited before answering`);
      if (performance.now() > deadline) {
        throw new BenchError(`${path.name}: no correct answer within 30 s (last: ${e})`);
      }
      await new Promise((r) => setTimeout(r, 50)); // poll until the process listens
    }
  }
}

function spawn(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...args],
    stdin: "null",
    stdout: "null",
    stderr: "inherit",
  }).spawn();
}

const ms = (v: number) => v.toFixed(3);
const ratio = (v: number) => `${v.toFixed(2)}×`;
const signed = (v: number) => `${v >= 0 ? "+" : "−"}${Math.abs(v).toFixed(3)}`;
const rate = (v: number) => Math.round(v).toLocaleString("en-US");

function loadavg(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

async function main(args: string[]): Promise<void> {
  const opts = parseArgs(args);
  const children: Deno.ChildProcess[] = [];
  const client = new UpstreamClient();
  try {
    const json = { "content-type": "application/json" };
    const direct = new Headers({ ...json, authorization: `Bearer ${ENGINE_KEY}` });
    const proxied = new Headers({
      ...json,
      authorization: `Bearer ${TOKEN}`,
      [SHARD_HEADER]: SHARD,
    });
    const up = freePort();
    const self = import.meta.filename!;
    // Each process's arguments, given the port it listens on.
    const proxy = (role: string, ...rest: string[]) => (port: number) => [
      self,
      role,
      String(port),
      String(up),
      ...rest,
    ];
    const specs: { name: string; args: (port: number) => string[]; headers: Headers }[] = [
      {
        name: "direct",
        args: (port) => [new URL("instant_upstream.ts", here).pathname, String(port)],
        headers: direct,
      },
      { name: "engine proxy", args: proxy("proxy", "fetch"), headers: proxied },
      { name: "bare fetch passthrough", args: proxy("passthrough"), headers: direct },
    ];
    if (opts.variants) {
      specs.push(
        {
          name: "engine proxy, fetch without signal",
          args: proxy("proxy", "fetch-no-signal"),
          headers: proxied,
        },
        {
          name: "engine proxy, gateway's HTTP/1.1 client",
          args: proxy("proxy", "own-client"),
          headers: proxied,
        },
      );
    }
    const paths: Path[] = [];
    for (const spec of specs) {
      const port = paths.length === 0 ? up : freePort();
      const child = spawn(spec.args(port));
      children.push(child);
      const path = { name: spec.name, port, headers: spec.headers, pid: child.pid };
      await ready(client, path, child);
      paths.push(path);
    }

    const kinds: Kind[] = ["plain", "stream"];
    // Warm-up (JIT, connection pools), not counted.
    for (const kind of kinds) {
      for (const p of paths) await load(client, p, kind, Math.max(...opts.clients), 5_000, 1);
    }
    const loadBefore = loadavg();
    const cells = new Map<string, Cell>();
    const key = (kind: Kind, clients: number, path: string) => `${kind}/${clients}/${path}`;
    for (let round = 0; round < opts.rounds; round++) {
      for (const kind of kinds) {
        for (const clients of opts.clients) {
          for (let i = 0; i < paths.length; i++) {
            const p = paths[(i + round) % paths.length];
            const got = await load(client, p, kind, clients, opts.requests, opts.seconds);
            const k = key(kind, clients, p.name);
            const sum = cells.get(k) ?? { latenciesMs: [], seconds: 0, cpuSeconds: 0 };
            for (const l of got.latenciesMs) sum.latenciesMs.push(l);
            sum.seconds += got.seconds;
            sum.cpuSeconds += got.cpuSeconds;
            cells.set(k, sum);
          }
        }
      }
    }

    console.log(
      `${opts.rounds} rounds, each cell ≤${opts.requests} requests and ≤${opts.seconds} s a round; ` +
        `load average before ${loadBefore}, after ${loadavg()}\n`,
    );
    console.log(
      "| request | clients | path | requests | req/s | p50 ms | p99 ms | req/s ÷ direct " +
        "| p50 ÷ direct | added p50 ms | added p99 ms | CPU µs/req of its server |",
    );
    console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (const kind of kinds) {
      for (const clients of opts.clients) {
        const stats = paths.map((p) => {
          const c = cells.get(key(kind, clients, p.name))!;
          const sorted = c.latenciesMs.toSorted((a, b) => a - b);
          return {
            n: sorted.length,
            rps: sorted.length / c.seconds,
            p50: percentile(sorted, 50),
            p99: percentile(sorted, 99),
            cpu: (c.cpuSeconds / sorted.length) * 1e6,
          };
        });
        const d = stats[0];
        stats.forEach((s, i) => {
          const rel = i === 0 ? ["", "", "", ""] : [
            ratio(s.rps / d.rps),
            ratio(s.p50 / d.p50),
            signed(s.p50 - d.p50),
            signed(s.p99 - d.p99),
          ];
          console.log(
            `| ${LABELS[kind]} | ${clients} | ${paths[i].name} | ${s.n} | ${rate(s.rps)} | ${
              ms(s.p50)
            } ` +
              `| ${ms(s.p99)} | ${rel.join(" | ")} | ${s.cpu.toFixed(0)} |`,
          );
        });
      }
    }
  } finally {
    client.close();
    for (const c of children) {
      try {
        c.kill("SIGTERM");
      } catch {
        // Already gone.
      }
    }
    await Promise.all(children.map((c) => c.status));
  }
}

if (import.meta.main) {
  // Roles: `proxy PORT UPSTREAM_PORT SENDER`, `passthrough PORT UPSTREAM_PORT`, or the driver.
  const [role, port, upstreamPort] = Deno.args;
  if (role === "proxy") serveProxy(Number(port), Number(upstreamPort), Deno.args[3]);
  else if (role === "passthrough") servePassthrough(Number(port), Number(upstreamPort));
  else {
    try {
      await main(Deno.args);
    } catch (e) {
      if (!(e instanceof BenchError)) throw e;
      console.error(`engine_proxy_hop: ${e.message}`);
      Deno.exit(1);
    }
  }
}
