/**
 * The agent's model cache, wired (issue #25 items 2, 4): the cache over
 * `--model-cache` with its rate limit, the hub client (`HF_ENDPOINT`,
 * `HF_TOKEN` or the token file, models/hub_config.ts) and the fetcher the
 * supervisor drives before each shard's first spawn (agent/model_fetch.ts).
 * The cache's events go to the agent's log, one line each (never one per
 * percent); none of them holds the token.
 *
 * @module
 */
import type { HubConfig } from "../models/hub_config.ts";
import { HubClient } from "../models/hub_client.ts";
import type { Logger } from "../log/log.ts";
import type { CacheSettings } from "./model_cache/cache_flags.ts";
import type { CacheEvent } from "./model_cache/cache_events.ts";
import { ModelCache } from "./model_cache/model_cache.ts";
import { CacheModelFetcher, type ModelFetchOptions } from "./model_fetch.ts";
import { ModelCacheReporter, type ModelCacheReporterOptions } from "./model_cache_report.ts";
import { systemClock } from "../time/clock.ts";
import { ModelPuller } from "./model_pulls.ts";
import type { WrittenChunks } from "./model_cache/written_chunks.ts";

/** What an agent's model cache is made of (AgentOptions `models`). */
export interface AgentModelOptions {
  /** `--model-cache`, `--download-rate`, `--cache-high`, `--cache-low` (cache_flags.ts). */
  cache: CacheSettings;
  /** The hub it fetches from, and the token, if any. */
  hub: HubConfig;
  /** The fetch the hub client uses; the global one by default (tests: a fake hub in-process). */
  fetch?: typeof fetch;
  /** The sources of a model revision besides the hub (the assigned peers, agent/assigned_sources.ts). */
  sources?: ModelFetchOptions["sources"];
  /** Told each chunk's written bytes, which the peer server streams (written_chunks.ts). */
  written?: WrittenChunks;
}

/** The model cache and its fetcher, as the agent holds them. */
export interface AgentModels {
  /** The cache directory: engines run with it as their hub cache, offline. */
  root: string;
  /** The cache. */
  cache: ModelCache;
  /** What the supervisor fetches models through. */
  fetcher: CacheModelFetcher;
  /** The cache's heartbeat report, and its eviction under the watermarks. */
  reporter: ModelCacheReporter;
  /** The desired state's pulls (`llmgw models pull`, a rollout's pre-pull). */
  puller: ModelPuller;
}

/**
 * Builds the agent's model cache; `version` names the agent in its
 * `User-Agent`; `desired` is the desired state the agent runs (what the
 * cache must keep).
 */
export function agentModels(
  o: AgentModelOptions,
  log: Logger,
  version: string,
  desired: ModelCacheReporterOptions["desired"] = () => null,
): AgentModels {
  let fetcher: CacheModelFetcher | null = null;
  let reporter: ModelCacheReporter | null = null;
  let puller: ModelPuller | null = null;
  const cache = new ModelCache({
    root: o.cache.root,
    rateBytesPerSecond: o.cache.rateBytesPerSecond,
    written: o.written,
    onEvent: (e) => {
      fetcher?.cacheEvent(e);
      reporter?.cacheEvent(e);
      logCacheEvent(log, e);
    },
  });
  reporter = new ModelCacheReporter({
    cache,
    watermarks: o.cache.watermarks,
    desired,
    clock: systemClock,
    log,
    pullFailures: () => puller?.failures() ?? [],
  });
  const hub = new HubClient({ config: o.hub, fetch: o.fetch, userAgent: `llmgw-agent/${version}` });
  fetcher = new CacheModelFetcher({ cache, hub, sources: o.sources });
  puller = new ModelPuller({ fetcher, log, clock: systemClock });
  return { root: o.cache.root, cache, fetcher, reporter, puller };
}

/** One log line per cache event: what an operator follows a download by. */
function logCacheEvent(log: Logger, e: CacheEvent): void {
  const { kind, ...fields } = e;
  // A failed chunk is retried (and a persistent failure ends in `failed` or a source change).
  if (kind === "chunk_failed") return log.log("debug", `model download: ${kind}`, fields);
  // A re-plan that moves a download to another source is news, not a fault.
  const warn = kind === "failed" || kind === "mismatch" ||
    (kind === "source_changed" && e.cause === "failure");
  if (warn) log.warn(`model download: ${kind}`, fields);
  else log.info(`model download: ${kind}`, fields);
}
