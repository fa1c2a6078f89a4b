/**
 * The routing benchmark (issue #16): one seeded multi-turn chat and agent
 * trace (bench/chat_trace.ts) replayed through the real gateway to four
 * fake-engine replicas with a prefix cache each (dev/fake_engine/fake_prefix_cache.ts),
 * once per routing policy, in one invocation: random, least_outstanding,
 * prefix_affinity. Every run starts on fresh engines (empty caches).
 *
 * Per policy it reports:
 * - the prefix-cache hit rate: cached prompt tokens over prompt tokens, from
 *   each answer's `usage.prompt_tokens_details.cached_tokens`;
 * - time to first token, p50 and p99: from sending a streamed request to its
 *   first chunk, which the fake engine sends after its prefill (its time
 *   grows with the uncached part of the prompt);
 * - load balance, as max/mean over the replicas of: each replica's in-flight
 *   count averaged over the run (sampled every 20 ms), each replica's peak
 *   in-flight count, and each replica's number of requests.
 *
 * Run: `deno run -A bench/routing_policies.ts [--sessions 120] [--seed 42] [--cache-blocks 3000]`.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type EndpointSpec, EndpointTable } from "../gateway/endpoints.ts";
import { startGateway } from "../gateway/server.ts";
import type { RoutingPolicy } from "../deployment/schema.ts";
import { chatTrace, type TraceSession, turnMessages } from "./chat_trace.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    sessions: { type: "string", default: "120" },
    seed: { type: "string", default: "42" },
    "cache-blocks": { type: "string", default: "3000" },
    replicas: { type: "string", default: "4" },
  },
});
const positive = (name: string, v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`Cannot run routing_policies: --${name} must be a positive integer, got "${v}"`);
    Deno.exit(2);
  }
  return n;
};
const SESSIONS = positive("sessions", flags.sessions!);
const SEED = positive("seed", flags.seed!);
const CACHE_BLOCKS = positive("cache-blocks", flags["cache-blocks"]!);
const REPLICAS = positive("replicas", flags.replicas!);
const POLICIES: RoutingPolicy[] = ["random", "least_outstanding", "prefix_affinity"];
const FAKE = fileURLToPath(new URL("../dev/fake_engine/fake_engine.ts", import.meta.url));
const MODEL = "bench";

/** Engine settings: a prefill that costs by uncached token, so caching shows in TTFT. */
const ENGINE_ENV = {
  FAKE_ENGINE_LOAD_SECONDS: "0",
  FAKE_ENGINE_TOKENS: "16",
  FAKE_ENGINE_TOKEN_DELAY_MS: "4",
  FAKE_ENGINE_ACCESS_LOG: "0",
  FAKE_ENGINE_PREFIX_CACHE_BLOCKS: String(CACHE_BLOCKS),
  FAKE_ENGINE_TTFT_BASE_MS: "10",
  FAKE_ENGINE_TTFT_PER_TOKEN_MS: "0.05",
};

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Starts the fake engines; waits until each answers /health. */
async function startEngines(): Promise<{ specs: EndpointSpec[]; procs: Deno.ChildProcess[] }> {
  const procs: Deno.ChildProcess[] = [];
  const specs: EndpointSpec[] = [];
  for (let i = 0; i < REPLICAS; i++) {
    const port = freePort();
    procs.push(
      new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-config",
          FAKE,
          "vllm",
          "serve",
          "org/bench-model",
          "--served-model-name",
          MODEL,
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "--max-num-seqs",
          "32",
        ],
        env: ENGINE_ENV,
        stdout: "null",
        stderr: "null",
      }).spawn(),
    );
    specs.push({ model: MODEL, replica_id: `bench-r${i}`, url: `http://127.0.0.1:${port}` });
  }
  for (const s of specs) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const r = await fetch(`${s.url}/health`);
        await r.body?.cancel();
        if (r.ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the fake engine at ${s.url} did not start`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { specs, procs };
}

/** One streamed chat turn: time to first chunk, and the usage it reports. */
async function turn(
  gateway: string,
  s: TraceSession,
  t: number,
): Promise<{ ttftMs: number; prompt: number; cached: number; ok: boolean }> {
  const t0 = performance.now();
  const res = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: turnMessages(s, t),
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(60_000),
  });
  if (!res.ok || res.body === null) {
    await res.body?.cancel();
    return { ttftMs: 0, prompt: 0, cached: 0, ok: false };
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let ttftMs = -1;
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (ttftMs < 0) ttftMs = performance.now() - t0;
    text += decoder.decode(value, { stream: true });
  }
  const usageLine = text.split("\n").reverse().find((l) =>
    l.includes('"usage"') && l.startsWith("data: ")
  );
  const usage = usageLine === undefined ? null : JSON.parse(usageLine.slice(6)).usage;
  return {
    ttftMs,
    prompt: usage?.prompt_tokens ?? 0,
    cached: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    ok: usage !== null,
  };
}

/** The p-quantile of sorted numbers. */
function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function runPolicy(policy: RoutingPolicy, trace: TraceSession[]): Promise<string> {
  const { specs, procs } = await startEngines();
  const table = new EndpointTable();
  table.setEndpoints(specs, [MODEL], { [MODEL]: policy });
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0, log: () => {} });
  // Per replica: the sum of its in-flight samples (a time average) and its peak.
  const sums = new Map<string, number>();
  const peaks = new Map<string, number>();
  const sampler = setInterval(() => {
    for (const e of table.all()) {
      sums.set(e.key, (sums.get(e.key) ?? 0) + e.outstanding);
      peaks.set(e.key, Math.max(peaks.get(e.key) ?? 0, e.outstanding));
    }
  }, 20);
  try {
    const t0 = performance.now();
    const results: Awaited<ReturnType<typeof turn>>[] = [];
    await Promise.all(trace.map(async (s) => {
      await new Promise((r) => setTimeout(r, Math.max(0, s.startMs - (performance.now() - t0))));
      for (let t = 0; t < s.turns.length; t++) {
        results.push(await turn(gw.url, s, t));
        await new Promise((r) => setTimeout(r, s.turns[t].thinkMs));
      }
    }));
    const seconds = (performance.now() - t0) / 1000;
    const ok = results.filter((r) => r.ok);
    const prompt = ok.reduce((a, r) => a + r.prompt, 0);
    const cached = ok.reduce((a, r) => a + r.cached, 0);
    const ttft = ok.map((r) => r.ttftMs).sort((a, b) => a - b);
    const maxOverMean = (xs: number[]) =>
      Math.max(...xs) / (xs.reduce((a, b) => a + b, 0) / xs.length);
    const shares = table.all().map((e) => e.dispatched);
    return `| ${policy} | ${results.length} | ${results.length - ok.length} | ${
      (100 * cached / Math.max(1, prompt)).toFixed(1)
    }% | ${quantile(ttft, 0.5).toFixed(0)} ms | ${quantile(ttft, 0.99).toFixed(0)} ms | ${
      maxOverMean([...sums.values()]).toFixed(2)
    } | ${maxOverMean([...peaks.values()]).toFixed(2)} | ${maxOverMean(shares).toFixed(2)} | ${
      seconds.toFixed(0)
    } s |`;
  } finally {
    clearInterval(sampler);
    await gw.close();
    for (const p of procs) {
      try {
        p.kill("SIGKILL");
      } catch {
        // gone
      }
    }
    await Promise.all(procs.map((p) => p.status));
  }
}

const trace = chatTrace({ sessions: SESSIONS, seed: SEED });
const turns = trace.reduce((a, s) => a + s.turns.length, 0);
console.error(
  `routing_policies: ${trace.length} sessions, ${turns} turns, ${REPLICAS} replicas, ` +
    `${CACHE_BLOCKS} cache blocks each`,
);
const rows: string[] = [];
for (const policy of POLICIES) {
  rows.push(await runPolicy(policy, trace));
  console.error(rows.at(-1));
}
console.log(
  "| policy | requests | failed | cache hit rate | TTFT p50 | TTFT p99 | mean in-flight max/mean | peak in-flight max/mean | requests max/mean | run |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of rows) console.log(r);
