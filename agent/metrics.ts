/**
 * The agent's Prometheus metrics (design §13), served on the local API's
 * `/metrics`: GPU health, memory and allocation, shard states, restarts and
 * time to ready, discovery errors, and the serving certificate's expiry.
 *
 * {@link renderAgentMetrics} is pure: the agent gathers an
 * {@link AgentMetricsSnapshot} (plain data) and this turns it into text
 * exposition format 0.0.4. Every label has bounded cardinality: GPU index,
 * UUID and class, shard id, shard state, discovery source. A GPU's problems
 * and a shard's failure reason are words, so they stay in `/v1/status`.
 *
 * @module
 */
import { ShardReportSchema } from "../protocol/agent_protocol.ts";
import type { Gpu } from "../discovery/types.ts";
import type { ShardMetrics, ShardReport, ShardState } from "../supervisor/types.ts";
import { Exposition } from "../text/prometheus_exposition.ts";
import { type ColdStartHistograms, renderColdStart } from "./cold_start_metrics.ts";
import { type PeerServerStats, renderPeerServing } from "./peer_metrics.ts";

/** Every shard state, in the order the state gauges list them (design §9.3). */
export const SHARD_STATES: readonly ShardState[] = ShardReportSchema.shape.state.options;

/** Where discovery reads the hardware from (design §5.5): the `source` label. */
export type DiscoverySource = "nvidia_smi" | "sysfs";

/** Every discovery source, in the order the error counter lists them. */
export const DISCOVERY_SOURCES: readonly DiscoverySource[] = ["nvidia_smi", "sysfs"];

/**
 * Upper bounds (seconds) of the time-to-ready histogram's buckets: a small
 * model is ready in seconds, a 405B one after many minutes; the supervisor
 * gives up on loading after 30 minutes by default.
 */
export const TIME_TO_READY_BUCKETS: readonly number[] = [
  1,
  5,
  15,
  30,
  60,
  120,
  300,
  600,
  1200,
  1800,
  3600,
];

/** Launch-to-ready times of shards this agent started, bucketed on {@link TIME_TO_READY_BUCKETS}. */
export interface TimeToReadyHistogram {
  /**
   * Observations per bucket, not cumulative: index i counts those above
   * bucket i-1's bound and at most bucket i's; one more index at the end
   * counts those above the last bound.
   */
  readonly bucket_counts: readonly number[];
  /** Every observation. */
  readonly count: number;
  /** Their sum, in seconds. */
  readonly sum_seconds: number;
}

/** One GPU as the metrics see it: the inventory's GPU and who holds it. */
export interface AgentMetricsGpu
  extends Pick<Gpu, "index" | "uuid" | "class" | "memory_total_mb" | "memory_used_mb"> {
  /** Health from the last discovery; healthy when `problems` is empty. */
  readonly health: Pick<Gpu["health"], "ecc_errors" | "temperature_c" | "problems">;
  /** The shard this GPU is given to, or null when it is free. */
  readonly allocated_to: string | null;
}

/** One shard as the metrics see it: its status and what the supervisor counted for it. */
export interface AgentMetricsShard extends Pick<ShardReport, "id" | "state" | "restarts"> {
  /** Restarts after crashes since the agent started, never reset (`restarts` starts over once ready a while). */
  readonly restarts_total: number;
  /** Seconds from its last launch to ready, or null: not ready since launched, or adopted. */
  readonly last_time_to_ready_seconds: number | null;
}

/** Everything `/metrics` shows, gathered by the agent. */
export interface AgentMetricsSnapshot {
  /** The GPUs of the last discovery. */
  readonly gpus: readonly AgentMetricsGpu[];
  /** Every shard the supervisor runs. */
  readonly shards: readonly AgentMetricsShard[];
  /** Launch-to-ready times of the shards this agent started. */
  readonly time_to_ready: TimeToReadyHistogram;
  /** Discovery runs in which each source failed, since the agent started. */
  readonly discovery_errors: Readonly<Record<DiscoverySource, number>>;
  /** When the agent's serving certificate expires (ms since epoch), or null without one. */
  readonly certificate_not_after_ms: number | null;
  /** Failed attempts to renew the serving certificate, since the agent started. */
  readonly certificate_renewal_failures: number;
  /** Phase times of the engine starts this agent saw (agent/cold_start_metrics.ts); absent: none. */
  readonly cold_start?: ColdStartHistograms;
  /** What it served other agents (agent/peer_metrics.ts); absent: nothing. */
  readonly peer?: PeerServerStats;
}

/** A snapshot the renderer cannot turn into metrics: a bug in whoever gathered it. */
export class AgentMetricsError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(`Cannot render agent metrics: ${message}`);
    this.name = "AgentMetricsError";
  }
}

/** The snapshot of an agent with nothing to report yet: no GPUs, no shards, no certificate. */
export function emptyAgentMetrics(): AgentMetricsSnapshot {
  return {
    gpus: [],
    shards: [],
    time_to_ready: emptyTimeToReady(),
    discovery_errors: { nvidia_smi: 0, sysfs: 0 },
    certificate_not_after_ms: null,
    certificate_renewal_failures: 0,
  };
}

/** What {@link gatherAgentMetrics} reads from a running agent. */
export interface AgentMetricsSources {
  /** The GPUs of the last discovery. */
  gpus: readonly Gpu[];
  /** The supervisor's shards. */
  shards: readonly ShardReport[];
  /** The supervisor's per-shard counters. */
  shardMetrics: readonly ShardMetrics[];
  /** Launch-to-ready times so far. */
  timeToReady: TimeToReadyHistogram;
  /** Failed discovery runs by source. */
  discoveryErrors: Readonly<Record<DiscoverySource, number>>;
  /** The serving certificate's expiry, or null without one. */
  certificateNotAfterMs: number | null;
  /** Failed renewals. */
  certificateRenewalFailures: number;
  /** Phase times of engine starts so far. */
  coldStart?: ColdStartHistograms;
}

/** The snapshot of an agent from its parts: each GPU marked with the shard that holds it. */
export function gatherAgentMetrics(o: AgentMetricsSources): AgentMetricsSnapshot {
  const extra = new Map(o.shardMetrics.map((m) => [m.id, m]));
  const owner = new Map<number, string>();
  for (const m of extra.values()) for (const i of m.gpu_indices) owner.set(i, m.id);
  return {
    gpus: o.gpus.map((g) => ({ ...g, allocated_to: owner.get(g.index) ?? null })),
    shards: o.shards.map((s) => {
      const ms = extra.get(s.id)?.last_ready_after_ms ?? null;
      return {
        id: s.id,
        state: s.state,
        restarts: s.restarts,
        restarts_total: extra.get(s.id)?.restarts_total ?? 0,
        last_time_to_ready_seconds: ms === null ? null : ms / 1000,
      };
    }),
    time_to_ready: o.timeToReady,
    discovery_errors: { ...o.discoveryErrors },
    certificate_not_after_ms: o.certificateNotAfterMs,
    certificate_renewal_failures: o.certificateRenewalFailures,
    cold_start: o.coldStart ?? [],
  };
}

/** A histogram with no observation. */
export function emptyTimeToReady(): TimeToReadyHistogram {
  return {
    bucket_counts: Array(TIME_TO_READY_BUCKETS.length + 1).fill(0),
    count: 0,
    sum_seconds: 0,
  };
}

/**
 * `h` with one more launch-to-ready time.
 *
 * @throws {AgentMetricsError} When `seconds` is negative or not finite.
 */
export function observeTimeToReady(h: TimeToReadyHistogram, seconds: number): TimeToReadyHistogram {
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new AgentMetricsError(`time to ready ${seconds} is not a finite, non-negative number`);
  }
  checkHistogram(h);
  let i = TIME_TO_READY_BUCKETS.findIndex((b) => seconds <= b);
  if (i === -1) i = TIME_TO_READY_BUCKETS.length;
  const bucket_counts = h.bucket_counts.map((c, j) => (j === i ? c + 1 : c));
  return { bucket_counts, count: h.count + 1, sum_seconds: h.sum_seconds + seconds };
}

/** The Prometheus metrics of `snapshot`, in text exposition format 0.0.4. */
export function renderAgentMetrics(snapshot: AgentMetricsSnapshot): string {
  const out = new Exposition("llmgw_agent_");
  const gpus = sortedUnique(snapshot.gpus, (g) => g.index, "gpus", "index");
  const shards = sortedUnique(snapshot.shards, (s) => s.id, "shards", "id");
  gpus.forEach((g, i) => checkGpu(g, `gpus[${i}]`));
  shards.forEach((s, i) => checkShard(s, `shards[${i}]`));
  checkHistogram(snapshot.time_to_ready);

  const gpuLabels = (g: AgentMetricsGpu) => ({
    gpu: String(g.index),
    uuid: g.uuid ?? "",
    class: g.class ?? "unknown",
  });
  out.family("gpu_healthy", "gauge", "1 when the GPU has no health problem, 0 otherwise.");
  for (const g of gpus) {
    out.sample("gpu_healthy", gpuLabels(g), g.health.problems.length === 0 ? 1 : 0);
  }
  out.family(
    "gpu_health_problems",
    "gauge",
    "Health problems of the GPU found by the last discovery.",
  );
  for (const g of gpus) out.sample("gpu_health_problems", gpuLabels(g), g.health.problems.length);
  out.family("gpu_ecc_errors", "gauge", "Uncorrected volatile ECC errors the driver reports.");
  for (const g of gpus) {
    if (g.health.ecc_errors !== null) {
      out.sample("gpu_ecc_errors", gpuLabels(g), g.health.ecc_errors);
    }
  }
  out.family("gpu_temperature_celsius", "gauge", "GPU die temperature.");
  for (const g of gpus) {
    const t = g.health.temperature_c;
    if (t !== null) out.sample("gpu_temperature_celsius", gpuLabels(g), t);
  }
  out.family("gpu_memory_capacity_bytes", "gauge", "GPU memory the driver reports.");
  for (const g of gpus) {
    if (g.memory_total_mb !== null) {
      out.sample("gpu_memory_capacity_bytes", gpuLabels(g), g.memory_total_mb * MIB);
    }
  }
  out.family("gpu_memory_used_bytes", "gauge", "GPU memory in use, by any process.");
  for (const g of gpus) {
    if (g.memory_used_mb !== null) {
      out.sample("gpu_memory_used_bytes", gpuLabels(g), g.memory_used_mb * MIB);
    }
  }
  out.family("gpu_allocated", "gauge", "1 when the GPU is given to a shard, 0 when it is free.");
  for (const g of gpus) out.sample("gpu_allocated", gpuLabels(g), g.allocated_to === null ? 0 : 1);
  out.family("gpu_shard_info", "gauge", "Always 1: the shard the GPU is given to.");
  for (const g of gpus) {
    if (g.allocated_to !== null) {
      out.sample("gpu_shard_info", { ...gpuLabels(g), shard: g.allocated_to }, 1);
    }
  }

  out.family("shards", "gauge", "Shards by state.");
  for (const state of SHARD_STATES) {
    out.sample("shards", { state }, shards.filter((s) => s.state === state).length);
  }
  out.family("shard_state", "gauge", "1 for the state the shard is in, 0 for the others.");
  for (const s of shards) {
    for (const state of SHARD_STATES) {
      out.sample("shard_state", { shard: s.id, state }, s.state === state ? 1 : 0);
    }
  }
  out.family("shard_restarts_total", "counter", "Restarts of the shard after crashes.");
  for (const s of shards) out.sample("shard_restarts_total", { shard: s.id }, s.restarts_total);
  out.family(
    "shard_consecutive_restarts",
    "gauge",
    "Restarts of the shard since it was last ready for a while: its backoff step.",
  );
  for (const s of shards) out.sample("shard_consecutive_restarts", { shard: s.id }, s.restarts);
  out.family(
    "shard_last_time_to_ready_seconds",
    "gauge",
    "Time from the shard's last launch to ready.",
  );
  for (const s of shards) {
    const t = s.last_time_to_ready_seconds;
    if (t !== null) out.sample("shard_last_time_to_ready_seconds", { shard: s.id }, t);
  }
  out.family(
    "shard_time_to_ready_seconds",
    "histogram",
    "Time from a shard's launch to ready, for the shards this agent launched.",
  );
  const h = snapshot.time_to_ready;
  let cumulative = 0;
  TIME_TO_READY_BUCKETS.forEach((b, i) => {
    cumulative += h.bucket_counts[i];
    out.sample("shard_time_to_ready_seconds_bucket", { le: String(b) }, cumulative);
  });
  out.sample("shard_time_to_ready_seconds_bucket", { le: "+Inf" }, h.count);
  out.sample("shard_time_to_ready_seconds_sum", {}, h.sum_seconds);
  out.sample("shard_time_to_ready_seconds_count", {}, h.count);
  renderColdStart(out, snapshot.cold_start ?? []);
  renderPeerServing(out, snapshot.peer);

  out.family(
    "discovery_errors_total",
    "counter",
    "Discovery runs in which reading the hardware from the source failed.",
  );
  DISCOVERY_SOURCES.forEach((source) => {
    const n = snapshot.discovery_errors[source];
    checkCount(n, `discovery_errors.${source}`);
    out.sample("discovery_errors_total", { source }, n);
  });

  out.family(
    "certificate_expiry_timestamp_seconds",
    "gauge",
    "When the agent's serving certificate expires, in seconds since the epoch.",
  );
  const notAfter = snapshot.certificate_not_after_ms;
  if (notAfter !== null) {
    if (!Number.isFinite(notAfter)) {
      throw new AgentMetricsError(`certificate_not_after_ms is ${notAfter}, not a finite number`);
    }
    out.sample("certificate_expiry_timestamp_seconds", {}, notAfter / 1000);
  }
  out.family(
    "certificate_renewal_failures_total",
    "counter",
    "Failed attempts to renew the agent's serving certificate.",
  );
  checkCount(snapshot.certificate_renewal_failures, "certificate_renewal_failures");
  out.sample("certificate_renewal_failures_total", {}, snapshot.certificate_renewal_failures);
  return out.text();
}

const MIB = 1024 * 1024;

/** `items` sorted by key; two items with one key would be one series twice. */
function sortedUnique<T, K extends string | number>(
  items: readonly T[],
  key: (t: T) => K,
  field: string,
  keyName: string,
): T[] {
  const sorted = [...items].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
  for (let i = 1; i < sorted.length; i++) {
    if (key(sorted[i]) === key(sorted[i - 1])) {
      throw new AgentMetricsError(
        `${field} lists ${keyName} ${JSON.stringify(key(sorted[i]))} twice`,
      );
    }
  }
  return sorted;
}

function checkGpu(g: AgentMetricsGpu, where: string): void {
  if (!Number.isInteger(g.index) || g.index < 0) {
    throw new AgentMetricsError(`${where}.index is ${g.index}, not a GPU index`);
  }
  checkOptional(g.memory_total_mb, `${where}.memory_total_mb`);
  checkOptional(g.memory_used_mb, `${where}.memory_used_mb`);
  checkOptional(g.health.ecc_errors, `${where}.health.ecc_errors`);
  const t = g.health.temperature_c;
  if (t !== null && !Number.isFinite(t)) {
    throw new AgentMetricsError(`${where}.health.temperature_c is ${t}, not a finite number`);
  }
}

function checkShard(s: AgentMetricsShard, where: string): void {
  if (!SHARD_STATES.includes(s.state)) {
    throw new AgentMetricsError(`${where}.state ${JSON.stringify(s.state)} is not a shard state`);
  }
  checkCount(s.restarts, `${where}.restarts`);
  checkCount(s.restarts_total, `${where}.restarts_total`);
  checkOptional(s.last_time_to_ready_seconds, `${where}.last_time_to_ready_seconds`);
}

function checkHistogram(h: TimeToReadyHistogram): void {
  const n = TIME_TO_READY_BUCKETS.length + 1;
  if (h.bucket_counts.length !== n) {
    throw new AgentMetricsError(
      `time_to_ready.bucket_counts has ${h.bucket_counts.length} entries, not ${n}`,
    );
  }
  h.bucket_counts.forEach((c, i) => checkCount(c, `time_to_ready.bucket_counts[${i}]`));
  const total = h.bucket_counts.reduce((a, b) => a + b, 0);
  if (total !== h.count) {
    throw new AgentMetricsError(
      `time_to_ready.count is ${h.count} but its buckets hold ${total} observations`,
    );
  }
  checkOptional(h.sum_seconds, "time_to_ready.sum_seconds");
}

/** A count: a whole number, never negative. */
function checkCount(n: number, where: string): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new AgentMetricsError(`${where} is ${n}, not a whole number of at least 0`);
  }
}

/** An amount that may be unknown: null, or finite and never negative. */
function checkOptional(n: number | null, where: string): void {
  if (n !== null && !(Number.isFinite(n) && n >= 0)) {
    throw new AgentMetricsError(`${where} is ${n}, not a finite number of at least 0`);
  }
}
