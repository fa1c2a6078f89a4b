/**
 * An engine's load and the load routing uses (design §12, issue #16): the
 * engine's own running and waiting requests and its KV-cache usage, read
 * from its `/metrics` under the names its plugin gives, and the larger of
 * that and the gateway's own in-flight count while the reading is fresh.
 * Pure, and a leaf: the endpoint table (gateway/endpoints.ts) routes with it
 * and the scraper (gateway/engine_load.ts) fills it, neither importing the
 * other's side.
 *
 * @module
 */
import type { LoadMetricNames } from "../protocol/agent_protocol.ts";

/** One reading of an engine's load. */
export interface EngineLoad {
  /** Requests running. */
  running: number;
  /** Requests waiting in its queue. */
  waiting: number;
  /** KV-cache usage, 0–1; null when the engine reports none. */
  kvUsage: number | null;
  /** When it was read (ms since epoch). */
  at: number;
}

/** A reading older than this is not used. */
export const STALE_MS = 5_000;

/**
 * The sum over every series of the first of `names` the text has (a name
 * may be written with labels, e.g. `vllm:num_requests_running{model_name="m"} 3`);
 * null when it has none of them.
 */
export function metricValue(text: string, names: readonly string[]): number | null {
  for (const name of names) {
    let sum = 0;
    let found = false;
    for (const line of text.split("\n")) {
      if (!line.startsWith(name)) continue;
      const rest = line.slice(name.length);
      if (rest[0] !== " " && rest[0] !== "{") continue;
      const value = Number(
        rest.slice(rest[0] === "{" ? rest.indexOf("}") + 1 : 0).trim().split(" ")[0],
      );
      if (!Number.isFinite(value)) continue;
      sum += value;
      found = true;
    }
    if (found) return sum;
  }
  return null;
}

/** An engine's load from its metrics text, or null when running or waiting is missing. */
export function parseEngineLoad(
  text: string,
  names: LoadMetricNames,
  at: number,
): EngineLoad | null {
  const running = metricValue(text, names.running);
  const waiting = metricValue(text, names.waiting);
  if (running === null || waiting === null) return null;
  return { running, waiting, kvUsage: metricValue(text, names.kv_cache_usage), at };
}

/** What routing knows of an endpoint's load: the gateway's own count and the engine's reading. */
export interface LoadCounts {
  /** Requests this gateway has in flight there. */
  outstanding: number;
  /** The engine's last reading, or null. */
  engineLoad: EngineLoad | null;
}

/** The load routing uses: the larger of the gateway's own count and a fresh engine reading. */
export function effectiveLoad(e: LoadCounts, now: number): number {
  const l = e.engineLoad;
  if (l === null || now - l.at > STALE_MS) return e.outstanding;
  return Math.max(e.outstanding, l.running + l.waiting);
}
