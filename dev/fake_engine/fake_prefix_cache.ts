/**
 * Test tooling: the fake engine's model of a prefix cache, its time to first
 * token and its load, so the gateway's prefix- and load-aware routing can be
 * measured against something that behaves like vLLM's automatic prefix
 * caching (design §1.4, §12). Pure and deterministic; the fake engine keeps
 * one {@link PrefixCache} and one {@link EngineLoad} per process (a replica).
 *
 * - Tokens: fixed chunks of {@link CHARS_PER_TOKEN} UTF-16 code units, the
 *   unit the fake already counts `usage.prompt_tokens` in, so the tokens the
 *   cache sees are the tokens it reports. Where tokens fall does not matter
 *   for a prefix cache: with chained hashes everything after the first
 *   difference misses, whatever the tokenizer.
 * - Blocks: {@link promptBlocks} cuts the tokens into blocks of
 *   `blockTokens` (vLLM's `--block-size`, default 16) and gives each full
 *   block an id hashed from its parent's id and its own tokens, as vLLM does:
 *   equal text at another position is another block, and a partial last block
 *   is never cached. A string prefix of a prompt gives a prefix of its blocks.
 * - Eviction: LRU over blocks. A request refreshes its blocks tail first, so
 *   a block is always more recent than its descendants and the tail goes
 *   before the prefix it hangs from (vLLM frees a request's blocks in reverse
 *   order; RadixAttention evicts leaves first). The cache is therefore always
 *   prefix-closed.
 * - TTFT: `baseMs + perUncachedTokenMs × uncachedTokens` ({@link ttftMs}).
 * - Load: running and waiting requests under the engine's concurrency limit,
 *   FIFO, and the KV blocks running requests hold ({@link EngineLoad}).
 * - Metrics: the engines' load gauges and cache counters in Prometheus text
 *   ({@link loadMetricsText}; engine reference §1.5, §2.4).
 *
 * Simplifications, on purpose: the cache and the running requests share
 * `capacityBlocks` but running requests' blocks are not pinned against
 * eviction; SGLang's radix tree matches at token granularity (page size 1),
 * the model at `blockTokens` for both engines so capacities compare; vLLM
 * recomputes the last token of a fully cached prompt, the model does not.
 *
 * No imports, so the fake_engine*.ts files, which import it, still run with `--no-config`.
 *
 * @module
 */

/** UTF-16 code units per token: the fake's `usage.prompt_tokens` is `ceil(length / 4)`. */
export const CHARS_PER_TOKEN = 4;

/** vLLM's default `--block-size`. */
export const DEFAULT_BLOCK_TOKENS = 16;

/** The engines the fake imitates. */
export type EngineFlavour = "vllm" | "sglang";

// ---------------------------------------------------------------------------
// Blocks

/** A prompt as the cache sees it. */
export interface PromptBlocks {
  /** The prompt's tokens, full blocks or not. */
  tokens: number;
  /** Tokens per block. */
  blockTokens: number;
  /** The ids of its full blocks, first block first; each id covers the whole prefix up to it. */
  ids: string[];
}

/** Hash lanes a chain starts from; text and token-id prompts start apart so they never meet. */
const TEXT_ROOT: readonly [number, number] = [0x9e3779b9, 0x7f4a7c15];
const IDS_ROOT: readonly [number, number] = [0x85ebca6b, 0xc2b2ae35];

/**
 * The blocks of a prompt: text (a completion's `prompt`, or the fake's text
 * of chat messages) cut into {@link CHARS_PER_TOKEN}-unit tokens, or token
 * ids as given. A text's last token counts toward a block only when it is
 * whole, so a text and any longer text it starts share all its blocks.
 */
export function promptBlocks(
  prompt: string | readonly number[],
  blockTokens: number = DEFAULT_BLOCK_TOKENS,
): PromptBlocks {
  if (!Number.isSafeInteger(blockTokens) || blockTokens < 1) {
    throw new RangeError(`Cannot cut a prompt into blocks: blockTokens ${blockTokens} is not ≥ 1`);
  }
  const text = typeof prompt === "string";
  if (!text) {
    const i = prompt.findIndex((id) => !Number.isSafeInteger(id));
    if (i >= 0) {
      throw new RangeError(
        `Cannot cut a prompt into blocks: token ${i} (${prompt[i]}) is not an integer`,
      );
    }
  }
  const tokens = text ? Math.ceil(prompt.length / CHARS_PER_TOKEN) : prompt.length;
  const unitsPerBlock = text ? blockTokens * CHARS_PER_TOKEN : blockTokens;
  const full = Math.floor(prompt.length / unitsPerBlock);
  let [h1, h2] = text ? TEXT_ROOT : IDS_ROOT;
  // Two multiplicative lanes make a 64-bit id: collisions are negligible at test sizes.
  const mix = (u: number) => {
    h1 = Math.imul(h1 ^ u, 0xcc9e2d51);
    h1 = (h1 << 15) | (h1 >>> 17);
    h2 = Math.imul(h2 ^ u, 0x1b873593);
    h2 = (h2 << 13) | (h2 >>> 19);
  };
  const ids: string[] = [];
  for (let b = 0; b < full; b++) {
    // The lanes carry over from the parent block: a block's id covers its whole prefix.
    for (let i = b * unitsPerBlock; i < (b + 1) * unitsPerBlock; i++) {
      if (typeof prompt === "string") {
        mix(prompt.charCodeAt(i));
      } else {
        const id = prompt[i];
        mix(id >>> 0);
        mix(Math.floor(id / 0x100000000) | 0);
      }
    }
    // Avalanche both lanes into each other, so nearby blocks get unrelated ids.
    h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b) ^ Math.imul(h2 ^ (h2 >>> 13), 0xc2b2ae35);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 0x85ebca6b) ^ Math.imul(h1 ^ (h1 >>> 13), 0xc2b2ae35);
    ids.push(hex(h1) + hex(h2));
  }
  return { tokens, blockTokens, ids };
}

function hex(n: number): string {
  return (n >>> 0).toString(16).padStart(8, "0");
}

// ---------------------------------------------------------------------------
// The cache

/** A prefix cache's size. */
export interface PrefixCacheSettings {
  /** Blocks it holds at most (≥ 1). */
  capacityBlocks: number;
  /** Tokens per block (≥ 1). */
  blockTokens: number;
}

/** What a lookup found. */
export interface CacheLookup {
  /** Leading blocks found: the match stops at the first miss. */
  hitBlocks: number;
  /** Prompt tokens those blocks hold. */
  cachedTokens: number;
  /** Prompt tokens to compute: the rest, partial last block included. */
  uncachedTokens: number;
}

/** Counters since the cache was made; tokens are what vLLM's and SGLang's counters count. */
export interface PrefixCacheStats {
  /** Lookups. */
  requests: number;
  /** Lookups that found at least one block. */
  hitRequests: number;
  /** Prompt tokens looked up (vLLM `prefix_cache_queries`). */
  queryTokens: number;
  /** Prompt tokens found (vLLM `prefix_cache_hits`, SGLang `cached_tokens`). */
  hitTokens: number;
  /** Full blocks looked up. */
  queryBlocks: number;
  /** Full blocks found. */
  hitBlocks: number;
}

/** A bounded LRU of prompt blocks: one replica's prefix cache. */
export class PrefixCache {
  /** Blocks it holds at most. */
  readonly capacityBlocks: number;
  /** Tokens per block; prompts must be cut with the same. */
  readonly blockTokens: number;
  /** Block ids, least recently used first (a Set keeps insertion order). */
  #lru = new Set<string>();
  #stats: PrefixCacheStats = {
    requests: 0,
    hitRequests: 0,
    queryTokens: 0,
    hitTokens: 0,
    queryBlocks: 0,
    hitBlocks: 0,
  };

  /** An empty cache. */
  constructor(settings: PrefixCacheSettings) {
    for (const [name, value] of Object.entries(settings)) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(
          `Cannot make a prefix cache: ${name} ${value} is not a whole number ≥ 1`,
        );
      }
    }
    this.capacityBlocks = settings.capacityBlocks;
    this.blockTokens = settings.blockTokens;
  }

  /** Blocks held now. */
  get size(): number {
    return this.#lru.size;
  }

  /** Whether a block is held. */
  has(id: string): boolean {
    return this.#lru.has(id);
  }

  /** A copy of the counters. */
  get stats(): PrefixCacheStats {
    return { ...this.#stats };
  }

  /** Leading blocks of `prompt` held now; changes nothing. */
  peek(prompt: PromptBlocks): number {
    this.#check(prompt);
    let n = 0;
    while (n < prompt.ids.length && this.#lru.has(prompt.ids[n])) n++;
    return n;
  }

  /**
   * Looks a request's prompt up as an engine does when it schedules it:
   * counts the query, and refreshes the blocks found (the request uses them).
   */
  lookup(prompt: PromptBlocks): CacheLookup {
    const hitBlocks = this.peek(prompt);
    this.#touch(prompt.ids, hitBlocks);
    const cachedTokens = hitBlocks * this.blockTokens;
    const s = this.#stats;
    s.requests++;
    if (hitBlocks > 0) s.hitRequests++;
    s.queryTokens += prompt.tokens;
    s.hitTokens += cachedTokens;
    s.queryBlocks += prompt.ids.length;
    s.hitBlocks += hitBlocks;
    return { hitBlocks, cachedTokens, uncachedTokens: prompt.tokens - cachedTokens };
  }

  /**
   * Holds every full block of a prompt once it is computed, evicting the
   * least recently used past the capacity; a prompt longer than the capacity
   * keeps its first `capacityBlocks` blocks.
   */
  insert(prompt: PromptBlocks): void {
    this.#check(prompt);
    this.#touch(prompt.ids, prompt.ids.length);
  }

  /** Makes the first `n` blocks the most recent, the first one last (tail evicted first). */
  #touch(ids: readonly string[], n: number): void {
    for (let i = n - 1; i >= 0; i--) {
      this.#lru.delete(ids[i]);
      this.#lru.add(ids[i]);
      if (this.#lru.size > this.capacityBlocks) {
        this.#lru.delete(this.#lru.values().next().value!);
      }
    }
  }

  #check(prompt: PromptBlocks): void {
    if (prompt.blockTokens !== this.blockTokens) {
      throw new RangeError(
        `Cannot look up a prompt of ${prompt.blockTokens}-token blocks in a cache of ${this.blockTokens}-token blocks`,
      );
    }
  }
}

// ---------------------------------------------------------------------------
// Time to first token

/** The prefill model; zeros make a first token no later than without it. */
export interface TtftSettings {
  /** Milliseconds every request waits before its first token. */
  baseMs: number;
  /** Milliseconds more per prompt token not found in the cache. */
  perUncachedTokenMs: number;
}

/** Time to first token: `baseMs + perUncachedTokenMs × uncachedTokens`. */
export function ttftMs(settings: TtftSettings, uncachedTokens: number): number {
  if (!Number.isFinite(uncachedTokens) || uncachedTokens < 0) {
    throw new RangeError(`Cannot model a prefill of ${uncachedTokens} tokens`);
  }
  return settings.baseMs + settings.perUncachedTokenMs * uncachedTokens;
}

// ---------------------------------------------------------------------------
// Load

/**
 * Requests running and waiting, and the KV blocks the running ones hold.
 *
 * A request runs when a slot is free (the engine's `--max-num-seqs` or
 * `--max-running-requests`), nobody is ahead of it, and, with a KV pool, its
 * blocks fit (a request alone always runs); otherwise it waits, first come
 * first served as both engines' default schedulers do.
 */
export class EngineLoad {
  /** Running tickets and the tokens each holds. */
  #running = new Map<number, number>();
  /** Waiting tickets in arrival order, with their tokens. */
  #queue: { ticket: number; tokens: number }[] = [];
  #usedTokens = 0;
  #usedBlocks = 0;
  #next = 1;

  /**
   * `pool` null: no KV pool is modelled, and KV usage is running over slots
   * (the fake's figure without a prefix cache).
   */
  constructor(
    readonly maxRunning: number,
    readonly pool: PrefixCacheSettings | null,
  ) {
    if (!Number.isSafeInteger(maxRunning) || maxRunning < 1) {
      throw new RangeError(`Cannot model load: maxRunning ${maxRunning} is not a whole number ≥ 1`);
    }
  }

  /** Requests running. */
  get running(): number {
    return this.#running.size;
  }

  /** Requests waiting. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Tokens running requests hold (prompt and output). */
  get usedTokens(): number {
    return this.#usedTokens;
  }

  /** KV blocks running requests hold; 0 without a pool. */
  get usedBlocks(): number {
    return this.#usedBlocks;
  }

  /** KV-cache usage from 0 to 1. */
  kvUsage(): number {
    if (this.pool === null) return Math.min(1, this.running / this.maxRunning);
    return Math.min(1, this.#usedBlocks / this.pool.capacityBlocks);
  }

  /** A request holding `tokens` arrives; returns its ticket. It runs now or waits. */
  arrive(tokens: number): number {
    if (!Number.isSafeInteger(tokens) || tokens < 0) {
      throw new RangeError(`Cannot admit a request of ${tokens} tokens`);
    }
    const ticket = this.#next++;
    this.#queue.push({ ticket, tokens });
    this.#drain();
    return ticket;
  }

  /** Whether a ticket is running (not waiting, not finished). */
  isRunning(ticket: number): boolean {
    return this.#running.has(ticket);
  }

  /**
   * A request ends: finished, or its client left while it ran or waited.
   * Returns the tickets that start running because of it, in order.
   */
  finish(ticket: number): number[] {
    const tokens = this.#running.get(ticket);
    if (tokens !== undefined) {
      this.#running.delete(ticket);
      this.#usedTokens -= tokens;
      this.#usedBlocks -= this.#blocks(tokens);
    } else {
      const i = this.#queue.findIndex((w) => w.ticket === ticket);
      if (i < 0) {
        throw new RangeError(`Cannot finish request ${ticket}: it is not running or waiting`);
      }
      this.#queue.splice(i, 1);
    }
    return this.#drain();
  }

  #blocks(tokens: number): number {
    return this.pool === null ? 0 : Math.ceil(tokens / this.pool.blockTokens);
  }

  /** Starts waiting requests from the head while they fit; returns them. */
  #drain(): number[] {
    const started: number[] = [];
    while (this.#queue.length > 0 && this.#running.size < this.maxRunning) {
      const head = this.#queue[0];
      const blocks = this.#blocks(head.tokens);
      if (
        this.pool !== null && this.#running.size > 0 &&
        this.#usedBlocks + blocks > this.pool.capacityBlocks
      ) break;
      this.#queue.shift();
      this.#running.set(head.ticket, head.tokens);
      this.#usedTokens += head.tokens;
      this.#usedBlocks += blocks;
      started.push(head.ticket);
    }
    return started;
  }
}

// ---------------------------------------------------------------------------
// Knobs

/** The model's knobs, from `FAKE_ENGINE_*` environment variables. */
export interface PrefixCacheKnobs {
  /**
   * FAKE_ENGINE_PREFIX_CACHE_BLOCKS (0 or unset: no cache, the default) and
   * FAKE_ENGINE_BLOCK_TOKENS (default 16, or the caller's default).
   */
  cache: PrefixCacheSettings | null;
  /** FAKE_ENGINE_TTFT_BASE_MS and FAKE_ENGINE_TTFT_PER_TOKEN_MS (both default 0). */
  ttft: TtftSettings;
}

/** A knob of the model with a bad value; the message names the variable. */
export class PrefixCacheKnobError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "PrefixCacheKnobError";
  }
}

/**
 * Reads the knobs. Everything is off by default, so a fake started without
 * them keeps its timing and its metrics. The TTFT model applies with or
 * without a cache (without one, every prompt token is uncached).
 * `defaults.blockTokens` lets the engine's own flag (vLLM `--block-size`)
 * set the block size that FAKE_ENGINE_BLOCK_TOKENS overrides.
 *
 * @throws {PrefixCacheKnobError} Naming the variable whose value is not understood.
 */
export function readPrefixCacheKnobs(
  env: (key: string) => string | undefined = (key) => Deno.env.get(key),
  defaults: { blockTokens?: number } = {},
): PrefixCacheKnobs {
  const num = (key: string, dflt: number, integer: boolean, min: number): number => {
    const raw = env(key);
    if (raw === undefined || raw.trim() === "") return dflt;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isSafeInteger(n))) {
      throw new PrefixCacheKnobError(
        `${key} must be a ${integer ? "whole " : ""}number ≥ ${min}, got ${JSON.stringify(raw)}`,
      );
    }
    return n;
  };
  const capacityBlocks = num("FAKE_ENGINE_PREFIX_CACHE_BLOCKS", 0, true, 0);
  const blockTokens = num(
    "FAKE_ENGINE_BLOCK_TOKENS",
    defaults.blockTokens ?? DEFAULT_BLOCK_TOKENS,
    true,
    1,
  );
  return {
    cache: capacityBlocks === 0 ? null : { capacityBlocks, blockTokens },
    ttft: {
      baseMs: num("FAKE_ENGINE_TTFT_BASE_MS", 0, false, 0),
      perUncachedTokenMs: num("FAKE_ENGINE_TTFT_PER_TOKEN_MS", 0, false, 0),
    },
  };
}
