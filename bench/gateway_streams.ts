/**
 * Gateway memory with many concurrent open streams (design §16: thousands of
 * concurrent streams), beside the floor Deno itself sets, in one invocation:
 *
 * - **gateway**: the fake engine (long, slow streams) and the gateway
 *   (bench/gateway_fixed.ts) as processes; N streaming chat completions
 *   through the gateway.
 * - **relay**: the thinnest Deno proxy with the gateway's upstream client
 *   and relay (bench/proxy_variants.ts `own-relay`: no routing, keys or
 *   metrics) in front of the same engine: two sockets per stream, as the
 *   gateway holds.
 * - **floor**: a bare `Deno.serve` server (bench/minimal_stream_server.ts)
 *   in a process of its own, holding N SSE streams open, one small chunk
 *   every 100 ms; N streams straight to it.
 *
 * For each, once every stream has delivered its first chunk (and 2 s more),
 * the server's resident memory is read from /proc 15 times over 7.5 s (the
 * median and the least are printed: it moves with the GC), and before the
 * streams; last, after a full garbage collection (SIGUSR2, both servers run
 * with `--v8-flags=--expose-gc`: bench/gc_on_signal.ts), what the streams
 * hold alive.
 * One after the other, so neither shares the machine with the other's
 * streams. Every process is started under `ulimit -n` of the hard limit:
 * the gateway holds two sockets per stream.
 *
 * Run: `deno run -A bench/gateway_streams.ts [N] [all|both|gateway|relay|floor]`
 * (default 5000, all; both is gateway and floor).
 */
const N = Number(Deno.args[0] ?? 5000);
const which = Deno.args[1] ?? "all";
if (!Number.isInteger(N) || N < 1) {
  throw new Error(`Cannot parse the stream count: ${Deno.args[0]} is not a positive integer`);
}
if (!["all", "both", "gateway", "relay", "floor"].includes(which)) {
  throw new Error(
    `Cannot parse the target: ${which} is not one of all, both, gateway, relay, floor`,
  );
}
const ENGINE = 19501;
const GATEWAY = 19502;
const FLOOR = 19503;
const RELAY = 19504;
const SAMPLES = 15;
const root = new URL("../", import.meta.url).pathname;

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

async function waitUp(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/v1/models`);
      await r.body?.cancel();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`port ${port} never answered`);
}

/** `argv` in a process group of its own, with as many open files as the hard limit allows. */
function spawn(argv: string[], env: Record<string, string> = {}): Deno.ChildProcess {
  const quoted = argv.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(" ");
  return new Deno.Command("sh", {
    // `exec`: the pid is the server's own, for /proc and for the kill.
    args: ["-c", `ulimit -n "$(ulimit -Hn)"; exec ${quoted}`],
    env,
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
}

async function stop(procs: Deno.ChildProcess[]): Promise<void> {
  for (const p of procs) {
    try {
      Deno.kill(-p.pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
  await Promise.all(procs.map((p) => p.status));
}

interface Figures {
  open: number;
  failed: number;
  idle: number;
  /** The median RSS with the streams open. */
  loaded: number;
  /** The least. */
  least: number;
  /** After a full garbage collection. */
  collected: number;
}

/** Opens N streams to `port`, and reads `pid`'s RSS before and while they are open. */
async function measure(port: number, pid: number): Promise<Figures> {
  const aborts: AbortController[] = [];
  try {
    const idle = rssMiB(pid);
    let open = 0;
    const body = JSON.stringify({
      model: "bench",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    const results = await Promise.allSettled(Array.from({ length: N }, async () => {
      const ac = new AbortController();
      aborts.push(ac);
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read(); // the first chunk: the stream is open end to end
      open++;
      // Keep reading in the background so the stream stays live.
      (async () => {
        try {
          while (!(await reader.read()).done) { /* drain */ }
        } catch {
          // Aborted at the end.
        }
      })();
    }));
    await new Promise((r) => setTimeout(r, 2000));
    // RSS moves with the GC as the streams make garbage: SAMPLES reads, half
    // a second apart; the median and the least.
    const reads: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      reads.push(rssMiB(pid));
      await new Promise((r) => setTimeout(r, 500));
    }
    if (Deno.env.get("STREAMS_TRACE")) console.error(reads.map((r) => r.toFixed(0)).join(" "));
    reads.sort((a, b) => a - b);
    // And once more after a full collection: what the streams hold alive.
    Deno.kill(pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 1500));
    const collected = rssMiB(pid);
    return {
      collected,
      open,
      failed: results.filter((r) => r.status === "rejected").length,
      idle,
      loaded: reads[Math.floor(SAMPLES / 2)],
      least: reads[0],
    };
  } finally {
    for (const a of aborts) a.abort();
  }
}

function engineProcess(): Deno.ChildProcess {
  return spawn([
    `${root}dev/fake_engine/bin/vllm`,
    "serve",
    "org/bench",
    "--served-model-name",
    "bench",
    "--host",
    "127.0.0.1",
    "--port",
    String(ENGINE),
    "--tensor-parallel-size",
    "1",
    "--pipeline-parallel-size",
    "1",
    "--max-num-seqs",
    "1000000",
  ], {
    FAKE_ENGINE_LOAD_SECONDS: "0",
    FAKE_ENGINE_TOKENS: "600",
    FAKE_ENGINE_TOKEN_DELAY_MS: "100",
    FAKE_ENGINE_ACCESS_LOG: "0",
  });
}

async function gatewayRun(): Promise<Figures> {
  const engine = engineProcess();
  const gateway = spawn([
    Deno.execPath(),
    "run",
    "-A",
    "--v8-flags=--expose-gc",
    `${root}bench/gateway_fixed_gc.ts`,
    String(GATEWAY),
    `http://127.0.0.1:${ENGINE}`,
  ]);
  try {
    await waitUp(ENGINE);
    await waitUp(GATEWAY);
    return await measure(GATEWAY, gateway.pid);
  } finally {
    await stop([engine, gateway]);
  }
}

async function relayRun(): Promise<Figures> {
  const engine = engineProcess();
  const relay = spawn([
    Deno.execPath(),
    "run",
    "-A",
    "--v8-flags=--expose-gc",
    `${root}bench/proxy_variants.ts`,
    "own-relay",
    String(RELAY),
    `http://127.0.0.1:${ENGINE}`,
  ]);
  try {
    await waitUp(ENGINE);
    await waitUp(RELAY);
    return await measure(RELAY, relay.pid);
  } finally {
    await stop([engine, relay]);
  }
}

async function floorRun(): Promise<Figures> {
  const server = spawn([
    Deno.execPath(),
    "run",
    "-A",
    "--v8-flags=--expose-gc",
    `${root}bench/minimal_stream_server.ts`,
    String(FLOOR),
  ]);
  try {
    await waitUp(FLOOR);
    return await measure(FLOOR, server.pid);
  } finally {
    await stop([server]);
  }
}

const perStream = (f: Figures, rss = f.loaded) => (rss - f.idle) * 1024 / N;
const row = (name: string, f: Figures) =>
  `| ${name} | ${N} | ${f.open} | ${f.failed} | ${f.idle.toFixed(0)} MiB | ${
    f.loaded.toFixed(0)
  } MiB (least ${f.least.toFixed(0)}) | ${perStream(f).toFixed(1)} KiB (least ${
    perStream(f, f.least).toFixed(1)
  }) | ${f.collected.toFixed(0)} MiB | ${perStream(f, f.collected).toFixed(1)} KiB |`;

const runs = (name: string) =>
  which === "all" || which === name || (which === "both" && name !== "relay");
const gw = runs("gateway") ? await gatewayRun() : null;
const relay = runs("relay") ? await relayRun() : null;
const floor = runs("floor") ? await floorRun() : null;
console.log(
  "| server | streams | established | failed | RSS idle | RSS with the streams open, median | per stream, median | RSS after a full GC | per stream after a full GC |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
if (gw !== null) console.log(row("llmgw gateway", gw));
if (relay !== null) console.log(row("bare Deno relay (two sockets)", relay));
if (floor !== null) console.log(row("bare Deno.serve (one socket)", floor));
for (const [name, base] of [["relay", relay], ["floor", floor]] as const) {
  if (gw === null || base === null) continue;
  const ratio = (f: (x: Figures) => number) => (f(gw) / f(base)).toFixed(2);
  console.log(
    `gateway / ${name} per stream: ${ratio((x) => perStream(x))}× (median), ${
      ratio((x) => perStream(x, x.collected))
    }× (after a full GC)`,
  );
}
