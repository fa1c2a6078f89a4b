/**
 * The fake engine's metrics text (dev/fake_engine/fake_engine.ts): its load gauges
 * and prefix-cache counters under vLLM's and SGLang's names for a version,
 * and the one renderer every family of the fake's `/metrics` goes through.
 * No imports beyond its sibling, so the fake still runs with `--no-config`.
 *
 * @module
 */
import type {
  EngineFlavour,
  EngineLoad,
  PrefixCache,
  PrefixCacheStats,
} from "./fake_prefix_cache.ts";

/** What {@link loadMetricsText} shows. */
export interface LoadState {
  /** Requests running. */
  running: number;
  /** Requests waiting. */
  waiting: number;
  /** KV-cache usage from 0 to 1. */
  kvUsage: number;
  /** Tokens running requests hold (SGLang `num_used_tokens`). */
  usedTokens: number;
  /** The prefix cache's counters; null when the fake models none (no cache families then). */
  cache: PrefixCacheStats | null;
}

/** The state of a load and a cache, for {@link loadMetricsText}. */
export function loadState(load: EngineLoad, cache: PrefixCache | null): LoadState {
  return {
    running: load.running,
    waiting: load.waiting,
    kvUsage: load.kvUsage(),
    usedTokens: load.usedTokens,
    cache: cache?.stats ?? null,
  };
}

/**
 * The engine's load gauges and prefix-cache counters in Prometheus text
 * format 0.0.4, with its names for `version` (engine reference §1.5, §2.4):
 * vLLM ≥ 0.10 `kv_cache_usage_perc` and `prefix_cache_{queries,hits}_total`,
 * vLLM < 0.11 the `gpu_` names they replaced; labels `engine="0"` and
 * `model_name` (vLLM), `model_name` (SGLang). Counters count tokens, as the
 * engines' do.
 */
export function loadMetricsText(
  engine: EngineFlavour,
  version: string,
  modelName: string,
  s: LoadState,
): string {
  const c = s.cache;
  const newNames = compareVersion(version, "0.10.0") >= 0;
  const oldNames = compareVersion(version, "0.11.0") < 0;
  // [name, type, help, value]; null values are left out.
  const rows: MetricRow[] = engine === "vllm"
    ? [
      [
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        s.running,
      ],
      [
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        s.waiting,
      ],
      [
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        newNames ? s.kvUsage : null,
      ],
      [
        "vllm:gpu_cache_usage_perc",
        "gauge",
        "GPU KV-cache usage. 1 means 100 percent usage.",
        oldNames ? s.kvUsage : null,
      ],
      [
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        c !== null && newNames ? c.queryTokens : null,
      ],
      [
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        c !== null && newNames ? c.hitTokens : null,
      ],
      [
        "vllm:gpu_prefix_cache_queries_total",
        "counter",
        "GPU prefix cache queries, in terms of number of queried tokens.",
        c !== null && oldNames ? c.queryTokens : null,
      ],
      [
        "vllm:gpu_prefix_cache_hits_total",
        "counter",
        "GPU prefix cache hits, in terms of number of cached tokens.",
        c !== null && oldNames ? c.hitTokens : null,
      ],
    ]
    : [
      ["sglang:num_running_reqs", "gauge", "The number of running requests.", s.running],
      ["sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", s.waiting],
      ["sglang:token_usage", "gauge", "The token usage.", s.kvUsage],
      ["sglang:num_used_tokens", "gauge", "The number of used tokens.", s.usedTokens],
      [
        "sglang:cache_hit_rate",
        "gauge",
        "The prefix cache hit rate.",
        c === null ? null : c.queryTokens === 0 ? 0 : c.hitTokens / c.queryTokens,
      ],
      [
        "sglang:cached_tokens_total",
        "counter",
        "Number of cached prompt tokens.",
        c === null ? null : c.hitTokens,
      ],
    ];
  const m = promLabel(modelName);
  const labels = engine === "vllm" ? `engine="0",model_name="${m}"` : `model_name="${m}"`;
  return metricFamilies(rows, labels);
}

/** As prometheus_client writes numbers: floats, so `2.0`. */
export function promNumber(n: number): string {
  return Number.isInteger(n) ? `${n}.0` : String(n);
}

/** A Prometheus label value, escaped. */
export function promLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** Compares dotted versions numerically (`0.9.2` < `0.10.0`); missing parts are 0. */
export function compareVersion(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map((x) => parseInt(x, 10) || 0);
  const pb = b.split(/[.+-]/).map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** One metric family: name, type, help and value (null: not shown). */
export type MetricRow = [name: string, type: string, help: string, value: number | null];

/** Metric families in Prometheus text format 0.0.4, one series each with `labels`. */
export function metricFamilies(rows: readonly MetricRow[], labels: string): string {
  const lines: string[] = [];
  for (const [name, type, help, value] of rows) {
    if (value === null) continue;
    lines.push(
      `# HELP ${name} ${help}`,
      `# TYPE ${name} ${type}`,
      `${name}{${labels}} ${promNumber(value)}`,
    );
  }
  return lines.length === 0 ? "" : lines.join("\n") + "\n";
}
