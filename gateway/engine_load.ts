/**
 * Engine load scraped from each replica's `/metrics` (design §12, issue #16):
 * the engine's own running and waiting requests and its KV-cache usage,
 * under the names its plugin gives for its version (vLLM
 * `vllm:num_requests_running`, `vllm:num_requests_waiting`,
 * `vllm:kv_cache_usage_perc`; SGLang `sglang:num_running_reqs`,
 * `sglang:num_queue_reqs`, `sglang:token_usage`), carried by the endpoint feed.
 *
 * The engine counts the requests of every gateway, where a gateway's own
 * in-flight count sees only its own, so a replica's load for routing is the
 * larger of the two while the reading is fresh. A scrape runs on its own
 * loop, bounded in time: a stale or failing one is simply not used, and
 * never delays or fails a request. What a reading is and how routing uses it:
 * gateway/load.ts.
 *
 * @module
 */
import type { EndpointTable } from "./endpoints.ts";
import { parseEngineLoad } from "./load.ts";
import { SHARD_HEADER } from "../protocol/engine_proxy_protocol.ts";
import type { UpstreamClient } from "./upstream_client.ts";
import { type BodyReader, readLimited } from "../http/read_limited.ts";
import { systemClock } from "../time/clock.ts";

/** Reads `origin`'s `/metrics` with `headers`: the status and, when 200, the text. */
export type MetricsGet = (
  origin: string,
  headers: Record<string, string>,
  signal: AbortSignal,
) => Promise<{ status: number; text: string }>;

/** The most of a metrics answer read (an engine's is a few tens of KiB); a larger one is not used. */
const MAX_METRICS_BYTES = 1024 * 1024;

const decoder = new TextDecoder();

/**
 * The text of a 200 metrics answer, read with the one bounded read; a page
 * over {@link MAX_METRICS_BYTES} is not used (a 200 with no text), as a
 * failing scrape is not.
 */
async function metricsText(body: BodyReader | ReadableStream<Uint8Array> | null): Promise<string> {
  if (body === null) return "";
  const bytes = await readLimited(body, MAX_METRICS_BYTES);
  return bytes === null ? "" : decoder.decode(bytes);
}

/** {@link MetricsGet} over `fetch`. */
export const fetchMetrics: MetricsGet = async (origin, headers, signal) => {
  const res = await fetch(`${origin}/metrics`, { headers, signal });
  if (res.status !== 200) {
    await res.body?.cancel();
    return { status: res.status, text: "" };
  }
  return { status: 200, text: await metricsText(res.body) };
};

/** {@link MetricsGet} over the gateway's own engine client (its TLS trust included). */
export function clientMetrics(client: UpstreamClient): MetricsGet {
  return async (origin, headers, signal) => {
    const res = await client.request({
      origin,
      method: "GET",
      target: "/metrics",
      headers: new Headers(headers),
      body: new Uint8Array(0),
      signal,
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      return { status: res.status, text: "" };
    }
    return { status: 200, text: await metricsText(res.body) };
  };
}

/** Settings of {@link scrapeEngineLoads}. */
export interface ScrapeOptions {
  /** Between two rounds (ms). Default 1,000. */
  intervalMs?: number;
  /** One scrape's bound (ms). Default 500. */
  timeoutMs?: number;
  /** How a replica's `/metrics` is read (default: `fetch`). */
  get?: MetricsGet;
  /** The clock (ms). */
  now?: () => number;
}

/** Reads every endpoint's engine load once; resolves when all have answered or given up. */
export async function scrapeOnce(table: EndpointTable, options: ScrapeOptions = {}): Promise<void> {
  const get = options.get ?? fetchMetrics;
  const now = options.now ?? systemClock.now;
  await Promise.all(
    table.all().map(async (e) => {
      const names = e.load_metrics;
      if (names === undefined) return;
      const headers: Record<string, string> = {};
      if (e.shard !== undefined) headers[SHARD_HEADER] = e.shard;
      if (e.token !== undefined) headers.authorization = `Bearer ${e.token}`;
      try {
        const res = await get(e.url, headers, AbortSignal.timeout(options.timeoutMs ?? 500));
        if (res.status !== 200) return;
        const load = parseEngineLoad(res.text, names, now());
        if (load !== null) e.engineLoad = load;
      } catch {
        // Unreachable or slow: the last reading goes stale and stops counting.
      }
    }),
  );
}

/** Scrapes every endpoint's engine load on a loop until the returned stop is called. */
export function scrapeEngineLoads(table: EndpointTable, options: ScrapeOptions = {}): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const loop = async () => {
    if (stopped) return;
    await scrapeOnce(table, options);
    if (!stopped) timer = setTimeout(loop, options.intervalMs ?? 1_000);
  };
  timer = setTimeout(loop, 0);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
