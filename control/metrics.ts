/**
 * `/metrics` in Prometheus text format (design §11, §13): nodes by state, GPUs
 * by class and status, replicas by state, placement outcomes, and request
 * latencies of the API. Written with the one exposition writer
 * (text/prometheus_exposition.ts), so every label value is escaped.
 *
 * @module
 */
import { NODE_STATES } from "../inventory/types.ts";
import type { ControlPlane } from "./control_plane.ts";
import { Exposition } from "../text/prometheus_exposition.ts";

/** Latency histogram buckets, in seconds. */
const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30];

/** One route's requests of one status. */
interface Series {
  labels: Record<string, string>;
  count: number;
  sum: number;
  buckets: number[];
}

/** Per-route request counts and latencies. */
export class HttpStats {
  readonly #series = new Map<string, Series>();

  /** Records one request: its route pattern, status and duration. */
  record(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let s = this.#series.get(key);
    if (s === undefined) {
      const labels = { method, route, status: String(status) };
      this.#series.set(key, s = { labels, count: 0, sum: 0, buckets: BUCKETS.map(() => 0) });
    }
    s.count++;
    s.sum += seconds;
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) s!.buckets[i]++;
    });
  }

  /** Writes the latency histogram to `out`. */
  write(out: Exposition): void {
    const name = "http_request_duration_seconds";
    out.family(name, "histogram", "Control plane API request latency.");
    for (const s of this.#series.values()) {
      BUCKETS.forEach((b, i) =>
        out.sample(`${name}_bucket`, { ...s.labels, le: String(b) }, s.buckets[i])
      );
      out.sample(`${name}_bucket`, { ...s.labels, le: "+Inf" }, s.count);
      out.sample(`${name}_sum`, s.labels, s.sum);
      out.sample(`${name}_count`, s.labels, s.count);
    }
  }
}

/** Renders every control plane metric. */
export function renderMetrics(cp: ControlPlane, http: HttpStats): string {
  const out = new Exposition("llmgw_");
  const nodes = cp.inventory.listNodes();
  out.family("nodes", "gauge", "Nodes by liveness and operator state.");
  for (const state of NODE_STATES) {
    out.sample("nodes", { state }, nodes.filter((n) => n.state === state).length);
  }
  const gpus = new Map<string, { free: number; allocated: number; unhealthy: number }>();
  for (const n of nodes) {
    const held = new Set(n.allocations.flatMap((a) => a.gpu_indices));
    for (const g of n.gpus) {
      const cls = g.class ?? "unknown";
      let c = gpus.get(cls);
      if (c === undefined) gpus.set(cls, c = { free: 0, allocated: 0, unhealthy: 0 });
      if (held.has(g.index)) c.allocated++;
      else if (g.health.problems.length > 0) c.unhealthy++;
      else c.free++;
    }
  }
  out.family("gpus", "gauge", "GPUs by class and status.");
  for (const [cls, c] of [...gpus].sort()) {
    for (const status of ["free", "allocated", "unhealthy"] as const) {
      out.sample("gpus", { class: cls, status }, c[status]);
    }
  }
  const replicas = cp.replicas();
  out.family("replicas", "gauge", "Replicas by state.");
  for (const state of ["pending", "downloading", "starting", "loading", "ready", "failed"]) {
    out.sample("replicas", { state }, replicas.filter((r) => r.state === state).length);
  }
  out.family("placements_total", "counter", "Replicas placed since start.");
  out.sample("placements_total", {}, cp.counters.placements);
  out.family(
    "unschedulable_total",
    "counter",
    "Placement attempts that found no fit (new explanations only).",
  );
  out.sample("unschedulable_total", {}, cp.counters.unschedulable);
  out.family(
    "events_dropped_total",
    "counter",
    "Events not written: the queue for a shared store was full, or the store refused them.",
  );
  out.sample("events_dropped_total", {}, cp.state.droppedEvents);
  out.family(
    "control_leader",
    "gauge",
    "Whether this control plane leads (1) or not (0), with its leadership term.",
  );
  const leadership = cp.leadership();
  out.sample(
    "control_leader",
    { epoch: String(leadership.epoch) },
    leadership.role === "leader" ? 1 : 0,
  );
  http.write(out);
  const expiries = cp.nodeCertificates.expiries();
  if (expiries.length > 0) {
    out.family(
      "node_certificate_expiry_timestamp_seconds",
      "gauge",
      "When each node's certificate, as signed by this control plane, expires.",
    );
    for (const [node, at] of expiries) {
      out.sample("node_certificate_expiry_timestamp_seconds", { node }, at / 1000);
    }
  }
  return out.text();
}
