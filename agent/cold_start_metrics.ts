/**
 * The agent's cold-start histograms (issue #25 item 7): how long each phase
 * of each engine start took, per engine and phase, from the receipts its
 * supervisor settles at each spawn's first ready probe
 * (supervisor/cold_start_receipt.ts). Exported on the agent's `/metrics` as
 * `llmgw_agent_cold_start_phase_seconds{engine,phase}` beside the
 * time-to-ready histogram (agent/metrics.ts renders both). Its buckets start
 * below a second, where the time-to-ready histogram's start at one: a warm
 * compile or a small model's KV cache takes a fraction of a second. Labels
 * are bounded: engines are the node's plugins, phases the closed list of
 * engines/cold_start_phases.ts.
 *
 * A phase is observed when its duration is known: a skipped one is not (it
 * took no time because it did not happen, and a zero would drag the
 * histogram's sum); a warm one is, so warm and cold starts share a series
 * and the buckets show both.
 *
 * @module
 */
import { COLD_START_PHASES, type ColdStartPhase } from "../engines/cold_start_phases.ts";
import { type ColdStartReceipt, phaseSeconds } from "../protocol/cold_start_receipt.ts";
import type { Exposition } from "../text/prometheus_exposition.ts";
import { compareNatural } from "../text/natural_order.ts";

/** Upper bounds (seconds) of the buckets: a warm compile takes a tenth of a second, a 405B model's weights many minutes. */
export const COLD_START_BUCKETS: readonly number[] = [
  0.1,
  0.5,
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
];

/** Observations of one series. */
export interface Histogram {
  /** Per bucket, not cumulative; one more index at the end counts those above the last bound. */
  readonly bucket_counts: readonly number[];
  /** Every observation. */
  readonly count: number;
  /** Their sum, in seconds. */
  readonly sum_seconds: number;
}

/** One series: an engine's phase. */
export interface PhaseHistogram {
  /** Engine plugin name. */
  readonly engine: string;
  /** The phase. */
  readonly phase: ColdStartPhase;
  /** Its observations, on {@link COLD_START_BUCKETS}. */
  readonly histogram: Histogram;
}

/** Every series observed so far, in engine then phase order. */
export type ColdStartHistograms = readonly PhaseHistogram[];

/** The histograms with one settled receipt of `engine` observed. */
export function observeColdStart(
  h: ColdStartHistograms,
  engine: string,
  receipt: ColdStartReceipt,
): ColdStartHistograms {
  const seconds = new Map<ColdStartPhase, number>();
  if (receipt.download !== null) seconds.set("download", receipt.download.seconds);
  for (const p of receipt.phases) {
    const s = phaseSeconds(p);
    if (s !== null && !p.skipped) seconds.set(p.phase, s);
  }
  const out = [...h];
  for (const [phase, s] of seconds) {
    const i = out.findIndex((x) => x.engine === engine && x.phase === phase);
    const before = i === -1 ? empty() : out[i].histogram;
    const next = { engine, phase, histogram: observe(before, s) };
    if (i === -1) out.push(next);
    else out[i] = next;
  }
  return out.sort((a, b) =>
    compareNatural(a.engine, b.engine) ||
    COLD_START_PHASES.indexOf(a.phase) - COLD_START_PHASES.indexOf(b.phase)
  );
}

/** Writes the family and its series (none observed: the family alone). */
export function renderColdStart(out: Exposition, h: ColdStartHistograms): void {
  const name = "cold_start_phase_seconds";
  out.family(
    name,
    "histogram",
    "Time an engine start spent in each phase (download, weights, compile, kv_cache, graph_capture, ready), from its cold-start receipt.",
  );
  for (const { engine, phase, histogram } of h) {
    let cumulative = 0;
    COLD_START_BUCKETS.forEach((b, i) => {
      cumulative += histogram.bucket_counts[i];
      out.sample(`${name}_bucket`, { engine, phase, le: String(b) }, cumulative);
    });
    out.sample(`${name}_bucket`, { engine, phase, le: "+Inf" }, histogram.count);
    out.sample(`${name}_sum`, { engine, phase }, histogram.sum_seconds);
    out.sample(`${name}_count`, { engine, phase }, histogram.count);
  }
}

function empty(): Histogram {
  return { bucket_counts: Array(COLD_START_BUCKETS.length + 1).fill(0), count: 0, sum_seconds: 0 };
}

function observe(h: Histogram, seconds: number): Histogram {
  // Receipts' durations are never negative (supervisor/cold_start_receipt.ts); nothing else is counted.
  if (!Number.isFinite(seconds) || seconds < 0) return h;
  let i = COLD_START_BUCKETS.findIndex((b) => seconds <= b);
  if (i === -1) i = COLD_START_BUCKETS.length;
  const bucket_counts = h.bucket_counts.map((c, j) => (j === i ? c + 1 : c));
  return { bucket_counts, count: h.count + 1, sum_seconds: h.sum_seconds + seconds };
}
