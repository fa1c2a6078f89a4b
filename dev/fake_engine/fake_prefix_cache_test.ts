/**
 * Tests of the fake engine's prefix-cache, TTFT and load model
 * (dev/fake_engine/fake_prefix_cache.ts): table tests of each piece, and fast-check
 * properties of the cache (bounded, prefix-closed, chained), the TTFT model
 * (monotone), the load model (bounded, first come first served) and the
 * metrics text (valid exposition format).
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertThrows } from "../../tests/assert.ts";
import { lintExposition, parseExposition } from "../../tests/prometheus_lint.ts";
import {
  CHARS_PER_TOKEN,
  EngineLoad,
  PrefixCache,
  PrefixCacheKnobError,
  type PrefixCacheKnobs,
  type PrefixCacheStats,
  promptBlocks,
  readPrefixCacheKnobs,
  ttftMs,
} from "./fake_prefix_cache.ts";
import { loadMetricsText, type LoadState, loadState } from "./fake_load_metrics.ts";

/** `n` code units of text from `ch` repeated. */
function fill(ch: string, n: number): string {
  return ch.repeat(n);
}

/** Code units two strings share at their start. */
function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** A cache big enough never to evict in these tests. */
function bigCache(blockTokens = 16): PrefixCache {
  return new PrefixCache({ capacityBlocks: 1_000_000, blockTokens });
}

/** Chars in one block of default size. */
const BLOCK_CHARS = 16 * CHARS_PER_TOKEN;

// ---------------------------------------------------------------------------
// Blocks

Deno.test("promptBlocks: tokens of four code units, full blocks of whole tokens only", () => {
  const cases: [string | number[], number, number, number][] = [
    // [prompt, blockTokens, tokens, full blocks]
    ["", 16, 0, 0],
    [fill("a", 63), 16, 16, 0], // 16 tokens, but the last is three units: not a full block.
    [fill("a", 64), 16, 16, 1],
    [fill("a", 65), 16, 17, 1],
    [fill("a", 128), 16, 32, 2],
    ["abcdefg", 1, 2, 1],
    ["abcdefgh", 1, 2, 2],
    [Array.from({ length: 33 }, (_, i) => i), 16, 33, 2],
    [[2 ** 40, -1, 7], 1, 3, 3],
  ];
  for (const [prompt, bt, tokens, blocks] of cases) {
    const p = promptBlocks(prompt, bt);
    const name = `${JSON.stringify(prompt).slice(0, 20)} / ${bt}`;
    assertEquals([p.tokens, p.ids.length, p.blockTokens], [tokens, blocks, bt], name);
    assertEquals(promptBlocks(prompt, bt), p, `${name}: deterministic`);
    for (const id of p.ids) assertOk(/^[0-9a-f]{16}$/.test(id), `${name}: id ${id}`);
  }
  // Text and token ids never share a block, even for "equal" content.
  assertOk(promptBlocks("\u0001".repeat(4), 1).ids[0] !== promptBlocks([1, 1, 1, 1], 4).ids[0]);
  assertThrows(() => promptBlocks("abc", 0), RangeError, "blockTokens 0");
  assertThrows(() => promptBlocks([1, 1.5], 1), RangeError, "token 1 (1.5)");
  assertThrows(() => promptBlocks([1, Number.NaN], 4), RangeError, "token 1");
});

Deno.test("promptBlocks: a text's blocks are a prefix of any longer text's that it starts", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: "binary", maxLength: 400 }),
      fc.string({ unit: "binary", maxLength: 400 }),
      fc.integer({ min: 1, max: 20 }),
      (a, b, bt) => {
        const short = promptBlocks(a, bt);
        const long = promptBlocks(a + b, bt);
        assertEquals(short.ids.length, Math.floor(a.length / (bt * CHARS_PER_TOKEN)));
        assertEquals(long.ids.slice(0, short.ids.length), short.ids);
      },
    ),
  );
});

Deno.test("promptBlocks: ids are chained, so after one block differs every later one does", () => {
  const block = fc.string({ unit: "grapheme-ascii", minLength: 16, maxLength: 16 });
  fc.assert(
    fc.property(
      fc.array(block, { maxLength: 4 }),
      block,
      block,
      fc.array(block, { minLength: 1, maxLength: 4 }),
      (prefix, x, y, suffix) => {
        fc.pre(x !== y);
        const p = promptBlocks([...prefix, x, ...suffix].join(""), 4);
        const q = promptBlocks([...prefix, y, ...suffix].join(""), 4);
        const n = prefix.length;
        assertEquals(p.ids.slice(0, n), q.ids.slice(0, n));
        for (let i = n; i < p.ids.length; i++) assertOk(p.ids[i] !== q.ids[i], `block ${i}`);
      },
    ),
  );
});

// ---------------------------------------------------------------------------
// The cache

Deno.test("PrefixCache: the same text at another position misses", () => {
  const a = fill("a", BLOCK_CHARS);
  const b = fill("b", BLOCK_CHARS);
  const ab = promptBlocks(a + b);
  assertOk(ab.ids[1] !== promptBlocks(b).ids[0]);
  const cache = bigCache();
  cache.insert(ab);
  assertEquals(
    [cache.peek(promptBlocks(b)), cache.peek(promptBlocks(a)), cache.peek(ab)],
    [0, 1, 2],
  );
  assertEquals(cache.peek(promptBlocks(b + a)), 0);
});

Deno.test("PrefixCache: a repeated prompt hits all its full blocks", () => {
  fc.assert(
    fc.property(
      fc.string({ unit: "binary", maxLength: 2000 }),
      fc.integer({ min: 1, max: 32 }),
      (text, bt) => {
        const p = promptBlocks(text, bt);
        const cache = bigCache(bt);
        assertEquals(cache.lookup(p), { hitBlocks: 0, cachedTokens: 0, uncachedTokens: p.tokens });
        cache.insert(p);
        const cached = p.ids.length * bt;
        assertEquals(cache.lookup(p), {
          hitBlocks: p.ids.length,
          cachedTokens: cached,
          uncachedTokens: p.tokens - cached,
        });
        assertOk(p.tokens - cached < bt + 1, "only the partial last block is computed again");
      },
    ),
  );
});

Deno.test("PrefixCache: a shared system prompt hits exactly the shared full blocks", () => {
  // As the fake joins chat messages: their contents, separated by spaces.
  const chat = (...contents: string[]) => contents.join(" ");
  const system = fill("You are a helpful assistant. ", 7).slice(0, 200); // 3 blocks and 8 units.
  const cache = bigCache();
  cache.insert(promptBlocks(chat(system, "Hello, how are you?")));
  const other = cache.lookup(promptBlocks(chat(system, "What is the weather in Paris today?")));
  assertEquals([other.hitBlocks, other.cachedTokens], [3, 48]);

  fc.assert(
    fc.property(
      fc.string({ maxLength: 600 }),
      fc.string({ minLength: 1, maxLength: 300 }),
      fc.string({ minLength: 1, maxLength: 300 }),
      (sys, u1, u2) => {
        fc.pre(u1[0] !== u2[0]);
        const first = chat(sys, u1);
        const second = chat(sys, u2);
        const c = bigCache();
        c.insert(promptBlocks(first));
        const shared = Math.floor(commonPrefix(first, second) / BLOCK_CHARS);
        assertEquals(shared, Math.floor((sys.length + 1) / BLOCK_CHARS));
        assertEquals(c.lookup(promptBlocks(second)).hitBlocks, shared);
      },
    ),
  );
});

Deno.test("PrefixCache: least recently used first, a prompt's tail before its head", () => {
  // One token (four units) per block, three blocks at most.
  const cache = new PrefixCache({ capacityBlocks: 3, blockTokens: 1 });
  const p = (s: string) => promptBlocks(s, 1);
  const long = p("aaaabbbbccccdddd");
  const steps: [string, () => void, Record<string, number>][] = [
    ["a prompt longer than the cache keeps its head", () => cache.insert(long), {
      long: 3,
      x: 0,
    }],
    ["a new block evicts the oldest: the long prompt's tail", () => cache.insert(p("xxxx")), {
      long: 2,
      x: 1,
    }],
    ["a lookup refreshes what it finds", () => void cache.lookup(long), { long: 2, x: 1 }],
    ["so the next eviction takes the unused block", () => cache.insert(p("yyyy")), {
      long: 2,
      x: 0,
      y: 1,
    }],
  ];
  for (const [name, act, peeks] of steps) {
    act();
    assertOk(cache.size <= 3, name);
    assertEquals(cache.size, 3, name);
    const got = Object.fromEntries(
      Object.keys(peeks).map((k) => [k, cache.peek(k === "long" ? long : p(k.repeat(4)))]),
    );
    assertEquals(got, peeks, name);
  }
});

Deno.test("PrefixCache: bounded and prefix-closed under any sequence of requests", () => {
  // Prompts over a two-letter alphabet share many prefixes.
  const prompt = fc.string({ unit: fc.constantFrom("a", "b"), maxLength: 48 });
  const op = fc.record({ text: prompt, kind: fc.constantFrom("lookup", "insert", "request") });
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.integer({ min: 1, max: 3 }),
      fc.array(op, { maxLength: 60 }),
      (capacityBlocks, blockTokens, ops) => {
        const cache = new PrefixCache({ capacityBlocks, blockTokens });
        const seen = new Set<string>();
        let lookups = 0;
        for (const { text, kind } of ops) {
          const p = promptBlocks(text, blockTokens);
          seen.add(text);
          if (kind !== "insert") {
            cache.lookup(p);
            lookups++;
          }
          if (kind !== "lookup") {
            cache.insert(p);
            assertEquals(cache.peek(p), Math.min(p.ids.length, capacityBlocks));
          }
          assertOk(cache.size <= capacityBlocks, `size ${cache.size} > ${capacityBlocks}`);
          // Every block held has its whole prefix held: a prompt's held blocks lead it.
          for (const t of seen) {
            const q = promptBlocks(t, blockTokens);
            assertEquals(q.ids.filter((id) => cache.has(id)).length, cache.peek(q), t);
          }
        }
        const s = cache.stats;
        assertEquals(s.requests, lookups);
        assertOk(s.hitRequests <= s.requests && s.hitBlocks <= s.queryBlocks);
        assertOk(s.hitTokens <= s.queryTokens);
        assertEquals(s.hitTokens, s.hitBlocks * blockTokens);
      },
    ),
  );
});

Deno.test("PrefixCache: counters in requests, blocks and tokens", () => {
  const cache = bigCache();
  const sys = fill("s", 2 * BLOCK_CHARS);
  const a = promptBlocks(sys + fill("a", 100)); // 57 tokens, 3 blocks.
  const b = promptBlocks(sys + fill("b", 10)); // 35 tokens, 2 blocks.
  cache.lookup(a);
  cache.insert(a);
  cache.lookup(b);
  cache.insert(b);
  cache.lookup(a);
  const want: PrefixCacheStats = {
    requests: 3,
    hitRequests: 2,
    queryTokens: 57 + 35 + 57,
    hitTokens: 32 + 48,
    queryBlocks: 3 + 2 + 3,
    hitBlocks: 2 + 3,
  };
  assertEquals(cache.stats, want);
});

Deno.test("PrefixCache: refuses bad sizes and prompts cut for another block size", () => {
  assertThrows(
    () => new PrefixCache({ capacityBlocks: 0, blockTokens: 16 }),
    RangeError,
    "capacityBlocks 0",
  );
  assertThrows(
    () => new PrefixCache({ capacityBlocks: 8, blockTokens: 1.5 }),
    RangeError,
    "blockTokens 1.5",
  );
  const cache = bigCache(16);
  assertThrows(() => cache.lookup(promptBlocks("x", 8)), RangeError, "8-token blocks");
  assertThrows(() => cache.insert(promptBlocks("x", 32)), RangeError, "32-token blocks");
});

// ---------------------------------------------------------------------------
// Time to first token

Deno.test("ttftMs: base plus a cost per uncached token", () => {
  const cases: [number, number, number, number][] = [
    // [baseMs, perUncachedTokenMs, uncachedTokens, ms]
    [0, 0, 5000, 0],
    [5, 0, 5000, 5],
    [5, 0.5, 0, 5],
    [5, 0.5, 100, 55],
    [0, 2, 3, 6],
  ];
  for (const [baseMs, perUncachedTokenMs, n, ms] of cases) {
    assertEquals(
      ttftMs({ baseMs, perUncachedTokenMs }, n),
      ms,
      `${baseMs}+${perUncachedTokenMs}×${n}`,
    );
  }
  assertThrows(() => ttftMs({ baseMs: 0, perUncachedTokenMs: 1 }, -1), RangeError, "-1 tokens");
  assertThrows(() => ttftMs({ baseMs: 0, perUncachedTokenMs: 1 }, NaN), RangeError, "NaN");
});

Deno.test("ttftMs: never falls as the uncached part grows, and a cache hit makes it smaller", () => {
  const ms = fc.double({ min: 0, max: 1000, noNaN: true });
  fc.assert(
    fc.property(ms, ms, fc.nat(1_000_000), fc.nat(1_000_000), (baseMs, per, a, b) => {
      const s = { baseMs, perUncachedTokenMs: per };
      const [lo, hi] = a <= b ? [a, b] : [b, a];
      assertOk(ttftMs(s, lo) <= ttftMs(s, hi), `${lo} → ${hi}`);
      assertOk(ttftMs(s, lo) >= baseMs);
    }),
  );
  // End to end: the second identical request computes only its partial last block.
  const s = { baseMs: 2, perUncachedTokenMs: 0.1 };
  const p = promptBlocks(fill("q", 10 * BLOCK_CHARS + 20));
  const cache = bigCache();
  const first = ttftMs(s, cache.lookup(p).uncachedTokens);
  cache.insert(p);
  const second = ttftMs(s, cache.lookup(p).uncachedTokens);
  assertEquals([first, second], [ttftMs(s, 165), ttftMs(s, 5)]);
  assertOk(second < first);
});

// ---------------------------------------------------------------------------
// Load

Deno.test("EngineLoad: slots, a queue, and clients that leave", () => {
  const load = new EngineLoad(2, null);
  const t1 = load.arrive(10);
  const t2 = load.arrive(10);
  const t3 = load.arrive(10);
  assertEquals([load.running, load.waiting, load.isRunning(t3), load.kvUsage()], [2, 1, false, 1]);
  assertEquals(load.usedTokens, 20);
  assertEquals(load.finish(t1), [t3], "the slot goes to the first waiter");
  assertEquals(load.finish(t3), []);
  assertEquals([load.running, load.waiting, load.kvUsage(), load.usedBlocks], [1, 0, 0.5, 0]);
  load.arrive(1);
  const t5 = load.arrive(1);
  assertEquals(load.waiting, 1);
  assertEquals(load.finish(t5), [], "a waiter that leaves frees nothing");
  assertEquals([load.running, load.waiting], [2, 0]);
  assertThrows(() => load.finish(t5), RangeError, `request ${t5}`);
  assertThrows(() => load.finish(t2 + 100), RangeError, "not running or waiting");
  assertThrows(() => new EngineLoad(0, null), RangeError, "maxRunning 0");
  assertThrows(() => load.arrive(-1), RangeError, "-1 tokens");
});

Deno.test("EngineLoad: with a KV pool, requests wait for blocks, first come first served", () => {
  const load = new EngineLoad(10, { capacityBlocks: 4, blockTokens: 16 });
  const big = load.arrive(48); // 3 blocks.
  const two = load.arrive(32); // 2 blocks: 5 > 4, waits.
  const small = load.arrive(1); // Would fit, but waits behind the head.
  assertEquals([load.running, load.waiting, load.usedBlocks, load.kvUsage()], [1, 2, 3, 0.75]);
  assertEquals(load.finish(big), [two, small]);
  assertEquals([load.usedBlocks, load.usedTokens, load.kvUsage()], [3, 33, 0.75]);
  load.finish(two);
  load.finish(small);
  // A request bigger than the pool runs alone rather than never.
  const huge = load.arrive(16 * 10);
  assertEquals([load.isRunning(huge), load.kvUsage()], [true, 1]);
  assertEquals(load.isRunning(load.arrive(1)), false);
});

Deno.test("EngineLoad: bounded, first come first served, and its totals add up", () => {
  const op = fc.oneof(
    fc.record({ arrive: fc.nat(200) }),
    fc.record({ finish: fc.nat(1000) }),
  );
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 4 }),
      fc.option(
        fc.record({
          capacityBlocks: fc.integer({ min: 1, max: 20 }),
          blockTokens: fc.integer({ min: 1, max: 32 }),
        }),
      ),
      fc.array(op, { maxLength: 80 }),
      (maxRunning, pool, ops) => {
        const load = new EngineLoad(maxRunning, pool);
        const tokens = new Map<number, number>();
        const started: number[] = [];
        for (const o of ops) {
          if ("arrive" in o) {
            const t = load.arrive(o.arrive);
            tokens.set(t, o.arrive);
            if (load.isRunning(t)) started.push(t);
          } else {
            const live = [...tokens.keys()];
            if (live.length === 0) continue;
            const t = live[o.finish % live.length];
            tokens.delete(t);
            started.push(...load.finish(t));
          }
          const running = [...tokens.keys()].filter((t) => load.isRunning(t));
          assertEquals(load.running, running.length);
          assertEquals(load.waiting, tokens.size - running.length);
          assertOk(load.running <= maxRunning);
          assertOk(
            load.waiting === 0 || load.running === maxRunning ||
              (pool !== null && load.running > 0),
            "a request waits only for a slot or for blocks",
          );
          const used = running.reduce((n, t) => n + tokens.get(t)!, 0);
          assertEquals(load.usedTokens, used);
          if (pool !== null) {
            const blocks = running.reduce(
              (n, t) => n + Math.ceil(tokens.get(t)! / pool.blockTokens),
              0,
            );
            assertEquals(load.usedBlocks, blocks);
            assertOk(blocks <= pool.capacityBlocks || load.running === 1, "over the pool");
          }
          const usage = load.kvUsage();
          assertOk(usage >= 0 && usage <= 1, `usage ${usage}`);
        }
        for (let i = 1; i < started.length; i++) {
          assertOk(started[i - 1] < started[i], `started out of order: ${started}`);
        }
      },
    ),
  );
});

// ---------------------------------------------------------------------------
// Metrics

/** Lint problems other than the colon in every engine's metric names, which is theirs. */
function lint(text: string): string[] {
  return lintExposition(text).filter((p) => !p.includes("should not contain ':'"));
}

/** Each family's name and its one sample's labels and value. */
function samples(text: string): [string, string, Record<string, string>, number][] {
  return parseExposition(text).map((f) => {
    assertEquals(f.samples.length, 1, f.name);
    return [f.name, f.type, f.samples[0].labels, f.samples[0].value];
  });
}

const STATS: PrefixCacheStats = {
  requests: 4,
  hitRequests: 2,
  queryTokens: 300,
  hitTokens: 128,
  queryBlocks: 17,
  hitBlocks: 8,
};
const STATE: LoadState = { running: 2, waiting: 1, kvUsage: 0.5, usedTokens: 100, cache: STATS };

Deno.test("loadMetricsText: the engines' names, types and labels, by vLLM version", () => {
  const vl = { engine: "0", model_name: "llama" };
  const sl = { model_name: "llama" };
  const cases: [string, string, LoadState, [string, string, Record<string, string>, number][]][] = [
    ["vllm", "0.11.1", STATE, [
      ["vllm:num_requests_running", "gauge", vl, 2],
      ["vllm:num_requests_waiting", "gauge", vl, 1],
      ["vllm:kv_cache_usage_perc", "gauge", vl, 0.5],
      ["vllm:prefix_cache_queries_total", "counter", vl, 300],
      ["vllm:prefix_cache_hits_total", "counter", vl, 128],
    ]],
    ["vllm", "0.10.1", STATE, [
      ["vllm:num_requests_running", "gauge", vl, 2],
      ["vllm:num_requests_waiting", "gauge", vl, 1],
      ["vllm:kv_cache_usage_perc", "gauge", vl, 0.5],
      ["vllm:gpu_cache_usage_perc", "gauge", vl, 0.5],
      ["vllm:prefix_cache_queries_total", "counter", vl, 300],
      ["vllm:prefix_cache_hits_total", "counter", vl, 128],
      ["vllm:gpu_prefix_cache_queries_total", "counter", vl, 300],
      ["vllm:gpu_prefix_cache_hits_total", "counter", vl, 128],
    ]],
    ["vllm", "0.9.2", STATE, [
      ["vllm:num_requests_running", "gauge", vl, 2],
      ["vllm:num_requests_waiting", "gauge", vl, 1],
      ["vllm:gpu_cache_usage_perc", "gauge", vl, 0.5],
      ["vllm:gpu_prefix_cache_queries_total", "counter", vl, 300],
      ["vllm:gpu_prefix_cache_hits_total", "counter", vl, 128],
    ]],
    ["vllm", "0.11.1", { ...STATE, cache: null }, [
      ["vllm:num_requests_running", "gauge", vl, 2],
      ["vllm:num_requests_waiting", "gauge", vl, 1],
      ["vllm:kv_cache_usage_perc", "gauge", vl, 0.5],
    ]],
    ["sglang", "0.5.3", STATE, [
      ["sglang:num_running_reqs", "gauge", sl, 2],
      ["sglang:num_queue_reqs", "gauge", sl, 1],
      ["sglang:token_usage", "gauge", sl, 0.5],
      ["sglang:num_used_tokens", "gauge", sl, 100],
      ["sglang:cache_hit_rate", "gauge", sl, 128 / 300],
      ["sglang:cached_tokens_total", "counter", sl, 128],
    ]],
    ["sglang", "0.5.3", { ...STATE, cache: { ...STATS, queryTokens: 0, hitTokens: 0 } }, [
      ["sglang:num_running_reqs", "gauge", sl, 2],
      ["sglang:num_queue_reqs", "gauge", sl, 1],
      ["sglang:token_usage", "gauge", sl, 0.5],
      ["sglang:num_used_tokens", "gauge", sl, 100],
      ["sglang:cache_hit_rate", "gauge", sl, 0],
      ["sglang:cached_tokens_total", "counter", sl, 0],
    ]],
    ["sglang", "0.5.3", { ...STATE, cache: null }, [
      ["sglang:num_running_reqs", "gauge", sl, 2],
      ["sglang:num_queue_reqs", "gauge", sl, 1],
      ["sglang:token_usage", "gauge", sl, 0.5],
      ["sglang:num_used_tokens", "gauge", sl, 100],
    ]],
  ];
  for (const [engine, version, state, want] of cases) {
    const name = `${engine} ${version}${state.cache === null ? " without a cache" : ""}`;
    const text = loadMetricsText(engine as "vllm" | "sglang", version, "llama", state);
    assertEquals(samples(text), want, name);
    assertEquals(lint(text), [], name);
  }
  // prometheus_client writes floats.
  assertOk(loadMetricsText("vllm", "0.11.1", "m", STATE).includes(" 2.0\n"));
});

Deno.test("loadMetricsText: valid exposition text for any state and model name", () => {
  const count = fc.nat(1_000_000);
  const stats = fc.record({
    requests: count,
    hitRequests: count,
    queryTokens: count,
    hitTokens: count,
    queryBlocks: count,
    hitBlocks: count,
  });
  fc.assert(
    fc.property(
      fc.constantFrom("vllm" as const, "sglang" as const),
      fc.constantFrom("0.9.2", "0.10.0", "0.10.1", "0.11.1", "0.5.3", "1.0"),
      fc.string({ unit: "binary", minLength: 1, maxLength: 40 }),
      fc.record({
        running: count,
        waiting: count,
        kvUsage: fc.double({ min: 0, max: 1, noNaN: true }),
        usedTokens: count,
        cache: fc.option(stats),
      }),
      (engine, version, model, state) => {
        const text = loadMetricsText(engine, version, model, state);
        assertEquals(lint(text), []);
        for (const f of parseExposition(text)) {
          assertEquals(f.samples[0].labels.model_name, model, f.name);
          if (f.type === "counter") assertOk(f.name.endsWith("_total"), f.name);
        }
      },
    ),
  );
});

Deno.test("loadState: what the load and the cache hold", () => {
  const cache = bigCache();
  const load = new EngineLoad(1, { capacityBlocks: 10, blockTokens: 16 });
  const p = promptBlocks(fill("z", 2 * BLOCK_CHARS));
  cache.lookup(p);
  load.arrive(p.tokens + 8);
  load.arrive(4);
  assertEquals(loadState(load, cache), {
    running: 1,
    waiting: 1,
    kvUsage: 0.3,
    usedTokens: 40,
    cache: cache.stats,
  });
  assertEquals(loadState(load, null).cache, null);
});

// ---------------------------------------------------------------------------
// Knobs

Deno.test("readPrefixCacheKnobs: off by default, then what the variables say", () => {
  const cases: [Record<string, string>, { blockTokens?: number }, PrefixCacheKnobs][] = [
    [{}, {}, { cache: null, ttft: { baseMs: 0, perUncachedTokenMs: 0 } }],
    [{ FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "0", FAKE_ENGINE_BLOCK_TOKENS: "32" }, {}, {
      cache: null,
      ttft: { baseMs: 0, perUncachedTokenMs: 0 },
    }],
    [{ FAKE_ENGINE_PREFIX_CACHE_BLOCKS: " " }, {}, {
      cache: null,
      ttft: { baseMs: 0, perUncachedTokenMs: 0 },
    }],
    [{ FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "1000" }, {}, {
      cache: { capacityBlocks: 1000, blockTokens: 16 },
      ttft: { baseMs: 0, perUncachedTokenMs: 0 },
    }],
    [{ FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "1000" }, { blockTokens: 32 }, {
      cache: { capacityBlocks: 1000, blockTokens: 32 },
      ttft: { baseMs: 0, perUncachedTokenMs: 0 },
    }],
    [{ FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "1000", FAKE_ENGINE_BLOCK_TOKENS: "8" }, {
      blockTokens: 32,
    }, {
      cache: { capacityBlocks: 1000, blockTokens: 8 },
      ttft: { baseMs: 0, perUncachedTokenMs: 0 },
    }],
    [{ FAKE_ENGINE_TTFT_BASE_MS: "20", FAKE_ENGINE_TTFT_PER_TOKEN_MS: "0.05" }, {}, {
      cache: null,
      ttft: { baseMs: 20, perUncachedTokenMs: 0.05 },
    }],
  ];
  for (const [env, defaults, want] of cases) {
    assertEquals(readPrefixCacheKnobs((k) => env[k], defaults), want, JSON.stringify(env));
  }
});

Deno.test("readPrefixCacheKnobs: a bad value names its variable", () => {
  const cases: [string, string, string][] = [
    ["FAKE_ENGINE_PREFIX_CACHE_BLOCKS", "-1", "whole number ≥ 0"],
    ["FAKE_ENGINE_PREFIX_CACHE_BLOCKS", "1.5", "whole number ≥ 0"],
    ["FAKE_ENGINE_PREFIX_CACHE_BLOCKS", "lots", "whole number ≥ 0"],
    ["FAKE_ENGINE_PREFIX_CACHE_BLOCKS", "Infinity", "whole number ≥ 0"],
    ["FAKE_ENGINE_PREFIX_CACHE_BLOCKS", "1e300", "whole number ≥ 0"],
    ["FAKE_ENGINE_BLOCK_TOKENS", "0", "whole number ≥ 1"],
    ["FAKE_ENGINE_BLOCK_TOKENS", "16k", "whole number ≥ 1"],
    ["FAKE_ENGINE_TTFT_BASE_MS", "-0.5", "number ≥ 0"],
    ["FAKE_ENGINE_TTFT_PER_TOKEN_MS", "NaN", "number ≥ 0"],
  ];
  for (const [key, value, rule] of cases) {
    const env: Record<string, string> = { FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "10", [key]: value };
    assertThrows(
      () => readPrefixCacheKnobs((k) => env[k]),
      PrefixCacheKnobError,
      `${key} must be a ${rule}, got ${JSON.stringify(value)}`,
    );
  }
});
