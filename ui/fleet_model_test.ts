import fc from "fast-check";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import type { InventoryNode } from "../inventory/store.ts";
import { NODE_STATES, type NodeState } from "../inventory/types.ts";
import {
  FLEET_PAGE_SIZE,
  fleetModel,
  type FleetQuery,
  FleetQueryError,
  fleetQueryString,
  GROUP_BYS,
  groupKey,
  nodeRow,
  parseFleetQuery,
} from "./fleet_model.ts";

const DEFAULT: FleetQuery = {
  q: "",
  state: null,
  gpuClass: null,
  fabric: null,
  problems: false,
  group: "class",
  page: 1,
};

Deno.test("parseFleetQuery: defaults, every filter, and refusals naming the parameter", () => {
  assertEquals(parseFleetQuery({}), DEFAULT);
  assertEquals(
    parseFleetQuery({
      q: " gpu-1 ",
      state: "cordoned",
      class: "h100-80g",
      fabric: "ib-a",
      problems: "1",
      group: "fabric",
      page: "3",
    }),
    {
      q: "gpu-1",
      state: "cordoned",
      gpuClass: "h100-80g",
      fabric: "ib-a",
      problems: true,
      group: "fabric",
      page: 3,
    },
  );
  const refused: [Record<string, string>, string][] = [
    [{ state: "sleeping" }, 'state "sleeping" is not one of ready, cordoned'],
    [{ group: "rack" }, 'group "rack" is not one of class, state, fabric'],
    [{ page: "0" }, 'page "0" is not a whole number'],
    [{ page: "2.5" }, 'page "2.5"'],
    [{ page: "-1" }, 'page "-1"'],
    [{ problems: "yes" }, 'problems must be 1 or empty, not "yes"'],
    [{ q: "x".repeat(201) }, "q is longer than 200 characters"],
  ];
  for (const [raw, message] of refused) {
    assertThrows(() => parseFleetQuery(raw), FleetQueryError, message);
  }
});

Deno.test("fleetQueryString: round-trips through parseFleetQuery (property)", () => {
  const query = fc.record({
    q: fc.string({ maxLength: 20 }).map((s) => s.trim()),
    state: fc.constantFrom(null, ...NODE_STATES),
    gpuClass: fc.constantFrom(null, "h100-80g", "a100 40g"),
    fabric: fc.constantFrom(null, "ib-a", "roce&b"),
    problems: fc.boolean(),
    group: fc.constantFrom(...GROUP_BYS),
    page: fc.integer({ min: 1, max: 999 }),
  });
  fc.assert(fc.property(query, (q) => {
    const params = Object.fromEntries(
      new URLSearchParams(fleetQueryString(q).slice(1)),
    );
    assertEquals(parseFleetQuery(params), { ...q });
  }));
});

function gpu(index: number, cls: string | null, problems: string[] = []) {
  return {
    index,
    uuid: null,
    name: null,
    class: cls,
    memory_total_mb: 81_559,
    memory_used_mb: 1_024,
    compute_capability: null,
    numa_node: null,
    pci_bus_id: null,
    driver_version: null,
    cuda_version: null,
    nvlink_peers: [],
    health: { ecc_errors: null, temperature_c: null, problems },
  };
}

function node(
  id: string,
  state: NodeState,
  classes: (string | null)[],
  opts: {
    fabrics?: [string, number | null][];
    held?: number[];
    sick?: number[];
    labels?: Record<string, string>;
  } = {},
): InventoryNode {
  return {
    id,
    hostname: `host-${id}`,
    mgmt_addr: "10.0.0.1",
    mgmt_interface: null,
    state,
    labels: opts.labels ?? {},
    gpus: classes.map((c, i) =>
      gpu(i, c, opts.sick?.includes(i) ? ["2 uncorrected ECC errors"] : [])
    ),
    fabrics: (opts.fabrics ?? []).map(([fabric, rate]) => ({
      fabric,
      hcas: [],
      ports: [],
      rate_gbps: rate,
    })),
    allocations: opts.held === undefined ? [] : [{
      replica_id: `r-${id}`,
      shard_id: `r-${id}.1/0`,
      gpu_indices: opts.held,
    }],
    liveness: "alive" as InventoryNode["liveness"],
    intent: "none" as InventoryNode["intent"],
    last_seen_ms: 0,
    agent_version: "0.1.0",
    engine_versions: {},
  };
}

Deno.test("nodeRow: each GPU's status, holder and class summary", () => {
  const r = nodeRow(
    node("n1", "ready", ["h100-80g", "h100-80g", "h100-80g", null], {
      held: [0, 1],
      sick: [1],
      fabrics: [["ib-a", 400]],
    }),
  );
  assertEquals(r.gpus.map((g) => [g.status, g.replica]), [
    ["held", "r-n1"],
    ["unhealthy", "r-n1"],
    ["free", null],
    ["free", null],
  ]);
  assertEquals(r.hardware, "3 × h100-80g, 1 × unknown class");
  assertEquals([r.held, r.unhealthy], [2, 1]);
  assertEquals(r.fabrics, [{ name: "ib-a", rate_gbps: 400 }]);
  assertEquals(groupKey(r, "class"), "h100-80g");
  assertEquals(groupKey(r, "fabric"), "ib-a");
  assertEquals(groupKey(nodeRow(node("n2", "lost", [])), "class"), "no GPUs");
});

Deno.test("fleetModel: counts, filters and fabrics' rates on a small fleet", () => {
  const nodes = [
    node("a", "ready", Array(8).fill("h100-80g"), {
      fabrics: [["ib-a", 400]],
      held: [0, 1, 2, 3],
    }),
    node("b", "cordoned", Array(8).fill("h100-80g"), {
      fabrics: [["ib-a", 200]],
      sick: [7],
    }),
    node("c", "ready", Array(4).fill("l40s-45g"), { labels: { rack: "r7" } }),
  ];
  const m = fleetModel(nodes, DEFAULT);
  assertEquals([m.total.nodes, m.total.gpus, m.total.held, m.total.unhealthy], [
    3,
    20,
    4,
    1,
  ]);
  assertEquals(
    m.byState.map((s) => [s.name, s.nodes]),
    NODE_STATES.map((s) => [s, s === "ready" ? 2 : s === "cordoned" ? 1 : 0]),
  );
  assertEquals(m.byClass.map((c) => [c.name, c.gpus, c.held]), [[
    "h100-80g",
    16,
    4,
  ], [
    "l40s-45g",
    4,
    0,
  ]]);
  assertEquals(
    m.byFabric.map((f) => [f.name, f.nodes, f.min_rate_gbps, f.max_rate_gbps]),
    [[
      "ib-a",
      2,
      200,
      400,
    ]],
  );
  const only = (q: Partial<FleetQuery>) =>
    fleetModel(nodes, { ...DEFAULT, ...q }).groups.flatMap((g) => g.rows.map((r) => r.id));
  assertEquals(only({ state: "cordoned" }), ["b"]);
  assertEquals(only({ gpuClass: "l40s-45g" }), ["c"]);
  assertEquals(only({ fabric: "ib-a" }), ["a", "b"]);
  assertEquals(only({ problems: true }), ["b"]);
  assertEquals(only({ q: "rack=r7" }), ["c"]);
  assertEquals(only({ q: "HOST-A" }), ["a"]);
  assertEquals(
    only({ group: "state" }),
    ["a", "c", "b"],
    "state groups in design order",
  );
});

const fleet = fc.array(
  fc.record({
    state: fc.constantFrom(...NODE_STATES),
    classes: fc.array(fc.constantFrom("h100-80g", "a100-40g", null), {
      maxLength: 8,
    }),
    fabric: fc.constantFrom(null, "ib-a", "ib-b"),
  }),
  { maxLength: 180 },
).map((specs) =>
  specs.map((s, i) =>
    node(`n${String(i).padStart(4, "0")}`, s.state, s.classes, {
      fabrics: s.fabric === null ? [] : [[s.fabric, 400]],
    })
  )
);

Deno.test("fleetModel: every matching node is on exactly one page, at most a page size each, groups add up (property)", () => {
  fc.assert(
    fc.property(
      fleet,
      fc.constantFrom(...GROUP_BYS),
      fc.constantFrom(null, ...NODE_STATES),
      (nodes, group, state) => {
        const q = { ...DEFAULT, group, state };
        const first = fleetModel(nodes, q);
        const want = nodes.filter((n) => state === null || n.state === state)
          .map((n) => n.id)
          .sort();
        assertEquals(first.matched, want.length);
        assertEquals(
          first.groups.reduce((a, g) => a + g.nodes, 0),
          first.matched,
        );
        assertEquals(
          first.byState.reduce((a, s) => a + s.nodes, 0),
          nodes.length,
        );
        const seen: string[] = [];
        for (let page = 1; page <= first.pages; page++) {
          const m = fleetModel(nodes, { ...q, page });
          const rows = m.groups.flatMap((g) => g.rows);
          assertOk(rows.length <= FLEET_PAGE_SIZE);
          assertOk(
            page === first.pages || rows.length === FLEET_PAGE_SIZE,
            "only the last page is short",
          );
          for (const g of m.groups) {
            for (const r of g.rows) assertEquals(groupKey(r, group), g.name);
          }
          seen.push(...rows.map((r) => r.id));
        }
        assertEquals([...seen].sort(), want);
        assertEquals(new Set(seen).size, seen.length);
        // A page past the last shows the last.
        assertEquals(
          fleetModel(nodes, { ...q, page: first.pages + 5 }).page,
          first.pages,
        );
      },
    ),
    { numRuns: 60 },
  );
});

Deno.test("fleetModel: nodes in the one natural order, as llmgw get nodes lists them", () => {
  const nodes = ["gpu-10", "gpu-2", "gpu-1"].map((id) => node(id, "ready", ["h100-80g"]));
  const m = fleetModel(nodes, DEFAULT);
  assertEquals(m.groups.flatMap((g) => g.rows.map((r) => r.id)), ["gpu-1", "gpu-2", "gpu-10"]);
});
