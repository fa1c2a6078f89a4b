/**
 * `/metrics` in Prometheus text format (design §11, §13): nodes by state, GPUs
 * by class and status, replicas by state, placement outcomes, and request
 * latencies of the API.
 *
 * @module
 */
import { NODE_STATES } from "../inventory/types.ts";
import type { ControlPlane } from "./control_plane.ts";
import { escapeLabelValue } from "../text/prometheus_label.ts";

/** Latency histogram buckets, in seconds. */
const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30];

/** Per-route request counts and latencies. */
export class HttpStats {
  readonly #series = new Map<string, { count: number; sum: number; buckets: number[] }>();

  /** Records one request: its route pattern, status and duration. */
  record(method: string, route: string, status: number, seconds: number): void {
    const key = `method="${method}",route="${route}",status="${status}"`;
    let s = this.#series.get(key);
    if (s === undefined) {
      this.#series.set(
        key,
        s = {
          count: 0,
          sum: 0,
          buckets: BUCKETS.map(() => 0),
        },
      );
    }
    s.count++;
    s.sum += seconds;
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) s!.buckets[i]++;
    });
  }

  /** The histogram in Prometheus text format. */
  render(): string[] {
    const out = [
      "# HELP llmgw_http_request_duration_seconds Control plane API request latency.",
      "# TYPE llmgw_http_request_duration_seconds histogram",
    ];
    for (const [labels, s] of this.#series) {
      BUCKETS.forEach((b, i) =>
        out.push(`llmgw_http_request_duration_seconds_bucket{${labels},le="${b}"} ${s.buckets[i]}`)
      );
      out.push(`llmgw_http_request_duration_seconds_bucket{${labels},le="+Inf"} ${s.count}`);
      out.push(`llmgw_http_request_duration_seconds_sum{${labels}} ${s.sum}`);
      out.push(`llmgw_http_request_duration_seconds_count{${labels}} ${s.count}`);
    }
    return out;
  }
}

/** Renders every control plane metric. */
export function renderMetrics(cp: ControlPlane, http: HttpStats): string {
  const out: string[] = [];
  const nodes = cp.inventory.listNodes();
  out.push("# HELP llmgw_nodes Nodes by liveness and operator state.", "# TYPE llmgw_nodes gauge");
  for (const state of NODE_STATES) {
    out.push(`llmgw_nodes{state="${state}"} ${nodes.filter((n) => n.state === state).length}`);
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
  out.push("# HELP llmgw_gpus GPUs by class and status.", "# TYPE llmgw_gpus gauge");
  for (const [cls, c] of [...gpus].sort()) {
    for (const status of ["free", "allocated", "unhealthy"] as const) {
      out.push(`llmgw_gpus{class="${escapeLabelValue(cls)}",status="${status}"} ${c[status]}`);
    }
  }
  const replicas = cp.replicas();
  out.push("# HELP llmgw_replicas Replicas by state.", "# TYPE llmgw_replicas gauge");
  for (const state of ["pending", "starting", "loading", "ready", "failed"]) {
    out.push(
      `llmgw_replicas{state="${state}"} ${replicas.filter((r) => r.state === state).length}`,
    );
  }
  out.push(
    "# HELP llmgw_placements_total Replicas placed since start.",
    "# TYPE llmgw_placements_total counter",
    `llmgw_placements_total ${cp.counters.placements}`,
    "# HELP llmgw_unschedulable_total Placement attempts that found no fit (new explanations only).",
    "# TYPE llmgw_unschedulable_total counter",
    `llmgw_unschedulable_total ${cp.counters.unschedulable}`,
    "# HELP llmgw_events_dropped_total Events not written: the queue for a shared store was full, or the store refused them.",
    "# TYPE llmgw_events_dropped_total counter",
    `llmgw_events_dropped_total ${cp.state.droppedEvents}`,
    "# HELP llmgw_control_leader Whether this control plane leads (1) or not (0), with its leadership term.",
    "# TYPE llmgw_control_leader gauge",
    `llmgw_control_leader{epoch="${cp.leadership().epoch}"} ${
      cp.leadership().role === "leader" ? 1 : 0
    }`,
    ...http.render(),
  );
  const expiries = cp.nodeCertificates.expiries();
  if (expiries.length > 0) {
    out.push(
      "# HELP llmgw_node_certificate_expiry_timestamp_seconds When each node's certificate, as signed by this control plane, expires.",
      "# TYPE llmgw_node_certificate_expiry_timestamp_seconds gauge",
      ...expiries.map(([node, at]) =>
        `llmgw_node_certificate_expiry_timestamp_seconds{node="${escapeLabelValue(node)}"} ${
          at / 1000
        }`
      ),
    );
  }
  return out.join("\n") + "\n";
}
