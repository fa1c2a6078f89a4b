/**
 * How the fake engine "generates" (dev/fake_engine/fake_engine.ts): a fixed sentence
 * token by token, prompt lengths of a token per 4 characters, and a prefill
 * whose time to first token follows the prefix cache (dev/fake_engine/fake_prefix_cache.ts).
 *
 * @module
 */

import type { Runtime } from "./fake_engine_runtime.ts";
import { type PromptBlocks, ttftMs } from "./fake_prefix_cache.ts";

/** The sentence every completion is made of. */
const WORDS = [
  "This",
  " is",
  " a",
  " reply",
  " from",
  " the",
  " llmgw",
  " fake",
  " engine",
  ".",
];

/** The `i`-th generated token: the words of one sentence, over and over. */
export function token(i: number): string {
  return WORDS[i % WORDS.length];
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The tokens a text counts as: one per 4 characters, at least one. */
export function approxTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** The text of a prompt, a message list or content parts, as the fake reads it. */
export function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map(textOf).join(" ");
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>;
    if (typeof o.text === "string") return o.text;
    if ("content" in o) return textOf(o.content);
  }
  return typeof value === "number" ? "x" : "";
}

/**
 * A request's prefill, once it runs: looks its prompt up in the prefix cache,
 * waits the modelled time to first token, then caches its blocks; returns
 * the cached tokens. With the knobs off it sets no timer.
 */
export async function prefill(
  rt: Runtime,
  blocks: PromptBlocks | null,
  promptTokens: number,
): Promise<number> {
  const found = rt.cache === null || blocks === null ? null : rt.cache.lookup(blocks);
  const ms = ttftMs(rt.prefix.ttft, found?.uncachedTokens ?? promptTokens);
  if (ms > 0) await sleep(ms);
  if (rt.cache !== null && blocks !== null) rt.cache.insert(blocks);
  return found?.cachedTokens ?? 0;
}
