import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { readFixture } from "../tests/fixtures.ts";
import { parseTopoMatrix, TopoParseError } from "./topo_matrix.ts";

const all = (n: number, self: number) => [...Array(n).keys()].filter((i) => i !== self);

Deno.test("parseTopoMatrix reads NVLink peers and NUMA affinity from recorded machines", () => {
  // [fixture, GPU count, NVLinked all-to-all?, NUMA affinity per GPU]
  const cases: [string, number, boolean, (number | null)[]][] = [
    // NV18 with NIC0..NIC7 columns and a NIC legend.
    ["machines/dgx_h100_8x_nics/topo.txt", 8, true, [0, 0, 0, 0, 1, 1, 1, 1]],
    // NV12, no NICs.
    ["machines/aws_p4d_a100_sxm4_40gb/topo.txt", 8, true, [0, 0, 0, 0, 1, 1, 1, 1]],
    // Older driver: the NIC column is named mlx5_0 and there is no GPU NUMA ID column.
    ["machines/hgx_a100_sxm4_mlx5_legacy/topo.txt", 8, true, [3, 3, 1, 1, 7, 7, 5, 5]],
    // Six H100s and two NICs.
    ["nvidia_smi_misc/topo_h100_6gpu_2nic.txt", 6, true, [0, 0, 0, 1, 1, 1]],
    // PCIe cards: NODE and PHB are not NVLink.
    ["machines/aws_g6e_l40s_4x/topo.txt", 4, false, [0, 0, 0, 0]],
    ["nvidia_smi_misc/topo_2x_rtx5090_phb.txt", 2, false, [0, 0]],
    // Tab-separated single-GPU matrices.
    ["machines/h100_sxm_vm/topo.txt", 1, false, [0]],
    ["machines/h200_sxm_vm/topo.txt", 1, false, [0]],
    ["machines/l40s_pcie_vm/topo.txt", 1, false, [0]],
    ["machines/rtx4080super_workstation/topo.txt", 1, false, [0]],
  ];
  for (const [file, n, nvlink, numa] of cases) {
    const m = parseTopoMatrix(readFixture(file));
    assertEquals(m.problems, [], file);
    assertEquals([...m.gpus.keys()], [...Array(n).keys()], file);
    for (const [i, g] of m.gpus) {
      assertEquals(g.nvlinkPeers, nvlink ? all(n, i) : [], `${file} GPU${i}`);
    }
    assertEquals([...m.gpus.values()].map((g) => g.numaAffinity), numa, file);
  }
});

Deno.test("parseTopoMatrix reads partial NVLink domains", () => {
  // Two NVLink pairs (as on 4-GPU boards with bridges): NV4 between 0-1 and 2-3 only.
  const text = [
    "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
    "GPU0\t X \tNV4\tSYS\tSYS\tPIX\t0-31\t0\t\tN/A",
    "GPU1\tNV4\t X \tSYS\tSYS\tPIX\t0-31\t0\t\tN/A",
    "GPU2\tSYS\tSYS\t X \tNV4\tSYS\t32-63\t1\t\tN/A",
    "GPU3\tSYS\tSYS\tNV4\t X \tSYS\t32-63\t1\t\tN/A",
    "NIC0\tPIX\tPIX\tSYS\tSYS\t X ",
    "",
    "Legend:",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
  ].join("\n");
  const m = parseTopoMatrix(text);
  assertEquals([...m.gpus.values()].map((g) => g.nvlinkPeers), [[1], [0], [3], [2]]);
  assertEquals([...m.gpus.values()].map((g) => g.numaAffinity), [0, 0, 1, 1]);
});

Deno.test("parseTopoMatrix reports garbage and truncated rows without throwing past its error", () => {
  assertThrows(() => parseTopoMatrix(""), TopoParseError, "no header row");
  assertThrows(() => parseTopoMatrix("\x00\x01garbage\nGPU0 X\n"), TopoParseError, "no header row");
  const truncated = parseTopoMatrix(
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV12\t0-7\t0\nGPU1\tNV1",
  );
  assertEquals([...truncated.gpus.keys()], [0]);
  assertStringIncludes(truncated.problems[0], "line 3: expected 2 cells, got 1");
  const headerOnly = parseTopoMatrix("\tGPU0\tCPU Affinity\n");
  assertStringIncludes(headerOnly.problems[0], "no GPU rows");
});
