import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { readFixture } from "../tests/fixtures.ts";
import {
  inaccessibleGpus,
  invalidQueryField,
  normalizePciBusId,
  parseCudaVersion,
  parseGpuQuery,
} from "./gpu_query.ts";

Deno.test("parseGpuQuery reads recorded machines of every kind", () => {
  // [machine, GPU count, class, compute capability of GPU 0, bus id of GPU 0]
  const machines: [string, number, string, string | null, string | null][] = [
    ["dgx_h100_8x_nics", 8, "h100-80g", null, null],
    ["h100_sxm_vm", 1, "h100-80g", "9.0", "0000:00:09.0"],
    ["h200_sxm_vm", 1, "h200-140g", "9.0", "0000:83:00.0"],
    ["l40s_pcie_vm", 1, "l40s-45g", "8.9", "0000:01:00.0"],
    ["rtx4080super_workstation", 1, "rtx4080super-16g", "8.9", "0000:01:00.0"],
    ["rtx4090_8x_server", 8, "rtx4090-24g", null, null],
  ];
  for (const [machine, count, cls, cc, bus] of machines) {
    const { gpus, problems } = parseGpuQuery(readFixture(`machines/${machine}/query_gpu.csv`));
    assertEquals(problems, [], machine);
    assertEquals(gpus.length, count, machine);
    assertEquals(gpus.map((g) => g.index), [...Array(count).keys()], machine);
    for (const g of gpus) assertEquals(g.class, cls, machine);
    assertEquals(gpus[0].compute_capability, cc, machine);
    assertEquals(gpus[0].pci_bus_id, bus, machine);
  }
});

Deno.test("parseGpuQuery keeps unknown values null, never zero", () => {
  // The RTX 4080 SUPER capture reports every ECC field as [N/A].
  const [gpu] = parseGpuQuery(readFixture("machines/rtx4080super_workstation/query_gpu.csv")).gpus;
  assertEquals(gpu.health.ecc_errors, null);
  assertEquals(gpu.health.temperature_c, 43);
  assertEquals(gpu.memory_total_mb, 16376);
  assertEquals(gpu.memory_used_mb, 596);
  assertEquals(gpu.driver_version, "595.71.05");
  assertEquals(gpu.health.problems, []);
  // A data-centre card reports a real zero.
  const [h100] = parseGpuQuery(readFixture("machines/h100_sxm_vm/query_gpu.csv")).gpus;
  assertEquals(h100.health.ecc_errors, 0);
  assertEquals(h100.uuid, "GPU-00000000-0000-0000-0000-000000000000");
});

Deno.test("parseGpuQuery works with any field order and subset", () => {
  // Recorded: a TITAN V and an RTX 5880 Ada queried as compute_cap first, index last.
  const { gpus, problems } = parseGpuQuery(
    readFixture("nvidia_smi_misc/compute_cap_mode_driver_name_index.csv"),
  );
  assertEquals(problems, []);
  assertEquals(gpus.map((g) => [g.index, g.name, g.compute_capability, g.driver_version]), [
    [0, "NVIDIA TITAN V", "7.0", "570.86.15"],
    [1, "NVIDIA RTX 5880 Ada Generation", "8.9", "570.86.15"],
  ]);
  // No memory.total: the class cannot be known, which makes the GPU unschedulable.
  assertEquals(gpus[0].class, null);
  assertStringIncludes(gpus[0].health.problems.join(), "class unknown");
});

Deno.test("parseGpuQuery turns error states, ECC errors and lost GPUs into problems", () => {
  const csv = [
    "index, uuid, name, memory.total [MiB], memory.used [MiB], ecc.errors.uncorrected.volatile.total, temperature.gpu",
    "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920 MiB, 4 MiB, 0, 30",
    "1, GPU-b, NVIDIA A100-SXM4-80GB, [Unknown Error], [GPU requires reset], [N/A], [N/A]",
    "2, GPU-c, NVIDIA A100-SXM4-80GB, 81920 MiB, 4 MiB, 2, 31",
    "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
    "",
  ].join("\n");
  const { gpus, problems } = parseGpuQuery(csv);
  assertEquals(gpus.map((g) => g.index), [0, 1, 2]);
  assertEquals(gpus[0].health.problems, []);
  assertEquals(gpus[0].class, "a100-80g");
  assertStringIncludes(gpus[1].health.problems.join("|"), "memory.total in an error state");
  assertStringIncludes(gpus[1].health.problems.join("|"), "[GPU requires reset]");
  assertEquals(gpus[1].health.ecc_errors, null);
  assertEquals(gpus[1].memory_total_mb, null);
  assertEquals(gpus[2].health.problems, ["uncorrected ECC errors: 2 (volatile count)"]);
  assertEquals(problems, ["GPU at PCI 0000:3b:00.0 is inaccessible: Unknown Error"]);
});

Deno.test("parseGpuQuery skips rows it cannot identify and says why", () => {
  const { gpus, problems } = parseGpuQuery(
    "index, name, memory.total [MiB]\nzero, X, 1 MiB\n1, NVIDIA L4, 23034 MiB\n1, NVIDIA L4, 23034 MiB\n2, NVIDIA L4\n",
  );
  assertEquals(gpus.map((g) => g.index), [1]);
  assertEquals(problems.length, 3);
  assertStringIncludes(problems.join("|"), "line 2: GPU index is missing or invalid");
  assertStringIncludes(problems.join("|"), "GPU index 1 appears twice");
  assertStringIncludes(problems.join("|"), "line 5: expected 3 values, got 2");
});

Deno.test("parseGpuQuery without an index column returns no GPUs and a problem", () => {
  const { gpus, problems } = parseGpuQuery("compute_cap\n8.9\n");
  assertEquals(gpus, []);
  assertStringIncludes(problems[0], "no index column");
});

Deno.test("normalizePciBusId gives the sysfs form", () => {
  assertEquals(normalizePciBusId("00000000:18:00.0"), "0000:18:00.0");
  assertEquals(normalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  assertEquals(normalizePciBusId("0001:C3:00.1"), "0001:c3:00.1");
  assertEquals(normalizePciBusId("18:00.0"), "0000:18:00.0");
  assertEquals(normalizePciBusId("1:18:00.0"), "0001:18:00.0");
  assertEquals(normalizePciBusId("GPU-0"), null);
  assertEquals(normalizePciBusId("100000000:18:00.0"), null);
});

Deno.test("invalidQueryField reads nvidia-smi's refusal", () => {
  assertEquals(
    invalidQueryField(readFixture("nvidia_smi_misc/invalid_field_compute_cap.txt")),
    "compute_cap",
  );
  assertEquals(invalidQueryField(readFixture("nvidia_smi_misc/invalid_field_id.txt")), "id");
  assertEquals(invalidQueryField("index, name\n0, X\n"), null);
});

Deno.test("parseCudaVersion reads every recorded format", () => {
  assertEquals(parseCudaVersion(readFixture("nvidia_smi_misc/smi_version_590.txt")), "13.1");
  // Driver 610: "CUDA version : Deprecated, see CUDA UMD version", then the UMD line.
  assertEquals(parseCudaVersion(readFixture("nvidia_smi_misc/smi_version_610.txt")), "13.3");
  // The plain `nvidia-smi` table header.
  assertEquals(parseCudaVersion(readFixture("machines/l40s_pcie_vm/smi_version.txt")), "13.2");
  assertEquals(parseCudaVersion("NVIDIA-SMI version  : 470.57\n"), null);
});

Deno.test("inaccessibleGpus names each lost GPU", () => {
  assertEquals(
    inaccessibleGpus(
      "Unable to determine the device handle for GPU 00000000:B1:00.0: GPU is lost.  Reboot the system to recover this GPU\n",
    ),
    ["GPU at PCI 0000:b1:00.0 is inaccessible: GPU is lost.  Reboot the system to recover this GPU"],
  );
  assertOk(inaccessibleGpus("index\n0\n").length === 0);
});

Deno.test("parseGpuQuery survives a name that yields no class", () => {
  const { gpus } = parseGpuQuery("index, name, memory.total [MiB]\n0, NVIDIA, 1024 MiB\n");
  assertEquals(gpus[0].class, null);
  assertStringIncludes(gpus[0].health.problems[0], "class unknown: Cannot derive GPU class");
});
