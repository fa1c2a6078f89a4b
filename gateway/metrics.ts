/**
 * The gateway's Prometheus metrics (design §12): requests and errors by kind,
 * latency and time-to-first-token histograms per model; the same per model and
 * replica, with in-flight requests; tokens engines reported, per model and API
 * key.
 *
 * @module
 */
import { Exposition, labelText } from "../text/prometheus_exposition.ts";

/** Latency buckets in seconds. */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

class Histogram {
  readonly counts = BUCKETS.map(() => 0);
  count = 0;
  sum = 0;
  observe(v: number): void {
    this.count++;
    this.sum += v;
    for (let i = 0; i < BUCKETS.length; i++) if (v <= BUCKETS[i]) this.counts[i]++;
  }
  write(out: Exposition, name: string, labels: string): void {
    BUCKETS.forEach((b, i) =>
      out.sampleText(`${name}_bucket`, `${labels},le="${b}"`, this.counts[i])
    );
    out.sampleText(`${name}_bucket`, `${labels},le="+Inf"`, this.count);
    out.sampleText(`${name}_sum`, labels, this.sum);
    out.sampleText(`${name}_count`, labels, this.count);
  }
}

/** What a request came to: `ok`, or the kind of error. */
export type Outcome =
  | "ok"
  | "bad_request"
  | "unauthorized"
  | "model_not_found"
  | "no_ready_replica"
  | "upstream_unreachable"
  | "upstream_error"
  | "mid_stream_failure"
  | "client_closed"
  | "unsupported_endpoint";

/** What a token count is of. */
export type TokenKind = "prompt" | "completion";

/** The gateway's counters and histograms. */
export class GatewayMetrics {
  readonly #requests = new Map<string, number>();
  readonly #latency = new Map<string, Histogram>();
  readonly #ttft = new Map<string, Histogram>();
  readonly #inflight = new Map<string, number>();
  #held = 0;
  readonly #replicaRequests = new Map<string, number>();
  readonly #replicaLatency = new Map<string, Histogram>();
  readonly #replicaTtft = new Map<string, Histogram>();
  readonly #tokens = new Map<string, number>();
  // Escaped label sets (labelText), built once per model and replica (this
  // is per request); outcomes and token kinds are fixed identifiers, appended
  // as they are. Only deployed model names reach here (see proxy.ts).
  readonly #modelLabels = new Map<string, string>();
  readonly #replicaLabels = new Map<string, string>();
  readonly #tokenLabels = new Map<string, string>();

  #modelLabel(model: string): string {
    let l = this.#modelLabels.get(model);
    if (l === undefined) this.#modelLabels.set(model, l = labelText({ model }));
    return l;
  }

  #replicaLabel(model: string, replica: string): string {
    const key = `${model}\u0000${replica}`;
    let l = this.#replicaLabels.get(key);
    if (l === undefined) {
      this.#replicaLabels.set(key, l = labelText({ model, replica }));
    }
    return l;
  }

  /**
   * Counts one finished request. `model` is "" unless the body named a
   * deployed model: a client's made-up names must not grow the label set.
   */
  request(model: string, outcome: Outcome, seconds: number): void {
    const m = this.#modelLabel(model);
    const key = `${m},outcome="${outcome}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
    if (model === "") return;
    let h = this.#latency.get(m);
    if (h === undefined) this.#latency.set(m, h = new Histogram());
    h.observe(seconds);
  }

  /**
   * Counts one attempt on a replica: a request it answered (whatever the
   * outcome) or a connection to it that failed before any answer
   * (`upstream_unreachable`, then retried elsewhere).
   */
  replicaRequest(model: string, replica: string, outcome: Outcome, seconds: number): void {
    const r = this.#replicaLabel(model, replica);
    const key = `${r},outcome="${outcome}"`;
    this.#replicaRequests.set(key, (this.#replicaRequests.get(key) ?? 0) + 1);
    let h = this.#replicaLatency.get(r);
    if (h === undefined) this.#replicaLatency.set(r, h = new Histogram());
    h.observe(seconds);
  }

  /** Records the time to the first byte of a response body from a model's replica. */
  firstToken(model: string, replica: string, seconds: number): void {
    const m = this.#modelLabel(model);
    let h = this.#ttft.get(m);
    if (h === undefined) this.#ttft.set(m, h = new Histogram());
    h.observe(seconds);
    const r = this.#replicaLabel(model, replica);
    let hr = this.#replicaTtft.get(r);
    if (hr === undefined) this.#replicaTtft.set(r, hr = new Histogram());
    hr.observe(seconds);
  }

  /**
   * Adds the tokens an engine reported for one answer. `apiKey` is the
   * caller's key id ("none" for an open gateway), never the secret; keys and
   * deployed models are both bounded sets.
   */
  tokens(model: string, apiKey: string, prompt: number, completion: number): void {
    const key = `${model}\u0000${apiKey}`;
    let l = this.#tokenLabels.get(key);
    if (l === undefined) {
      this.#tokenLabels.set(key, l = labelText({ model, api_key: apiKey }));
    }
    for (const [kind, n] of [["prompt", prompt], ["completion", completion]] as const) {
      const k = `${l},kind="${kind satisfies TokenKind}"`;
      this.#tokens.set(k, (this.#tokens.get(k) ?? 0) + n);
    }
  }

  /** Sets the gauge of requests held while every replica of their model is behind a down proxy. */
  held(count: number): void {
    this.#held = count;
  }

  /** Adds `delta` to the in-flight gauge of a model's replica. */
  inflight(model: string, replica: string, delta: number): void {
    const key = this.#replicaLabel(model, replica);
    this.#inflight.set(key, (this.#inflight.get(key) ?? 0) + delta);
  }

  /** Prometheus text format (text/prometheus_exposition.ts writes it). */
  render(): string {
    const out = new Exposition("llmgw_gateway_");
    out.family("requests_total", "counter", "Requests by model and outcome.");
    for (const [k, v] of this.#requests) out.sampleText("requests_total", k, v);
    out.family("request_duration_seconds", "histogram", "Time to the end of the response.");
    for (const [k, h] of this.#latency) h.write(out, "request_duration_seconds", k);
    out.family(
      "time_to_first_token_seconds",
      "histogram",
      "Time to the first byte of the engine's body.",
    );
    for (const [k, h] of this.#ttft) h.write(out, "time_to_first_token_seconds", k);
    out.family("inflight_requests", "gauge", "Requests in flight per replica.");
    for (const [k, v] of this.#inflight) out.sampleText("inflight_requests", k, v);
    out.family(
      "held_requests",
      "gauge",
      "Requests waiting for an agent's engine proxy to come back.",
    );
    out.sampleText("held_requests", "", this.#held);
    out.family("replica_requests_total", "counter", "Attempts per replica by outcome.");
    for (const [k, v] of this.#replicaRequests) out.sampleText("replica_requests_total", k, v);
    out.family("replica_request_duration_seconds", "histogram", "Time per attempt on a replica.");
    for (const [k, h] of this.#replicaLatency) h.write(out, "replica_request_duration_seconds", k);
    out.family(
      "replica_time_to_first_token_seconds",
      "histogram",
      "Time to the first byte, per replica.",
    );
    for (const [k, h] of this.#replicaTtft) {
      h.write(out, "replica_time_to_first_token_seconds", k);
    }
    out.family(
      "tokens_total",
      "counter",
      "Tokens engines reported using, by model, API key and kind.",
    );
    for (const [k, v] of this.#tokens) out.sampleText("tokens_total", k, v);
    return out.text();
  }
}
