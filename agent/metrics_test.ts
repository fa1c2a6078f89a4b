/**
 * The agent's metrics renderer: every family with its metadata, values from
 * the snapshot, escaping, ordering, refusals of bad snapshots, and the text
 * checked by the in-repo checker and by promtool where it is installed.
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import {
  type ExpositionFamily,
  lintExposition,
  parseExposition,
  promtoolCheckMetrics,
  promtoolPath,
} from "../tests/prometheus_lint.ts";
import {
  AgentMetricsError,
  type AgentMetricsGpu,
  type AgentMetricsShard,
  type AgentMetricsSnapshot,
  DISCOVERY_SOURCES,
  emptyAgentMetrics,
  emptyTimeToReady,
  observeTimeToReady,
  renderAgentMetrics,
  SHARD_STATES,
  TIME_TO_READY_BUCKETS,
} from "./metrics.ts";
import { escapeLabelValue } from "../text/prometheus_label.ts";

const MIB = 1024 * 1024;

function gpu(index: number, extra: Partial<AgentMetricsGpu> = {}): AgentMetricsGpu {
  return {
    index,
    uuid: `GPU-${index}`,
    class: "h100-80g",
    memory_total_mb: 81559,
    memory_used_mb: 1024,
    health: { ecc_errors: 0, temperature_c: 40, problems: [] },
    allocated_to: null,
    ...extra,
  };
}

function shard(id: string, extra: Partial<AgentMetricsShard> = {}): AgentMetricsShard {
  return {
    id,
    state: "ready",
    restarts: 0,
    restarts_total: 0,
    last_time_to_ready_seconds: null,
    ...extra,
  };
}

const ODD_ID = 'r"1\\x\ny/0';

/** A node with something in every family, unknowns, and a shard id that needs escaping. */
const RICH: AgentMetricsSnapshot = {
  gpus: [
    gpu(1, { allocated_to: "llama-r0.1/0", memory_used_mb: 70_000 }),
    gpu(0, { allocated_to: ODD_ID }),
    gpu(2, {
      uuid: null,
      class: null,
      memory_total_mb: null,
      memory_used_mb: null,
      health: { ecc_errors: null, temperature_c: null, problems: ["uncorrected ECC", "hot"] },
    }),
  ],
  shards: [
    shard("llama-r0.1/0", { restarts_total: 3, restarts: 1, last_time_to_ready_seconds: 42.5 }),
    shard(ODD_ID, { state: "backoff", restarts: 2, restarts_total: 2 }),
  ],
  time_to_ready: [42.5, 0.5, 4000, 30].reduce(observeTimeToReady, emptyTimeToReady()),
  discovery_errors: { nvidia_smi: 2, sysfs: 0 },
  certificate_not_after_ms: 1_800_000_000_000,
  certificate_renewal_failures: 1,
};

const EMPTY: AgentMetricsSnapshot = emptyAgentMetrics();

const FAMILIES: [string, string][] = [
  ["llmgw_agent_gpu_healthy", "gauge"],
  ["llmgw_agent_gpu_health_problems", "gauge"],
  ["llmgw_agent_gpu_ecc_errors", "gauge"],
  ["llmgw_agent_gpu_temperature_celsius", "gauge"],
  ["llmgw_agent_gpu_memory_capacity_bytes", "gauge"],
  ["llmgw_agent_gpu_memory_used_bytes", "gauge"],
  ["llmgw_agent_gpu_allocated", "gauge"],
  ["llmgw_agent_gpu_shard_info", "gauge"],
  ["llmgw_agent_shards", "gauge"],
  ["llmgw_agent_shard_state", "gauge"],
  ["llmgw_agent_shard_restarts_total", "counter"],
  ["llmgw_agent_shard_consecutive_restarts", "gauge"],
  ["llmgw_agent_shard_last_time_to_ready_seconds", "gauge"],
  ["llmgw_agent_shard_time_to_ready_seconds", "histogram"],
  ["llmgw_agent_cold_start_phase_seconds", "histogram"],
  ["llmgw_agent_peer_bytes_served_total", "counter"],
  ["llmgw_agent_peer_ranges_served_total", "counter"],
  ["llmgw_agent_peer_ranges_streamed_total", "counter"],
  ["llmgw_agent_peer_ranges_refused_total", "counter"],
  ["llmgw_agent_peer_uploads", "gauge"],
  ["llmgw_agent_peer_uploads_waiting", "gauge"],
  ["llmgw_agent_discovery_errors_total", "counter"],
  ["llmgw_agent_certificate_expiry_timestamp_seconds", "gauge"],
  ["llmgw_agent_certificate_renewal_failures_total", "counter"],
];

function families(s: AgentMetricsSnapshot): Map<string, ExpositionFamily> {
  return new Map(parseExposition(renderAgentMetrics(s)).map((f) => [f.name, f]));
}

/** The values of a family's samples named `sample`, keyed by their labels (JSON). */
function values(fs: Map<string, ExpositionFamily>, family: string, sample = family) {
  const f = fs.get(family);
  assertOk(f !== undefined, `no family ${family}`);
  return Object.fromEntries(
    f.samples.filter((s) => s.name === sample).map((s) => [JSON.stringify(s.labels), s.value]),
  );
}

const g = (gpu: string, uuid: string, cls: string, more: Record<string, string> = {}) =>
  JSON.stringify({ gpu, uuid, class: cls, ...more });

Deno.test("agent metrics: every family, with HELP and TYPE, in a fixed order", () => {
  for (const [name, s] of [["rich", RICH], ["empty", EMPTY]] as const) {
    const parsed = parseExposition(renderAgentMetrics(s));
    assertEquals(parsed.map((f) => [f.name, f.type]), FAMILIES, name);
    for (const f of parsed) assertOk((f.help ?? "").length > 0, `${name}: ${f.name} has no help`);
  }
});

Deno.test("agent metrics: GPU health, memory and allocation from the snapshot", () => {
  const fs = families(RICH);
  const unknown = g("2", "", "unknown");
  assertEquals(values(fs, "llmgw_agent_gpu_healthy"), {
    [g("0", "GPU-0", "h100-80g")]: 1,
    [g("1", "GPU-1", "h100-80g")]: 1,
    [unknown]: 0,
  });
  assertEquals(values(fs, "llmgw_agent_gpu_health_problems")[unknown], 2);
  // Unknown values are no series, never a made-up zero.
  for (const family of ["ecc_errors", "temperature_celsius", "memory_capacity_bytes"]) {
    assertEquals(values(fs, `llmgw_agent_gpu_${family}`)[unknown], undefined, family);
  }
  assertEquals(values(fs, "llmgw_agent_gpu_memory_used_bytes"), {
    [g("0", "GPU-0", "h100-80g")]: 1024 * MIB,
    [g("1", "GPU-1", "h100-80g")]: 70_000 * MIB,
  });
  assertEquals(
    values(fs, "llmgw_agent_gpu_memory_capacity_bytes")[g("1", "GPU-1", "h100-80g")],
    81559 * MIB,
  );
  assertEquals(values(fs, "llmgw_agent_gpu_allocated"), {
    [g("0", "GPU-0", "h100-80g")]: 1,
    [g("1", "GPU-1", "h100-80g")]: 1,
    [unknown]: 0,
  });
  assertEquals(values(fs, "llmgw_agent_gpu_shard_info"), {
    [g("0", "GPU-0", "h100-80g", { shard: ODD_ID })]: 1,
    [g("1", "GPU-1", "h100-80g", { shard: "llama-r0.1/0" })]: 1,
  });
});

Deno.test("agent metrics: shard states, restarts and times to ready", () => {
  const fs = families(RICH);
  const byState = values(fs, "llmgw_agent_shards");
  assertEquals(
    SHARD_STATES.map((state) => byState[JSON.stringify({ state })]),
    [0, 0, 0, 0, 1, 0, 0, 0, 1],
  );
  const odd = values(fs, "llmgw_agent_shard_state");
  assertEquals(
    SHARD_STATES.map((state) => odd[JSON.stringify({ shard: ODD_ID, state })]),
    [0, 0, 0, 0, 0, 0, 0, 0, 1],
  );
  assertEquals(values(fs, "llmgw_agent_shard_restarts_total"), {
    [JSON.stringify({ shard: ODD_ID })]: 2,
    [JSON.stringify({ shard: "llama-r0.1/0" })]: 3,
  });
  assertEquals(values(fs, "llmgw_agent_shard_consecutive_restarts"), {
    [JSON.stringify({ shard: ODD_ID })]: 2,
    [JSON.stringify({ shard: "llama-r0.1/0" })]: 1,
  });
  assertEquals(values(fs, "llmgw_agent_shard_last_time_to_ready_seconds"), {
    [JSON.stringify({ shard: "llama-r0.1/0" })]: 42.5,
  });
  const name = "llmgw_agent_shard_time_to_ready_seconds";
  const buckets = values(fs, name, `${name}_bucket`);
  // Observed 0.5, 30, 42.5 and 4000: cumulative counts per bound.
  const expected: Record<string, number> = { "1": 1, "5": 1, "15": 1, "30": 2, "60": 3 };
  for (const b of TIME_TO_READY_BUCKETS) {
    assertEquals(buckets[JSON.stringify({ le: String(b) })], expected[String(b)] ?? 3, `le=${b}`);
  }
  assertEquals(buckets[JSON.stringify({ le: "+Inf" })], 4);
  assertEquals(values(fs, name, `${name}_sum`)["{}"], 4073);
  assertEquals(values(fs, name, `${name}_count`)["{}"], 4);
});

Deno.test("agent metrics: discovery errors by source and the certificate", () => {
  const fs = families(RICH);
  assertEquals(values(fs, "llmgw_agent_discovery_errors_total"), {
    [JSON.stringify({ source: "nvidia_smi" })]: 2,
    [JSON.stringify({ source: "sysfs" })]: 0,
  });
  assertEquals(values(fs, "llmgw_agent_certificate_expiry_timestamp_seconds"), {
    "{}": 1_800_000_000,
  });
  assertEquals(values(fs, "llmgw_agent_certificate_renewal_failures_total"), { "{}": 1 });
  // Without a certificate the expiry has no series (not NaN, not 0).
  const none = families(EMPTY);
  assertEquals(none.get("llmgw_agent_certificate_expiry_timestamp_seconds")?.samples, []);
  assertEquals(
    Object.values(values(none, "llmgw_agent_discovery_errors_total")).length,
    DISCOVERY_SOURCES.length,
  );
});

Deno.test("agent metrics: an empty node still has every family and zero counts", () => {
  const fs = families(EMPTY);
  for (const f of ["gpu_healthy", "gpu_allocated", "gpu_shard_info", "shard_state"]) {
    assertEquals(fs.get(`llmgw_agent_${f}`)?.samples, [], f);
  }
  assertEquals(Object.values(values(fs, "llmgw_agent_shards")), SHARD_STATES.map(() => 0));
  const name = "llmgw_agent_shard_time_to_ready_seconds";
  assertEquals(
    Object.values(values(fs, name, `${name}_bucket`)),
    [...TIME_TO_READY_BUCKETS, 0].map(() => 0),
  );
  assertEquals(lintExposition(renderAgentMetrics(EMPTY)), []);
});

Deno.test("agent metrics: label values are escaped as the format says", () => {
  const cases: [string, string][] = [
    ["plain", "plain"],
    ['a"b', 'a\\"b'],
    ["a\\b", "a\\\\b"],
    ["a\nb", "a\\nb"],
    ['\\"\n', '\\\\\\"\\n'],
    ["ünï/cødé{}=,", "ünï/cødé{}=,"],
  ];
  for (const [raw, escaped] of cases) {
    assertEquals(escapeLabelValue(raw), escaped, JSON.stringify(raw));
    const text = renderAgentMetrics({ ...EMPTY, shards: [shard(raw)] });
    assertStringIncludes(text, `llmgw_agent_shard_restarts_total{shard="${escaped}"} 0\n`);
    // Read back, the value is the shard id again.
    const f = parseExposition(text).find((f) => f.name === "llmgw_agent_shard_restarts_total");
    assertEquals(f?.samples.map((s) => s.labels.shard), [raw]);
  }
});

Deno.test("agent metrics: the order of the snapshot's lists does not change the text", () => {
  const shuffled: AgentMetricsSnapshot = {
    ...RICH,
    gpus: [...RICH.gpus].reverse(),
    shards: [...RICH.shards].reverse(),
  };
  assertEquals(renderAgentMetrics(shuffled), renderAgentMetrics(RICH));
  const text = renderAgentMetrics(RICH);
  const healthy = text.split("\n").filter((l) => l.startsWith("llmgw_agent_gpu_healthy{"));
  assertEquals(healthy.map((l) => /gpu="(\d+)"/.exec(l)?.[1]), ["0", "1", "2"]);
});

Deno.test("agent metrics: a snapshot that cannot be rendered names the field", () => {
  const bad: [string, AgentMetricsSnapshot, string][] = [
    ["same GPU twice", { ...EMPTY, gpus: [gpu(0), gpu(0)] }, "gpus lists index 0 twice"],
    ["same shard twice", { ...EMPTY, shards: [shard("a"), shard("a")] }, 'shards lists id "a"'],
    ["bad index", { ...EMPTY, gpus: [gpu(-1)] }, "gpus[0].index is -1"],
    ["NaN memory", { ...EMPTY, gpus: [gpu(0, { memory_used_mb: NaN })] }, "memory_used_mb is NaN"],
    [
      "infinite temperature",
      {
        ...EMPTY,
        gpus: [gpu(0, { health: { ecc_errors: 0, temperature_c: Infinity, problems: [] } })],
      },
      "health.temperature_c is Infinity",
    ],
    [
      "unknown state",
      { ...EMPTY, shards: [shard("a", { state: "zombie" as AgentMetricsShard["state"] })] },
      'shards[0].state "zombie"',
    ],
    [
      "fractional restarts",
      { ...EMPTY, shards: [shard("a", { restarts_total: 1.5 })] },
      "shards[0].restarts_total is 1.5",
    ],
    [
      "negative restarts",
      { ...EMPTY, shards: [shard("a", { restarts: -1 })] },
      "shards[0].restarts is -1",
    ],
    [
      "negative time to ready",
      { ...EMPTY, shards: [shard("a", { last_time_to_ready_seconds: -2 })] },
      "last_time_to_ready_seconds is -2",
    ],
    [
      "short buckets",
      { ...EMPTY, time_to_ready: { bucket_counts: [0], count: 0, sum_seconds: 0 } },
      "time_to_ready.bucket_counts has 1 entries",
    ],
    [
      "count off",
      { ...EMPTY, time_to_ready: { ...emptyTimeToReady(), count: 2 } },
      "time_to_ready.count is 2 but its buckets hold 0",
    ],
    [
      "negative errors",
      { ...EMPTY, discovery_errors: { nvidia_smi: -1, sysfs: 0 } },
      "discovery_errors.nvidia_smi is -1",
    ],
    [
      "missing source",
      { ...EMPTY, discovery_errors: { nvidia_smi: 0 } as AgentMetricsSnapshot["discovery_errors"] },
      "discovery_errors.sysfs is undefined",
    ],
    ["NaN expiry", { ...EMPTY, certificate_not_after_ms: NaN }, "certificate_not_after_ms is NaN"],
    [
      "fractional failures",
      { ...EMPTY, certificate_renewal_failures: 0.5 },
      "certificate_renewal_failures is 0.5",
    ],
  ];
  for (const [name, snapshot, message] of bad) {
    const e = assertThrows(() => renderAgentMetrics(snapshot), AgentMetricsError, message);
    assertStringIncludes(e.message, "Cannot render agent metrics: ", name);
  }
});

Deno.test("observeTimeToReady: each time lands in the first bucket that holds it", () => {
  const cases: [number, number][] = [
    [0, 0],
    [1, 0],
    [1.0001, 1],
    [59.9, 4],
    [60, 4],
    [3600, TIME_TO_READY_BUCKETS.length - 1],
    [3600.5, TIME_TO_READY_BUCKETS.length],
  ];
  for (const [seconds, bucket] of cases) {
    const h = observeTimeToReady(emptyTimeToReady(), seconds);
    assertEquals(h.bucket_counts.indexOf(1), bucket, String(seconds));
    assertEquals([h.count, h.sum_seconds], [1, seconds]);
  }
  const before = emptyTimeToReady();
  observeTimeToReady(before, 3);
  assertEquals(before, emptyTimeToReady(), "the histogram given is not changed");
  for (const bad of [-1, NaN, Infinity]) {
    assertThrows(() => observeTimeToReady(before, bad), AgentMetricsError, `time to ready ${bad}`);
  }
});

const arbId = fc.string({ unit: "binary", minLength: 1, maxLength: 12 });
const arbSnapshot: fc.Arbitrary<AgentMetricsSnapshot> = fc.record({
  gpus: fc.uniqueArray(
    fc.record({
      index: fc.nat({ max: 15 }),
      uuid: fc.option(arbId),
      class: fc.option(arbId),
      memory_total_mb: fc.option(fc.nat({ max: 200_000 })),
      memory_used_mb: fc.option(fc.nat({ max: 200_000 })),
      health: fc.record({
        ecc_errors: fc.option(fc.nat({ max: 10 })),
        temperature_c: fc.option(fc.double({ min: -20, max: 120, noNaN: true })),
        problems: fc.array(fc.string(), { maxLength: 3 }),
      }),
      allocated_to: fc.option(arbId),
    }),
    { selector: (g) => g.index, maxLength: 8 },
  ),
  shards: fc.uniqueArray(
    fc.record({
      id: arbId,
      state: fc.constantFrom(...SHARD_STATES),
      restarts: fc.nat({ max: 20 }),
      restarts_total: fc.nat({ max: 1_000 }),
      last_time_to_ready_seconds: fc.option(fc.double({ min: 0, max: 5_000, noNaN: true })),
    }),
    { selector: (s) => s.id, maxLength: 6 },
  ),
  time_to_ready: fc.array(fc.double({ min: 0, max: 10_000, noNaN: true }), { maxLength: 20 })
    .map((ts) => ts.reduce(observeTimeToReady, emptyTimeToReady())),
  discovery_errors: fc.record({ nvidia_smi: fc.nat(), sysfs: fc.nat() }),
  certificate_not_after_ms: fc.option(fc.integer({ min: 0, max: 4_102_444_800_000 })),
  certificate_renewal_failures: fc.nat(),
});

Deno.test("agent metrics: any valid snapshot renders valid, clean text that reads back", () => {
  fc.assert(
    fc.property(arbSnapshot, (s) => {
      const text = renderAgentMetrics(s);
      assertEquals(lintExposition(text), []);
      const fs = families(s);
      const ids = fs.get("llmgw_agent_shard_restarts_total")!.samples.map((x) => x.labels.shard);
      assertEquals(ids, s.shards.map((x) => x.id).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const uuids = fs.get("llmgw_agent_gpu_allocated")!.samples.map((x) => x.labels.uuid);
      assertEquals(uuids, [...s.gpus].sort((a, b) => a.index - b.index).map((g) => g.uuid ?? ""));
    }),
    { numRuns: 200 },
  );
});

const PROMTOOL = promtoolPath();

Deno.test({
  name: PROMTOOL === null
    ? "agent metrics pass promtool check metrics (ignored: promtool is not on PATH)"
    : "agent metrics pass promtool check metrics",
  ignore: PROMTOOL === null,
  fn: async () => {
    for (const [name, s] of [["rich", RICH], ["empty", EMPTY]] as const) {
      const r = await promtoolCheckMetrics(renderAgentMetrics(s), PROMTOOL!);
      assertEquals([r.code, r.output], [0, ""], name);
    }
  },
});
