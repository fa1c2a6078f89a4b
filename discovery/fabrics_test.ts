import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import {
  attachFabrics,
  type FabricConfig,
  FabricConfigError,
  parseFabricFlag,
  validateFabricConfig,
} from "./fabrics.ts";
import type { Hca, HcaPort, LinkLayer } from "./types.ts";

// ---------------------------------------------------------------------------
// Hand-built adapters
// ---------------------------------------------------------------------------

interface PortOptions {
  rate?: number | null;
  layer?: LinkLayer | null;
  gid?: number | null;
  state?: string | null;
  phys?: string | null;
}

/** An active InfiniBand port unless told otherwise; `active` follows state and phys. */
function port(n: number, o: PortOptions = {}): HcaPort {
  const state = o.state === undefined ? "ACTIVE" : o.state;
  const phys = o.phys === undefined ? "LinkUp" : o.phys;
  const layer = o.layer === undefined ? "infiniband" : o.layer;
  return {
    port: n,
    state,
    physical_state: phys,
    rate_gbps: o.rate === undefined ? 400 : o.rate,
    link_layer: layer,
    roce_v2_gid_index: o.gid === undefined ? (layer === "roce" ? 3 : null) : o.gid,
    active: state === "ACTIVE" && phys === "LinkUp",
  };
}

function hca(name: string, ...ports: HcaPort[]): Hca {
  return { name, pci_bus_id: null, numa_node: null, ports, problems: [] };
}

// ---------------------------------------------------------------------------
// parseFabricFlag
// ---------------------------------------------------------------------------

const goodFlags: [value: string, expected: [string, string[]]][] = [
  ["ib0=mlx5_0,mlx5_1", ["ib0", ["mlx5_0", "mlx5_1"]]],
  ["roce=mlx5_bond_0:1", ["roce", ["mlx5_bond_0:1"]]],
  ["ib0=mlx5_0", ["ib0", ["mlx5_0"]]],
  [" ib0 = mlx5_0 , mlx5_1 ", ["ib0", ["mlx5_0", "mlx5_1"]]],
  ["ib0=mlx5_0,,mlx5_1,", ["ib0", ["mlx5_0", "mlx5_1"]]],
  ["compute.fabric-A_1=mlx5_10:2,mlx5_2", ["compute.fabric-A_1", ["mlx5_10:2", "mlx5_2"]]],
  [`${"f".repeat(63)}=mlx5_0`, ["f".repeat(63), ["mlx5_0"]]],
];

for (const [value, expected] of goodFlags) {
  Deno.test(`parseFabricFlag(${JSON.stringify(value)}) parses`, () => {
    assertEquals(parseFabricFlag(value), expected);
  });
}

const badFlags: [label: string, value: string, mentions: string][] = [
  ["no '='", "ib0", "expected NAME=HCA"],
  ["no '=' with adapters", "ib0:mlx5_0", "expected NAME=HCA"],
  ["empty name", "=mlx5_0", 'fabric name ""'],
  ["blank name", "  =mlx5_0", 'fabric name ""'],
  ["space in name", "ib 0=mlx5_0", 'fabric name "ib 0"'],
  ["slash in name", "ib/0=mlx5_0", 'fabric name "ib/0"'],
  ["name starting with '-'", "-ib0=mlx5_0", 'fabric name "-ib0"'],
  ["name of 64 characters", `${"f".repeat(64)}=mlx5_0`, "must be 1-63"],
  ["empty HCA list", "ib0=", "fabric ib0 lists no adapters"],
  ["only commas", "ib0=,,", "fabric ib0 lists no adapters"],
  ["non-numeric port", "ib0=mlx5_0:x", '"mlx5_0:x" is not an adapter name'],
  ["empty port", "ib0=mlx5_0:", '"mlx5_0:" is not an adapter name'],
  ["two ports", "ib0=mlx5_0:1:2", '"mlx5_0:1:2" is not an adapter name'],
  ["space in adapter", "ib0=mlx5 0", '"mlx5 0" is not an adapter name'],
  ["bad adapter among good ones", "ib0=mlx5_0,mlx5_1;rm", '"mlx5_1;rm" is not an adapter name'],
];

for (const [label, value, mentions] of badFlags) {
  Deno.test(`parseFabricFlag rejects ${label}: ${JSON.stringify(value)}`, () => {
    const e = assertThrows(() => parseFabricFlag(value), FabricConfigError, mentions);
    // The message names the whole flag value as given.
    assertStringIncludes(e.message, `"${value}"`);
    assertEquals(e.name, "FabricConfigError");
  });
}

// ---------------------------------------------------------------------------
// validateFabricConfig
// ---------------------------------------------------------------------------

Deno.test("validateFabricConfig accepts a sound configuration", () => {
  validateFabricConfig({});
  validateFabricConfig({ ib0: ["mlx5_0", "mlx5_1"], roce: ["mlx5_bond_0:1"] });
  // The same adapter twice in one fabric is not a conflict.
  validateFabricConfig({ ib0: ["mlx5_0:1", "mlx5_0"] });
});

Deno.test("validateFabricConfig: an adapter in two fabrics names both fabrics", () => {
  const e = assertThrows(
    () => validateFabricConfig({ ibA: ["mlx5_0", "mlx5_1"], ibB: ["mlx5_2", "mlx5_1"] }),
    FabricConfigError,
    "adapter mlx5_1 is assigned to both fabric ibA and fabric ibB",
  );
  assertStringIncludes(e.message, "Cannot use fabrics");
});

Deno.test("validateFabricConfig: a port reference counts as its adapter", () => {
  assertThrows(
    () => validateFabricConfig({ ibA: ["mlx5_0"], ibB: ["mlx5_0:1"] }, "agent.json fabrics"),
    FabricConfigError,
    "Cannot use agent.json fabrics: adapter mlx5_0 is assigned to both fabric ibA and fabric ibB",
  );
});

Deno.test("validateFabricConfig: bad names and references name where they are", () => {
  assertThrows(
    () => validateFabricConfig({ "bad name": ["mlx5_0"] }, "cfg"),
    FabricConfigError,
    'Cannot parse cfg.bad name: fabric name "bad name"',
  );
  assertThrows(
    () => validateFabricConfig({ ib0: [] }),
    FabricConfigError,
    "fabrics.ib0: fabric ib0 lists no adapters",
  );
  assertThrows(
    () => validateFabricConfig({ ib0: ["mlx5_0", "mlx5_1:a"] }),
    FabricConfigError,
    '"mlx5_1:a" is not an adapter name',
  );
});

// ---------------------------------------------------------------------------
// attachFabrics
// ---------------------------------------------------------------------------

Deno.test("attachFabrics: no configuration is a single-node island", () => {
  const hcas = [hca("mlx5_0", port(1)), hca("mlx5_1", port(1))];
  assertEquals(attachFabrics(hcas, {}), { fabrics: [], warnings: [] });
  assertEquals(attachFabrics([], {}), { fabrics: [], warnings: [] });
});

Deno.test("attachFabrics: a whole InfiniBand fabric, exact attachment", () => {
  const hcas = [hca("mlx5_0", port(1)), hca("mlx5_1", port(1))];
  assertEquals(attachFabrics(hcas, { ib0: ["mlx5_0", "mlx5_1"] }), {
    fabrics: [{
      fabric: "ib0",
      hcas: ["mlx5_0", "mlx5_1"],
      ports: [
        {
          hca: "mlx5_0",
          port: 1,
          link_layer: "infiniband",
          rate_gbps: 400,
          roce_v2_gid_index: null,
        },
        {
          hca: "mlx5_1",
          port: 1,
          link_layer: "infiniband",
          rate_gbps: 400,
          roce_v2_gid_index: null,
        },
      ],
      rate_gbps: 400,
    }],
    warnings: [],
  });
});

Deno.test("attachFabrics: the slowest active port sets the rate", () => {
  const hcas = [
    hca("mlx5_0", port(1, { rate: 400 })),
    hca("mlx5_1", port(1, { rate: 200 })),
    hca("mlx5_2", port(1, { rate: 400 })),
    // Down and slower: must not count.
    hca("mlx5_3", port(1, { rate: 10, state: "DOWN", phys: "Disabled" })),
  ];
  const { fabrics } = attachFabrics(hcas, { ib0: ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] });
  assertEquals(fabrics.length, 1);
  assertEquals(fabrics[0].rate_gbps, 200);
  assertEquals(fabrics[0].ports.map((p) => p.rate_gbps), [400, 200, 400]);
});

Deno.test("attachFabrics: an active port with an unknown rate makes the rate unknown", () => {
  const hcas = [hca("mlx5_0", port(1, { rate: 400 })), hca("mlx5_1", port(1, { rate: null }))];
  const { fabrics } = attachFabrics(hcas, { ib0: ["mlx5_0", "mlx5_1"] });
  assertEquals(fabrics[0].rate_gbps, null);
});

Deno.test("attachFabrics: a down port is never used and yields a warning", () => {
  const hcas = [
    hca("mlx5_0", port(1)),
    hca("mlx5_1", port(1, { state: "DOWN", phys: "Disabled" })),
    hca("mlx5_2", port(1, { state: "INIT", phys: "LinkUp" })),
    hca("mlx5_3", port(1, { state: "DOWN", phys: "Polling" })),
  ];
  const { fabrics, warnings } = attachFabrics(hcas, {
    ib0: ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
  });
  assertEquals(fabrics[0].hcas, ["mlx5_0"]);
  assertEquals(fabrics[0].ports.map((p) => `${p.hca}:${p.port}`), ["mlx5_0:1"]);
  assertEquals(warnings, [
    "fabric ib0: mlx5_1 port 1 is down (DOWN, Disabled); not used",
    "fabric ib0: mlx5_2 port 1 is down (INIT, LinkUp); not used",
    "fabric ib0: mlx5_3 port 1 is down (DOWN, Polling); not used",
  ]);
});

Deno.test("attachFabrics: a down port with unknown states says so", () => {
  const hcas = [hca("mlx5_0", port(1)), hca("mlx5_1", port(1, { state: null, phys: null }))];
  const { warnings } = attachFabrics(hcas, { ib0: ["mlx5_0", "mlx5_1"] });
  assertEquals(warnings, [
    "fabric ib0: mlx5_1 port 1 is down (unknown state, unknown physical state); not used",
  ]);
});

Deno.test("attachFabrics: a missing adapter yields a warning naming it", () => {
  const { fabrics, warnings } = attachFabrics([hca("mlx5_0", port(1))], {
    ib0: ["mlx5_0", "mlx5_7"],
  });
  assertEquals(fabrics.map((f) => f.hcas), [["mlx5_0"]]);
  assertEquals(warnings, ["fabric ib0: adapter mlx5_7 does not exist on this node"]);
});

Deno.test("attachFabrics: a fabric with no active port is not attached", () => {
  const hcas = [
    hca("mlx5_0", port(1)),
    hca("mlx5_1", port(1, { state: "DOWN", phys: "Disabled" })),
  ];
  const { fabrics, warnings } = attachFabrics(hcas, { ib0: ["mlx5_0"], ib1: ["mlx5_1", "mlx5_9"] });
  assertEquals(fabrics.map((f) => f.fabric), ["ib0"]);
  assertEquals(warnings, [
    "fabric ib1: mlx5_1 port 1 is down (DOWN, Disabled); not used",
    "fabric ib1: adapter mlx5_9 does not exist on this node",
    "fabric ib1: no active port on this node; not attached",
  ]);
});

Deno.test("attachFabrics: a port reference picks only that port", () => {
  const dual = hca("mlx5_0", port(1, { rate: 100 }), port(2, { rate: 400 }));
  const one = attachFabrics([dual], { ib0: ["mlx5_0:2"] });
  assertEquals(one.warnings, []);
  assertEquals(one.fabrics[0].ports.map((p) => p.port), [2]);
  assertEquals(one.fabrics[0].rate_gbps, 400);
  // The whole adapter uses both ports.
  const both = attachFabrics([dual], { ib0: ["mlx5_0"] });
  assertEquals(both.fabrics[0].ports.map((p) => p.port), [1, 2]);
  assertEquals(both.fabrics[0].rate_gbps, 100);
  // A down port 1 does not matter when only port 2 is asked for.
  const downOne = hca("mlx5_0", port(1, { state: "DOWN", phys: "Disabled" }), port(2));
  assertEquals(attachFabrics([downOne], { ib0: ["mlx5_0:2"] }).warnings, []);
});

Deno.test("attachFabrics: a reference to a port that does not exist is a warning", () => {
  const { fabrics, warnings } = attachFabrics([hca("mlx5_0", port(1))], { ib0: ["mlx5_0:2"] });
  assertEquals(fabrics, []);
  assertEquals(warnings, [
    "fabric ib0: adapter mlx5_0 has no port 2",
    "fabric ib0: no active port on this node; not attached",
  ]);
});

Deno.test("attachFabrics: a RoCE fabric carries each port's GID index", () => {
  const hcas = [
    hca("mlx5_bond_0", port(1, { layer: "roce", gid: 3, rate: 100 })),
    hca("mlx5_bond_1", port(1, { layer: "roce", gid: 5, rate: 100 })),
  ];
  const { fabrics, warnings } = attachFabrics(hcas, { roce: ["mlx5_bond_1", "mlx5_bond_0"] });
  assertEquals(warnings, []);
  assertEquals(fabrics[0].ports, [
    { hca: "mlx5_bond_0", port: 1, link_layer: "roce", rate_gbps: 100, roce_v2_gid_index: 3 },
    { hca: "mlx5_bond_1", port: 1, link_layer: "roce", rate_gbps: 100, roce_v2_gid_index: 5 },
  ]);
});

Deno.test("attachFabrics: a RoCE port without a v2 GID is used, with a warning", () => {
  const hcas = [
    hca("mlx5_bond_0", port(1, { layer: "roce", gid: 3 })),
    hca("mlx5_bond_1", port(1, { layer: "roce", gid: null })),
  ];
  const { fabrics, warnings } = attachFabrics(hcas, { roce: ["mlx5_bond_0", "mlx5_bond_1"] });
  assertEquals(fabrics[0].hcas, ["mlx5_bond_0", "mlx5_bond_1"]);
  assertEquals(fabrics[0].ports[1].roce_v2_gid_index, null);
  assertEquals(warnings, [
    "fabric roce: RoCE port mlx5_bond_1:1 has no RoCE v2 GID; NCCL_IB_GID_INDEX cannot be set for it",
  ]);
});

Deno.test("attachFabrics: an InfiniBand port without a GID index is not warned about", () => {
  const { warnings } = attachFabrics([hca("mlx5_0", port(1, { gid: null }))], { ib0: ["mlx5_0"] });
  assertEquals(warnings, []);
});

Deno.test("attachFabrics: mixing InfiniBand and RoCE is a warning", () => {
  const hcas = [hca("mlx5_0", port(1)), hca("mlx5_1", port(1, { layer: "roce" }))];
  const { fabrics, warnings } = attachFabrics(hcas, { mixed: ["mlx5_0", "mlx5_1"] });
  assertEquals(fabrics[0].ports.map((p) => p.link_layer), ["infiniband", "roce"]);
  assertEquals(warnings, [
    "fabric mixed: mixes InfiniBand and RoCE ports, which cannot reach each other",
  ]);
});

Deno.test("attachFabrics: fabrics are sorted by name", () => {
  const hcas = [hca("mlx5_0", port(1)), hca("mlx5_1", port(1)), hca("mlx5_2", port(1))];
  const config: FabricConfig = { roce: ["mlx5_2"], ib1: ["mlx5_1"], ib0: ["mlx5_0"] };
  const { fabrics } = attachFabrics(hcas, config);
  assertEquals(fabrics.map((f) => [f.fabric, f.hcas]), [
    ["ib0", ["mlx5_0"]],
    ["ib1", ["mlx5_1"]],
    ["roce", ["mlx5_2"]],
  ]);
});

Deno.test("attachFabrics: hcas and ports in natural order (mlx5_2 before mlx5_10)", () => {
  const hcas = [
    hca("mlx5_10", port(1)),
    hca("mlx5_2", port(2), port(1)),
    hca("mlx5_1", port(1)),
  ];
  const { fabrics } = attachFabrics(hcas, { ib0: ["mlx5_10", "mlx5_2", "mlx5_1"] });
  assertEquals(fabrics[0].hcas, ["mlx5_1", "mlx5_2", "mlx5_10"]);
  assertEquals(fabrics[0].ports.map((p) => `${p.hca}:${p.port}`), [
    "mlx5_1:1",
    "mlx5_2:1",
    "mlx5_2:2",
    "mlx5_10:1",
  ]);
});

Deno.test("attachFabrics: an adapter with no ports is reported, not attached", () => {
  // As read from the symlink-only samples (`"ports": {}`).
  const { fabrics, warnings } = attachFabrics([hca("mlx5_0")], { ib0: ["mlx5_0"] });
  assertEquals(fabrics, []);
  assertEquals(warnings.length, 2);
  assertStringIncludes(warnings[0], "mlx5_0");
  assertOk(warnings[1].endsWith("not attached"), warnings[1]);
});

Deno.test("attachFabrics: the DGX H100 split: IB fabric and RoCE fabric side by side", () => {
  // mlx5_0,3,4,5,6,9,10,11 InfiniBand NDR; mlx5_1 RoCE 100 active; mlx5_2,7,8 RoCE down
  // (the gpud_h100_ndr_12hca_eth_down sample).
  const ibNames = [0, 3, 4, 5, 6, 9, 10, 11].map((i) => `mlx5_${i}`);
  const hcas = [
    ...ibNames.map((n) => hca(n, port(1, { rate: 400 }))),
    hca("mlx5_1", port(1, { layer: "roce", rate: 100, gid: 3 })),
    ...[2, 7, 8].map((i) =>
      hca(`mlx5_${i}`, port(1, { layer: "roce", rate: 40, state: "DOWN", phys: "Disabled" }))
    ),
  ];
  const { fabrics, warnings } = attachFabrics(hcas, {
    storage: ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"],
    compute: [...ibNames].reverse(),
  });
  assertEquals(fabrics.map((f) => [f.fabric, f.hcas, f.rate_gbps]), [
    ["compute", ibNames, 400],
    ["storage", ["mlx5_1"], 100],
  ]);
  assertEquals(warnings, [
    "fabric storage: mlx5_2 port 1 is down (DOWN, Disabled); not used",
    "fabric storage: mlx5_7 port 1 is down (DOWN, Disabled); not used",
    "fabric storage: mlx5_8 port 1 is down (DOWN, Disabled); not used",
  ]);
});

Deno.test("attachFabrics lists a port named twice once", () => {
  const { fabrics } = attachFabrics([hca("mlx5_0", port(1))], { ib0: ["mlx5_0", "mlx5_0:1"] });
  assertEquals(fabrics[0].ports.length, 1);
});

Deno.test("validateFabricConfig lets two ports of one adapter join different fabrics", () => {
  validateFabricConfig({ a: ["mlx5_0:1"], b: ["mlx5_0:2"] });
  assertThrows(
    () => validateFabricConfig({ a: ["mlx5_0:1"], b: ["mlx5_0:1"] }),
    FabricConfigError,
    "port mlx5_0:1 is assigned to both fabric a and fabric b",
  );
  assertThrows(
    () => validateFabricConfig({ a: ["mlx5_0:1"], b: ["mlx5_0"] }),
    FabricConfigError,
    "adapter mlx5_0 is assigned to both fabric a and fabric b",
  );
});

Deno.test("attachFabrics does not call an unknown link layer RoCE", () => {
  const unknown = hca("mlx5_1", port(1));
  unknown.ports[0].link_layer = null;
  const { warnings } = attachFabrics([hca("mlx5_0", port(1)), unknown], {
    ib0: ["mlx5_0", "mlx5_1"],
  });
  assertEquals(warnings, ["fabric ib0: the link layer of some ports is unknown"]);
});
