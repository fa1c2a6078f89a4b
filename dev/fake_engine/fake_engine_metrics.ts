/**
 * The fake engine's `GET /metrics` (dev/fake_engine/fake_engine.ts): Prometheus text
 * with the engine's metric names, the load and prefix-cache gauges of
 * dev/fake_engine/fake_load_metrics.ts and the token and request counters.
 *
 * @module
 */

import {
  loadMetricsText,
  type LoadState,
  loadState,
  metricFamilies,
  type MetricRow,
  promLabel,
} from "./fake_load_metrics.ts";
import type { EngineName } from "./fake_engine_command.ts";
import type { Runtime } from "./fake_engine_runtime.ts";

/** Live counts behind /metrics. */
export interface MetricCounts {
  /** Requests running. */
  running: number;
  /** Requests waiting for a slot. */
  waiting: number;
  /** Slots. */
  max: number;
  /** Completions finished. */
  completed: number;
  /** Prompt tokens seen. */
  prompt_tokens: number;
  /** Tokens generated. */
  generation_tokens: number;
  /** The load and prefix-cache state; without it, KV usage is running / max and no cache is shown. */
  load?: LoadState;
}

/** Prometheus text with the engine's metric names, from the live request counts. */
export function metricsText(
  engine: EngineName,
  version: string,
  modelName: string,
  s: MetricCounts,
): string {
  const load: LoadState = s.load ?? {
    running: s.running,
    waiting: s.waiting,
    kvUsage: Math.min(1, s.running / s.max),
    usedTokens: s.running * 64,
    cache: null,
  };
  const m = promLabel(modelName);
  // [name, type, help, value]; null values are left out.
  const rows: MetricRow[] = engine === "vllm"
    ? [
      [
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens,
      ],
      [
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens,
      ],
      [
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        s.completed,
      ],
    ]
    : [
      ["sglang:gen_throughput", "gauge", "The generation throughput (token/s).", 0],
      [
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens,
      ],
      [
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        s.generation_tokens,
      ],
    ];
  const labels = engine === "vllm" ? `engine="0",model_name="${m}"` : `model_name="${m}"`;
  return loadMetricsText(engine, version, modelName, load) + metricFamilies(rows, labels);
}

/** The /metrics response from the live counts. */
export function metricsResponse(rt: Runtime): Response {
  return new Response(
    metricsText(rt.cfg.engine, rt.version, rt.cfg.served_names[0], {
      running: rt.sched.running,
      waiting: rt.sched.waiting,
      max: rt.sched.max,
      completed: rt.sched.completed,
      prompt_tokens: rt.sched.prompt_tokens,
      generation_tokens: rt.sched.generation_tokens,
      load: loadState(rt.sched.load, rt.cache),
    }),
    { status: 200, headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } },
  );
}
