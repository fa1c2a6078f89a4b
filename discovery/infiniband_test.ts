import { join } from "node:path";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { type HcaSpec, type IbSample, type PortSpec, writeSysfsTree } from "../tests/sysfs_tree.ts";
import {
  chooseRoceV2GidIndex,
  type GidEntry,
  parseLinkLayer,
  parsePortState,
  parseRate,
  readInfinibandAdapters,
} from "./infiniband.ts";
import type { Hca, HcaPort } from "./types.ts";

const SOURCES_DIR = new URL("../tests/fixtures/ib_sources/", import.meta.url);

/** Every recorded sample, by file name without `.json`. */
const SAMPLE_NAMES = [...Deno.readDirSync(SOURCES_DIR)]
  .filter((e) => e.isFile && e.name.endsWith(".json"))
  .map((e) => e.name.slice(0, -".json".length))
  .sort();

function loadSample(name: string): IbSample {
  return JSON.parse(Deno.readTextFileSync(new URL(`${name}.json`, SOURCES_DIR))) as IbSample;
}

/** Runs `fn` with a fresh temp dir, removed afterwards whatever happens. */
async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_ib_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Natural order written independently of the code under test: compares
 * digit runs as numbers, everything else as text (`mlx5_2` < `mlx5_10`).
 */
function naturalOrder(a: string, b: string): number {
  const chunks = (s: string) => s.match(/\d+|\D+/g) ?? [];
  const ca = chunks(a);
  const cb = chunks(b);
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    const x = ca[i];
    const y = cb[i];
    if (/^\d/.test(x) && /^\d/.test(y)) {
      if (Number(x) !== Number(y)) return Number(x) - Number(y);
    } else if (x !== y) {
      return x < y ? -1 : 1;
    }
  }
  return ca.length - cb.length;
}

// ---------------------------------------------------------------------------
// parsePortState / parseRate / parseLinkLayer
// ---------------------------------------------------------------------------

const portStateCases: [input: string, expected: string | null][] = [
  ["4: ACTIVE", "ACTIVE"],
  ["5: LinkUp", "LinkUp"],
  ["1: DOWN", "DOWN"],
  ["3: Disabled", "Disabled"],
  ["2: Polling", "Polling"],
  ["2: INIT", "INIT"],
  ["3: ARMED", "ARMED"],
  ["5: ACTIVE_DEFER", "ACTIVE_DEFER"],
  ["7: Phy Test", "Phy Test"],
  ["4: ACTIVE\n", "ACTIVE"],
  ["  4:ACTIVE  ", "ACTIVE"],
  ["banana", null],
  ["ACTIVE", null],
  ["4:", null],
  [": ACTIVE", null],
  ["x: ACTIVE", null],
  ["4: 42", null],
  ["0: <unknown>", null],
  ["", null],
];

for (const [input, expected] of portStateCases) {
  Deno.test(`parsePortState(${JSON.stringify(input)}) is ${JSON.stringify(expected)}`, () => {
    assertEquals(parsePortState(input), expected);
  });
}

const rateCases: [input: string, expected: number | null][] = [
  ["400 Gb/sec (4X NDR)", 400],
  ["200 Gb/sec (2X NDR)", 200],
  ["200 Gb/sec (4X HDR)", 200],
  ["100 Gb/sec (4X EDR)", 100],
  ["40 Gb/sec (4X QDR)", 40],
  ["2.5 Gb/sec (1X SDR)", 2.5],
  ["2.5 Gb/sec (1X)", 2.5],
  ["10 Gb/sec (4X)", 10],
  ["56 Gb/sec (4X FDR)\n", 56],
  ["fast", null],
  ["", null],
  ["400", null],
  ["400 Gb/s", null],
  ["400 Mb/sec", null],
  ["Gb/sec (4X)", null],
  ["-10 Gb/sec (4X)", null],
];

for (const [input, expected] of rateCases) {
  Deno.test(`parseRate(${JSON.stringify(input)}) is ${expected}`, () => {
    assertEquals(parseRate(input), expected);
  });
}

const linkLayerCases: [input: string, expected: "infiniband" | "roce" | null][] = [
  ["InfiniBand", "infiniband"],
  ["InfiniBand\n", "infiniband"],
  ["infiniband", "infiniband"],
  ["Ethernet", "roce"],
  [" ETHERNET ", "roce"],
  ["Unknown", null],
  ["IB", null],
  ["", null],
];

for (const [input, expected] of linkLayerCases) {
  Deno.test(`parseLinkLayer(${JSON.stringify(input)}) is ${expected}`, () => {
    assertEquals(parseLinkLayer(input), expected);
  });
}

// ---------------------------------------------------------------------------
// chooseRoceV2GidIndex
// ---------------------------------------------------------------------------

/** The GID table of one recorded port, as readGids would build it (entries with a type only). */
function recordedGidTable(sample: string, hca: string, port: string): GidEntry[] {
  const spec = loadSample(sample).hcas[hca].ports[port];
  return Object.entries(spec.gid_types ?? {}).map(([i, type]) => ({
    index: Number(i),
    gid: spec.gids![i],
    type,
  }));
}

const ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000";
const LINK_LOCAL = "fe80:0000:0000:0000:a288:c2ff:feb4:87d6";
const IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:0a10:1d0d";
const GLOBAL_V6 = "2001:0db8:0000:0000:a288:c2ff:feb4:87d6";

Deno.test("chooseRoceV2GidIndex: ucx10420 table picks the IPv4-mapped RoCE v2 entry", () => {
  const table = recordedGidTable("ucx10420_roce_bond_gids", "mlx5_bond_0", "1");
  // The recorded table: 0 fe80 v1, 1 fe80 v2, 2 ::ffff:10.16.29.13 v1, 3 ::ffff:10.16.29.13 v2.
  assertEquals(table.length, 4);
  assertEquals(chooseRoceV2GidIndex(table), 3);
  // Order of the input does not matter.
  assertEquals(chooseRoceV2GidIndex([...table].reverse()), 3);
});

Deno.test("chooseRoceV2GidIndex: hurray0 tables (link-local v2 only; IB port v1 only)", () => {
  // mlx5_0: 0 fe80 v1, 1 fe80 v2 → no IPv4, no global → the only v2 entry.
  assertEquals(
    chooseRoceV2GidIndex(recordedGidTable("hurray0_roce_ib_mixed_down", "mlx5_0", "1")),
    1,
  );
  // mlx5_1: a single IB/RoCE v1 entry → no RoCE v2 at all.
  assertEquals(
    chooseRoceV2GidIndex(recordedGidTable("hurray0_roce_ib_mixed_down", "mlx5_1", "1")),
    null,
  );
});

const gidCases: [label: string, entries: GidEntry[], expected: number | null][] = [
  ["empty table", [], null],
  ["only v1 entries", [
    { index: 0, gid: LINK_LOCAL, type: "IB/RoCE v1" },
    { index: 1, gid: IPV4_MAPPED, type: "IB/RoCE v1" },
  ], null],
  ["only an all-zero v2 entry", [{ index: 0, gid: ZERO_GID, type: "RoCE v2" }], null],
  ["all-zero v2 entry is skipped", [
    { index: 0, gid: ZERO_GID, type: "RoCE v2" },
    { index: 1, gid: LINK_LOCAL, type: "RoCE v2" },
  ], 1],
  ["IPv4-mapped v1 entry is ignored", [
    { index: 0, gid: IPV4_MAPPED, type: "IB/RoCE v1" },
    { index: 1, gid: LINK_LOCAL, type: "RoCE v2" },
  ], 1],
  ["IPv4-mapped v2 wins over a lower global v2", [
    { index: 1, gid: GLOBAL_V6, type: "RoCE v2" },
    { index: 3, gid: IPV4_MAPPED, type: "RoCE v2" },
  ], 3],
  ["falls back to the non-link-local v2", [
    { index: 1, gid: LINK_LOCAL, type: "RoCE v2" },
    { index: 2, gid: GLOBAL_V6, type: "IB/RoCE v1" },
    { index: 3, gid: GLOBAL_V6, type: "RoCE v2" },
  ], 3],
  ["lowest IPv4-mapped v2 index when several", [
    { index: 7, gid: "0000:0000:0000:0000:0000:ffff:0a10:270d", type: "RoCE v2" },
    { index: 5, gid: IPV4_MAPPED, type: "RoCE v2" },
  ], 5],
  ["link-local v2 as last resort, lowest index", [
    { index: 9, gid: LINK_LOCAL, type: "RoCE v2" },
    { index: 4, gid: LINK_LOCAL, type: "RoCE v2" },
  ], 4],
];

for (const [label, entries, expected] of gidCases) {
  Deno.test(`chooseRoceV2GidIndex: ${label} → ${expected}`, () => {
    assertEquals(chooseRoceV2GidIndex(entries), expected);
  });
}

// ---------------------------------------------------------------------------
// readInfinibandAdapters over every recorded sample
// ---------------------------------------------------------------------------

/**
 * RoCE v2 GID indices expected per `sample/hca/port`, worked out by hand
 * from the recorded GID tables; every other port expects null (InfiniBand
 * ports, and RoCE ports whose sources did not record GID types).
 */
const EXPECTED_GID_INDEX: Record<string, number> = {
  // ucx10420: gids 0/1 = fe80::a288:c2ff:feb4:87d6 (v1/v2), gids 2/3 =
  // ::ffff:10.16.29.13 (v1/v2). The IPv4-mapped RoCE v2 entry is index 3.
  "ucx10420_roce_bond_gids/mlx5_bond_0/1": 3,
  // hurray0 mlx5_0: gid 0 fe80 v1, gid 1 fe80 v2: the only v2 entry is 1.
  "hurray0_roce_ib_mixed_down/mlx5_0/1": 1,
};

function stateName(text: string): string {
  // "4: ACTIVE" → "ACTIVE"
  return text.slice(text.indexOf(":") + 1).trim();
}

function expectedPort(sample: string, hca: string, port: string, spec: PortSpec): HcaPort {
  const key = `${sample}/${hca}/${port}`;
  return {
    port: Number(port),
    state: spec.state === undefined ? null : stateName(spec.state),
    physical_state: spec.phys_state === undefined ? null : stateName(spec.phys_state),
    rate_gbps: spec.rate === undefined ? null : parseFloat(spec.rate),
    link_layer: spec.link_layer === "InfiniBand"
      ? "infiniband"
      : spec.link_layer === "Ethernet"
      ? "roce"
      : null,
    roce_v2_gid_index: EXPECTED_GID_INDEX[key] ?? null,
    active: spec.state === "4: ACTIVE" && spec.phys_state === "5: LinkUp",
  };
}

function expectedHca(sample: string, name: string, spec: HcaSpec): Hca {
  const portKeys = Object.keys(spec.ports).sort((a, b) => Number(a) - Number(b));
  return {
    name,
    pci_bus_id: spec.pci_bus_id,
    numa_node: spec.numa_node,
    ports: portKeys.map((p) => expectedPort(sample, name, p, spec.ports[p])),
    // writeSysfsTree creates no ports directory for a sample with `"ports": {}`.
    problems: portKeys.length === 0 ? ["no ports directory"] : [],
  };
}

Deno.test("ib_sources: every sample is present", () => {
  assertEquals(SAMPLE_NAMES, [
    "gpud_a100_hdr_ibstatus",
    "gpud_h100_ndr_12hca_eth_down",
    "gpud_h100_ndr_8ib_bond",
    "gpud_h100_roce_12hca_polling",
    "hurray0_roce_ib_mixed_down",
    "k8s_rdma_shared_dev_plugin64_symlinks",
    "nccl489_hdr_port_down",
    "oci_h100_18hca_symlinks",
    "sglang_h20_bond_2xndr",
    "talos_cx4_init_symlink",
    "ucx10420_roce_bond_gids",
  ]);
  // Every hand-worked GID index names a port that exists in its sample.
  for (const key of Object.keys(EXPECTED_GID_INDEX)) {
    const [sample, hca, port] = key.split("/");
    assertOk(loadSample(sample).hcas[hca]?.ports[port] !== undefined, key);
  }
});

for (const sampleName of SAMPLE_NAMES) {
  Deno.test(`readInfinibandAdapters: recorded sample ${sampleName}`, async () => {
    const sample = loadSample(sampleName);
    await withTempDir(async (tmp) => {
      writeSysfsTree(tmp, sample);
      const result = await readInfinibandAdapters(tmp);
      assertEquals(result.problems, []);
      const names = Object.keys(sample.hcas).sort(naturalOrder);
      assertEquals(result.hcas.map((h) => h.name), names);
      for (const [i, name] of names.entries()) {
        assertEquals(result.hcas[i], expectedHca(sampleName, name, sample.hcas[name]), name);
      }
    });
  });
}

Deno.test("readInfinibandAdapters: natural adapter order on the 18-HCA OCI node", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, loadSample("oci_h100_18hca_symlinks"));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas.map((h) => h.name), Array.from({ length: 18 }, (_, i) => `mlx5_${i}`));
    assertEquals(hcas[10].pci_bus_id, "0000:c3:00.0");
    assertEquals(hcas[2].pci_bus_id, "0000:4c:00.0");
  });
});

Deno.test("readInfinibandAdapters: DGX H100 sample, hand-checked values", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, loadSample("gpud_h100_ndr_12hca_eth_down"));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas.map((h) => h.name).slice(0, 4), ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]);
    assertEquals(hcas.map((h) => h.name).slice(-2), ["mlx5_10", "mlx5_11"]);
    const inactive = hcas.filter((h) => !h.ports[0].active).map((h) => h.name);
    assertEquals(inactive, ["mlx5_2", "mlx5_7", "mlx5_8"]);
    assertEquals(hcas[0].ports, [{
      port: 1,
      state: "ACTIVE",
      physical_state: "LinkUp",
      rate_gbps: 400,
      link_layer: "infiniband",
      roce_v2_gid_index: null,
      active: true,
    }]);
    assertEquals(hcas[1].ports[0].link_layer, "roce");
    assertEquals(hcas[1].ports[0].rate_gbps, 100);
  });
});

Deno.test("readInfinibandAdapters: INIT port on LinkUp is not active (talos)", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, loadSample("talos_cx4_init_symlink"));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas.length, 1);
    assertEquals(hcas[0].pci_bus_id, "0000:04:00.0");
    assertEquals(hcas[0].ports[0].state, "INIT");
    assertEquals(hcas[0].ports[0].physical_state, "LinkUp");
    assertEquals(hcas[0].ports[0].active, false);
  });
});

Deno.test("readInfinibandAdapters: Polling and Disabled RoCE ports are not active", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, loadSample("gpud_h100_roce_12hca_polling"));
    const { hcas } = await readInfinibandAdapters(tmp);
    const byName = new Map(hcas.map((h) => [h.name, h]));
    assertEquals(byName.get("mlx5_11")!.ports[0].physical_state, "Polling");
    assertEquals(byName.get("mlx5_11")!.ports[0].active, false);
    assertEquals(byName.get("mlx5_5")!.ports[0].physical_state, "Disabled");
    assertEquals(byName.get("mlx5_5")!.ports[0].active, false);
    assertEquals(hcas.filter((h) => h.ports[0].active).length, 10);
  });
});

// ---------------------------------------------------------------------------
// Malformed input: problems, never throws
// ---------------------------------------------------------------------------

const PCI = "0000:17:00.0";
const GOOD_PORT: PortSpec = {
  state: "4: ACTIVE",
  phys_state: "5: LinkUp",
  rate: "400 Gb/sec (4X NDR)",
  link_layer: "InfiniBand",
};

function oneAdapter(port: PortSpec, numa: number | null = 0): IbSample {
  return {
    source: "hand-made",
    hcas: { mlx5_0: { pci_bus_id: PCI, numa_node: numa, ports: { "1": port } } },
  };
}

/** The port directory of `mlx5_0`, reached through the class symlink as discovery does. */
function portDir(root: string, port = "1"): string {
  return join(root, "class/infiniband/mlx5_0/ports", port);
}

Deno.test("malformed: a well-formed hand-made adapter reads cleanly (baseline)", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT, 1));
    assertEquals(await readInfinibandAdapters(tmp), {
      hcas: [{
        name: "mlx5_0",
        pci_bus_id: PCI,
        numa_node: 1,
        ports: [{
          port: 1,
          state: "ACTIVE",
          physical_state: "LinkUp",
          rate_gbps: 400,
          link_layer: "infiniband",
          roce_v2_gid_index: null,
          active: true,
        }],
        problems: [],
      }],
      problems: [],
    });
  });
});

Deno.test("malformed: a missing rate file is a problem; the rest still parses", async () => {
  await withTempDir(async (tmp) => {
    const { rate: _rate, ...noRate } = GOOD_PORT;
    writeSysfsTree(tmp, oneAdapter(noRate));
    const { hcas, problems } = await readInfinibandAdapters(tmp);
    assertEquals(problems, []);
    assertEquals(hcas[0].problems, ["port 1 rate: missing"]);
    assertEquals(hcas[0].ports[0], {
      port: 1,
      state: "ACTIVE",
      physical_state: "LinkUp",
      rate_gbps: null,
      link_layer: "infiniband",
      roce_v2_gid_index: null,
      active: true,
    });
  });
});

Deno.test("malformed: a garbage state names the expected format", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter({ ...GOOD_PORT, state: "banana" }));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, ['port 1 state: expected "N: STATE", got "banana"']);
    assertEquals(hcas[0].ports[0].state, null);
    assertEquals(hcas[0].ports[0].physical_state, "LinkUp");
    assertEquals(hcas[0].ports[0].rate_gbps, 400);
    assertEquals(hcas[0].ports[0].active, false);
  });
});

Deno.test("malformed: garbage values are clipped to 40 characters in the problem", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter({ ...GOOD_PORT, link_layer: "x".repeat(100) }));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, [
      `port 1 link_layer: expected "InfiniBand" or "Ethernet", got "${"x".repeat(40)}"`,
    ]);
    assertEquals(hcas[0].ports[0].link_layer, null);
  });
});

Deno.test("malformed: an empty phys_state file is a problem", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter({ ...GOOD_PORT, phys_state: "" }));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, ['port 1 phys_state: expected "N: State", got ""']);
    assertEquals(hcas[0].ports[0].physical_state, null);
    assertEquals(hcas[0].ports[0].active, false);
  });
});

Deno.test("malformed: a directory where a file should be", async () => {
  await withTempDir(async (tmp) => {
    const { link_layer: _ll, ...noLinkLayer } = GOOD_PORT;
    writeSysfsTree(tmp, oneAdapter(noLinkLayer));
    await Deno.mkdir(join(portDir(tmp), "link_layer"));
    const { hcas, problems } = await readInfinibandAdapters(tmp);
    assertEquals(problems, []);
    assertEquals(hcas[0].problems, ["port 1 link_layer: is a directory, not a file"]);
    assertEquals(hcas[0].ports[0].link_layer, null);
    assertEquals(hcas[0].ports[0].state, "ACTIVE");
    assertEquals(hcas[0].ports[0].rate_gbps, 400);
  });
});

Deno.test("malformed: a 10 KB attribute file is longer than allowed", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT));
    await Deno.writeTextFile(join(portDir(tmp), "rate"), "4".repeat(10 * 1024));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, ["port 1 rate: longer than 4096 bytes"]);
    assertEquals(hcas[0].ports[0].rate_gbps, null);
    assertEquals(hcas[0].ports[0].state, "ACTIVE");
  });
});

Deno.test("malformed: an attribute of exactly 4096 bytes is still read", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT));
    const text = "400 Gb/sec (4X NDR)";
    await Deno.writeTextFile(join(portDir(tmp), "rate"), text + " ".repeat(4096 - text.length));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, []);
    assertEquals(hcas[0].ports[0].rate_gbps, 400);
  });
});

Deno.test('malformed: numa_node "-1" is null without a problem', async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT, -1));
    const numaPath = join(tmp, "devices/pci0000:00", PCI, "numa_node");
    assertEquals(await Deno.readTextFile(numaPath), "-1\n");
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].numa_node, null);
    assertEquals(hcas[0].problems, []);
    assertEquals(hcas[0].pci_bus_id, PCI);
  });
});

Deno.test('malformed: numa_node "abc" is null with a problem', async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT, 0));
    await Deno.writeTextFile(join(tmp, "devices/pci0000:00", PCI, "numa_node"), "abc\n");
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].numa_node, null);
    assertEquals(hcas[0].problems, ['device/numa_node: not an integer: "abc"']);
    assertEquals(hcas[0].ports[0].active, true);
  });
});

Deno.test("malformed: a missing numa_node file is null without a problem", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT, null));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].pci_bus_id, PCI);
    assertEquals(hcas[0].numa_node, null);
    assertEquals(hcas[0].problems, []);
  });
});

Deno.test("malformed: a sysfs root without class/infiniband has no adapters and no problems", async () => {
  await withTempDir(async (tmp) => {
    assertEquals(await readInfinibandAdapters(tmp), { hcas: [], problems: [] });
    await Deno.mkdir(join(tmp, "class/net"), { recursive: true });
    assertEquals(await readInfinibandAdapters(tmp), { hcas: [], problems: [] });
    assertEquals(await readInfinibandAdapters(join(tmp, "does-not-exist")), {
      hcas: [],
      problems: [],
    });
  });
});

Deno.test("malformed: an empty class/infiniband has no adapters and no problems", async () => {
  await withTempDir(async (tmp) => {
    await Deno.mkdir(join(tmp, "class/infiniband"), { recursive: true });
    assertEquals(await readInfinibandAdapters(tmp), { hcas: [], problems: [] });
  });
});

Deno.test("malformed: class/infiniband that is a file is a node problem", async () => {
  await withTempDir(async (tmp) => {
    await Deno.mkdir(join(tmp, "class"), { recursive: true });
    await Deno.writeTextFile(join(tmp, "class/infiniband"), "not a directory\n");
    const result = await readInfinibandAdapters(tmp);
    assertEquals(result.hcas, []);
    assertEquals(result.problems.length, 1);
    assertOk(
      result.problems[0].startsWith(`cannot list ${tmp}/class/infiniband: `),
      result.problems[0],
    );
  });
});

Deno.test("malformed: a non-numeric port directory is skipped with a problem", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter(GOOD_PORT));
    await Deno.mkdir(join(tmp, "class/infiniband/mlx5_0/ports/foo"));
    const { hcas, problems } = await readInfinibandAdapters(tmp);
    assertEquals(problems, []);
    assertEquals(hcas[0].problems, ["ports/foo: not a port number"]);
    assertEquals(hcas[0].ports.map((p) => p.port), [1]);
    assertEquals(hcas[0].ports[0].active, true);
  });
});

Deno.test("malformed: an empty port directory yields a problem per attribute", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, oneAdapter({}));
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, [
      "port 1 state: missing",
      "port 1 phys_state: missing",
      "port 1 rate: missing",
      "port 1 link_layer: missing",
    ]);
    assertEquals(hcas[0].ports, [{
      port: 1,
      state: null,
      physical_state: null,
      rate_gbps: null,
      link_layer: null,
      roce_v2_gid_index: null,
      active: false,
    }]);
  });
});

Deno.test("malformed: ports are read in numeric order (port 2 before port 10)", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, {
      source: "hand-made",
      hcas: {
        mlx5_0: {
          pci_bus_id: PCI,
          numa_node: 0,
          ports: { "10": GOOD_PORT, "2": { ...GOOD_PORT, state: "1: DOWN" }, "1": GOOD_PORT },
        },
      },
    });
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].ports.map((p) => [p.port, p.active]), [[1, true], [2, false], [
      10,
      true,
    ]]);
  });
});

Deno.test("malformed: unreadable or empty GID slots are skipped, not problems", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(
      tmp,
      oneAdapter({
        ...GOOD_PORT,
        link_layer: "Ethernet",
        gids: { "0": LINK_LOCAL, "1": LINK_LOCAL, "2": ZERO_GID, "4": IPV4_MAPPED },
        gid_types: { "0": "IB/RoCE v1", "1": "RoCE v2", "4": "RoCE v2" },
      }),
    );
    const dir = portDir(tmp);
    // Slot 2: an empty GID whose type the kernel refuses (EINVAL): modelled as
    // a directory. Slot 4: a type without a gids/ file. Slot "x": not an index.
    await Deno.mkdir(join(dir, "gid_attrs/types/2"));
    await Deno.remove(join(dir, "gids/4"));
    await Deno.writeTextFile(join(dir, "gid_attrs/types/x"), "RoCE v2\n");
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].problems, []);
    // Only slot 1 is a usable RoCE v2 entry.
    assertEquals(hcas[0].ports[0].roce_v2_gid_index, 1);
    assertEquals(hcas[0].ports[0].link_layer, "roce");
  });
});

Deno.test("malformed: an InfiniBand port never gets a GID index, even with v2 entries", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(
      tmp,
      oneAdapter({
        ...GOOD_PORT,
        gids: { "0": IPV4_MAPPED },
        gid_types: { "0": "RoCE v2" },
      }),
    );
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].ports[0].link_layer, "infiniband");
    assertEquals(hcas[0].ports[0].roce_v2_gid_index, null);
  });
});

// ---------------------------------------------------------------------------
// The kernel's symlink layout
// ---------------------------------------------------------------------------

/** Writes one port's attribute files into `dir`. */
async function writePort(dir: string, p: PortSpec): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (const [k, v] of Object.entries(p)) {
    if (typeof v === "string") await Deno.writeTextFile(join(dir, k), `${v}\n`);
  }
}

Deno.test("symlinks: pci_bus_id comes from resolving <hca>/device (kernel layout)", async () => {
  await withTempDir(async (tmp) => {
    // As in the talos sample: mlx5_0 -> ../../devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0
    const fn0 = join(tmp, "devices/pci0000:00/0000:00:02.0/0000:04:00.0");
    // As in the OCI sample: mlx5_10 behind ten levels of PCIe switch ports.
    const chain10 =
      "pci0000:ba/0000:ba:01.1/0000:bb:00.0/0000:bc:00.0/0000:bd:00.0/0000:be:10.0/0000:bf:00.0/0000:c0:00.0/0000:c1:00.0/0000:c2:00.0/0000:c3:00.0";
    const fn10 = join(tmp, "devices", chain10);
    await Deno.mkdir(join(tmp, "class/infiniband"), { recursive: true });
    for (const [fn, name, numa] of [[fn0, "mlx5_0", "1"], [fn10, "mlx5_10", "-1"]]) {
      await Deno.mkdir(join(fn, "infiniband", name), { recursive: true });
      await Deno.writeTextFile(join(fn, "numa_node"), `${numa}\n`);
      // The kernel's links: <hca>/device -> ../../../<pci function>, and the class entry.
      await Deno.symlink(`../../../${fn.split("/").pop()}`, join(fn, "infiniband", name, "device"));
      await Deno.symlink(
        `../../devices/${fn.slice(join(tmp, "devices").length + 1)}/infiniband/${name}`,
        join(tmp, "class/infiniband", name),
      );
      await writePort(join(fn, "infiniband", name, "ports/1"), GOOD_PORT);
    }
    // Sanity: the class entry and device are symlinks, not directories.
    assertOk((await Deno.lstat(join(tmp, "class/infiniband/mlx5_0"))).isSymlink);
    assertOk((await Deno.lstat(join(tmp, "class/infiniband/mlx5_10/device"))).isSymlink);
    assertEquals(
      await Deno.readLink(join(tmp, "class/infiniband/mlx5_0")),
      "../../devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0",
    );

    const { hcas, problems } = await readInfinibandAdapters(tmp);
    assertEquals(problems, []);
    assertEquals(hcas.map((h) => [h.name, h.pci_bus_id, h.numa_node, h.problems]), [
      ["mlx5_0", "0000:04:00.0", 1, []],
      ["mlx5_10", "0000:c3:00.0", null, []],
    ]);
    assertEquals(hcas[1].ports[0].active, true);
  });
});

Deno.test("symlinks: no device link means an unknown pci_bus_id, not a problem", async () => {
  await withTempDir(async (tmp) => {
    writeSysfsTree(tmp, {
      source: "hand-made",
      hcas: { mlx5_bond_0: { pci_bus_id: null, numa_node: null, ports: { "1": GOOD_PORT } } },
    });
    assertOk((await Deno.lstat(join(tmp, "class/infiniband/mlx5_bond_0"))).isSymlink);
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].pci_bus_id, null);
    assertEquals(hcas[0].numa_node, null);
    assertEquals(hcas[0].problems, []);
  });
});

Deno.test("symlinks: a device that is not a PCI function gives a null pci_bus_id", async () => {
  await withTempDir(async (tmp) => {
    // Soft-RoCE (rxe) style: the parent is a virtual device, not a PCI address.
    const parent = join(tmp, "devices/virtual/net/eth0");
    const dir = join(parent, "infiniband/rxe0");
    await Deno.mkdir(dir, { recursive: true });
    await Deno.symlink("../../../eth0", join(dir, "device"));
    await Deno.mkdir(join(tmp, "class/infiniband"), { recursive: true });
    await Deno.symlink(
      "../../devices/virtual/net/eth0/infiniband/rxe0",
      join(tmp, "class/infiniband/rxe0"),
    );
    await writePort(join(dir, "ports/1"), { ...GOOD_PORT, link_layer: "Ethernet" });
    const { hcas } = await readInfinibandAdapters(tmp);
    assertEquals(hcas[0].name, "rxe0");
    assertEquals(hcas[0].pci_bus_id, null);
    assertEquals(hcas[0].ports[0].link_layer, "roce");
    assertEquals(hcas[0].ports[0].roce_v2_gid_index, null);
  });
});

Deno.test("symlinks: a dangling class symlink is an adapter with problems, not a throw", async () => {
  await withTempDir(async (tmp) => {
    await Deno.mkdir(join(tmp, "class/infiniband"), { recursive: true });
    await Deno.symlink(
      "../../devices/gone/infiniband/mlx5_9",
      join(tmp, "class/infiniband/mlx5_9"),
    );
    const { hcas, problems } = await readInfinibandAdapters(tmp);
    assertEquals(problems, []);
    assertEquals(hcas, [{
      name: "mlx5_9",
      pci_bus_id: null,
      numa_node: null,
      ports: [],
      problems: ["no ports directory"],
    }]);
  });
});
