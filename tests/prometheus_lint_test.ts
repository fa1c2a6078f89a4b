/**
 * The exposition-format checker against texts with known faults, and every
 * llmgw `/metrics` (control plane, gateway) through it and through promtool
 * where promtool is installed. The agent's own are in agent/metrics_test.ts.
 */
import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "./assert.ts";
import { createControlApi } from "../control/api.ts";
import { ControlPlane } from "../control/control_plane.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { hashToken } from "../http/tokens.ts";
import { GatewayMetrics } from "../gateway/metrics.ts";
import { registration } from "./registration.ts";
import {
  ExpositionError,
  lintExposition,
  parseExposition,
  promtoolCheckMetrics,
  promtoolPath,
} from "./prometheus_lint.ts";

const GOOD = [
  "# A plain comment.",
  "# HELP x_total Things, with a \\\\ and a \\n.",
  "# TYPE x_total counter",
  'x_total{a="q\\"uo\\\\te\\n",b="2"} 3 1700000000000',
  'x_total{ a = "1" , } 4',
  "# HELP h_seconds Latency.",
  "# TYPE h_seconds histogram",
  'h_seconds_bucket{le="0.5"} 1',
  'h_seconds_bucket{le="+Inf"} 2',
  "h_seconds_sum 1.5e0",
  "h_seconds_count 2",
  "# HELP g A gauge.",
  "# TYPE g gauge",
  "g NaN",
  'g{k="v"} -Inf',
  "",
].join("\n");

Deno.test("parseExposition: families, types, help and unescaped labels", () => {
  const fs = parseExposition(GOOD);
  assertEquals(fs.map((f) => [f.name, f.type, f.samples.length]), [
    ["x_total", "counter", 2],
    ["h_seconds", "histogram", 4],
    ["g", "gauge", 2],
  ]);
  assertEquals(fs[0].help, "Things, with a \\ and a \n.");
  assertEquals(fs[0].samples[0].labels, { a: 'q"uo\\te\n', b: "2" });
  assertEquals(fs[0].samples[1].labels, { a: "1" });
  assertOk(Number.isNaN(fs[2].samples[0].value));
  assertEquals(fs[2].samples[1].value, -Infinity);
  assertEquals(lintExposition(GOOD), []);
  assertEquals(parseExposition(""), []);
});

Deno.test("parseExposition: what Prometheus would refuse, by line", () => {
  const cases: [string, string][] = [
    ["x 1", "line 1: the text does not end in a line feed"],
    ['x{a="1} 1\n', "line 1: label a's value is not closed"],
    ["x{a=1} 1\n", "line 1: label a's value is not quoted"],
    ['x{a="\\q"} 1\n', 'line 1: invalid escape sequence "\\q"'],
    ['x{a="1",a="2"} 1\n', "line 1: label a appears twice"],
    ['x{1a="1"} 1\n', "line 1: invalid label name"],
    ['x{a="1" b="2"} 1\n', 'expected "," or "}" after label a'],
    ["x one\n", 'line 1: invalid value "one"'],
    ["x\n", "line 1: expected a value"],
    ["x 1 2 3\n", "line 1: expected a value"],
    ["x 1 1.5\n", 'line 1: invalid timestamp "1.5"'],
    ["9x 1\n", "line 1: a sample line must start with a metric name"],
    ["# TYPE x widget\n", 'line 1: unknown metric type "widget"'],
    ["# TYPE x gauge\n# TYPE x gauge\n", "line 2: a TYPE line for x after its samples or TYPE"],
    ["x 1\n# TYPE x gauge\n", "line 2: a TYPE line for x after its samples"],
    ["# HELP x a\n# HELP x b\n", "line 2: a second HELP line for x"],
    ["# HELP x a \\t\n", 'line 1: invalid escape sequence "\\t"'],
    ['x 1\ny 1\nx{a="1"} 2\n', "line 3: samples of x are split by other families"],
    ['x{a="1",b="2"} 1\nx{b="2",a="1"} 2\n', 'line 2: series x{a="1",b="2"} appears twice'],
  ];
  for (const [text, message] of cases) {
    assertThrows(() => parseExposition(text), ExpositionError, message);
    const problems = lintExposition(text);
    assertEquals(problems.length, 1, JSON.stringify(text));
    assertStringIncludes(problems[0], message);
  }
});

Deno.test("lintExposition: Prometheus' naming conventions and consistent histograms", () => {
  const h = (lines: string[]) =>
    ["# HELP h Latency.", "# TYPE h histogram", ...lines, ""].join("\n");
  const cases: [string, string][] = [
    ["# TYPE x gauge\nx 1\n", "x: no help text"],
    ["# HELP x  \n# TYPE x gauge\nx 1\n", "x: no help text"],
    ["# HELP x X.\n# TYPE x counter\nx 1\n", 'x: a counter should end in "_total"'],
    ["# HELP x_total X.\n# TYPE x_total gauge\nx_total 1\n", 'only counters end in "_total"'],
    ["# HELP fooBar X.\n# TYPE fooBar gauge\nfooBar 1\n", "snake_case, not camelCase"],
    ["# HELP a:b X.\n# TYPE a:b gauge\na:b 1\n", "should not contain ':'"],
    ["# HELP x_count X.\n# TYPE x_count gauge\nx_count 1\n", "only histograms and summaries"],
    ["# HELP x_ms X.\n# TYPE x_ms gauge\nx_ms 1\n", 'use the base unit "seconds", not "ms"'],
    [
      "# HELP mem_megabytes X.\n# TYPE mem_megabytes gauge\nmem_megabytes 1\n",
      'use the base unit "bytes"',
    ],
    ['# HELP x X.\n# TYPE x gauge\nx{myLabel="1"} 1\n', "label myLabel should be snake_case"],
    ['# HELP x X.\n# TYPE x gauge\nx{__a="1"} 1\n', 'label names starting "__" are reserved'],
    ['# HELP x X.\n# TYPE x gauge\nx{le="1"} 1\n', 'only histogram buckets have an "le" label'],
    ["# HELP x_total X.\n# TYPE x_total counter\nx_total -1\n", "a counter's value -1"],
    [h(['h_bucket{le="1"} 1', "h_count 1"]), 'the last bucket must be le="+Inf"'],
    [h(['h_bucket{le="x"} 1', "h_count 1"]), 'every bucket needs a numeric "le" label'],
    [
      h(['h_bucket{le="2"} 1', 'h_bucket{le="1"} 1', 'h_bucket{le="+Inf"} 1', "h_count 1"]),
      "bucket bounds must rise",
    ],
    [
      h(['h_bucket{le="1"} 2', 'h_bucket{le="+Inf"} 1', "h_count 1"]),
      "bucket counts are cumulative and never fall",
    ],
    [h(['h_bucket{le="+Inf"} 1']), "no _count sample"],
    [h(['h_bucket{le="+Inf"} 1', "h_count 2"]), "_count 2 differs from the +Inf bucket's 1"],
    [
      h(['h_bucket{a="1",le="+Inf"} 1', 'h_count{a="1"} 1', 'h_bucket{a="2",le="+Inf"} 1']),
      'h [["a","2"]]: no _count sample',
    ],
  ];
  for (const [text, problem] of cases) {
    const problems = lintExposition(text);
    assertOk(problems.some((p) => p.includes(problem)), `${JSON.stringify(text)}: ${problems}`);
  }
});

/** A control plane with a node, a placed deployment and some API requests behind it. */
async function controlPlaneMetrics(): Promise<string> {
  const cp = await ControlPlane.open({ store: new MemoryStore(), reconcileMs: 3_600_000 });
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken("admin")],
    joinTokenHashes: [await hashToken("join")],
  });
  const call = (method: string, path: string, token: string, body?: unknown) =>
    app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  assertEquals((await call("POST", "/v1/agent/register", "join", registration("n1"))).status, 200);
  const deployment = {
    name: "qwen",
    model: "Qwen/Qwen2.5-7B-Instruct",
    replicas: 2,
    profiles: [{ name: "tp2", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 2 }],
  };
  assertEquals((await call("POST", "/v1/deployments", "admin", deployment)).status, 201);
  await cp.reconcile();
  await (await call("GET", "/v1/replicas", "admin")).body?.cancel();
  const res = await call("GET", "/metrics", "admin");
  assertEquals(res.status, 200);
  return await res.text();
}

function gatewayMetrics(): string {
  const m = new GatewayMetrics();
  m.request("m", "ok", 0.2);
  m.request("", "model_not_found", 0.001);
  m.request('we"ird\\model', "upstream_error", 70);
  m.replicaRequest("m", "m-r0", "ok", 0.2);
  m.replicaRequest("m", "m-r1", "upstream_unreachable", 0.01);
  m.firstToken("m", "m-r0", 0.05);
  m.inflight("m", "m-r0", 1);
  return m.render();
}

Deno.test("the control plane's and the gateway's metrics pass the checker", async () => {
  const texts: [string, string][] = [
    ["control plane", await controlPlaneMetrics()],
    ["gateway", gatewayMetrics()],
    ["idle gateway", new GatewayMetrics().render()],
  ];
  for (const [name, text] of texts) assertEquals(lintExposition(text), [], name);
});

const PROMTOOL = promtoolPath();

Deno.test({
  name: PROMTOOL === null
    ? "promtool check metrics: control plane and gateway (ignored: promtool is not on PATH)"
    : "promtool check metrics: control plane and gateway, and it refuses a bad text",
  ignore: PROMTOOL === null,
  fn: async () => {
    const texts: [string, string][] = [
      ["control plane", await controlPlaneMetrics()],
      ["gateway", gatewayMetrics()],
      ["idle gateway", new GatewayMetrics().render()],
    ];
    for (const [name, text] of texts) {
      const r = await promtoolCheckMetrics(text, PROMTOOL!);
      assertEquals([r.code, r.output], [0, ""], name);
    }
    // The runner reports what promtool says: a counter without help or _total.
    const bad = await promtoolCheckMetrics("# TYPE x counter\nx 1\n", PROMTOOL!);
    assertOk(bad.code !== 0);
    assertStringIncludes(bad.output, "_total");
  },
});
