import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { readFixture } from "../tests/fixtures.ts";
import { applyComputeApps, parseComputeApps } from "./compute_apps.ts";
import { parseGpuQuery } from "./gpu_query.ts";
import type { Gpu } from "./types.ts";

Deno.test("parseComputeApps reads recorded outputs, whatever the column names", () => {
  // Recorded with `used_memory` queried; nvidia-smi prints `used_gpu_memory [MiB]`.
  const { apps, problems } = parseComputeApps(readFixture("machines/h100_sxm_vm/compute_apps.csv"));
  assertEquals(problems, []);
  assertEquals(apps, [
    { gpu_uuid: "GPU-00000000-0000-0000-0000-000000000000", pid: 11327, used_memory_mb: 2566 },
    { gpu_uuid: "GPU-00000000-0000-0000-0000-000000000000", pid: 11328, used_memory_mb: 1542 },
    { gpu_uuid: "GPU-00000000-0000-0000-0000-000000000000", pid: 11345, used_memory_mb: 15690 },
  ]);
  // An idle GPU: the header alone.
  assertEquals(parseComputeApps(readFixture("machines/h100_sxm_vm/compute_apps_idle_empty.csv")), {
    apps: [],
    problems: [],
  });
  // vGPU guests: no pid column at all.
  const vgpu = parseComputeApps(readFixture("nvidia_smi_misc/compute_apps_gpu_uuid_name_vgpu.csv"));
  assertEquals(vgpu.apps.map((a) => a.pid), [null, null, null]);
});

Deno.test("parseComputeApps accepts 'No running processes found' and empty output", () => {
  assertEquals(parseComputeApps("No running processes found\n").apps, []);
  assertEquals(parseComputeApps("").apps, []);
});

function gpu(index: number, uuid: string, used: number | null): Gpu {
  return {
    index,
    uuid,
    name: "NVIDIA H100 80GB HBM3",
    class: "h100-80g",
    memory_total_mb: 81559,
    memory_used_mb: used,
    compute_capability: "9.0",
    numa_node: 0,
    pci_bus_id: null,
    driver_version: null,
    cuda_version: null,
    nvlink_peers: [],
    health: { ecc_errors: 0, temperature_c: 30, problems: [] },
  };
}

Deno.test("applyComputeApps marks GPUs held by processes that are not llmgw's", () => {
  const gpus = [gpu(0, "GPU-a", 20000), gpu(1, "GPU-b", 40000), gpu(2, "GPU-c", 1)];
  const problems = applyComputeApps(gpus, [
    { gpu_uuid: "GPU-a", pid: 4242, used_memory_mb: 20000 },
    { gpu_uuid: "GPU-b", pid: 7, used_memory_mb: 40000 },
    { gpu_uuid: "GPU-x", pid: 9, used_memory_mb: 1 },
  ], { ownPids: new Set([7]) });
  assertEquals(gpus[0].health.problems, [
    "memory held by a process that is not llmgw's: pid 4242 uses 20000 MiB",
  ]);
  assertEquals(gpus[1].health.problems, []); // ours
  assertEquals(gpus[2].health.problems, []); // idle
  assertEquals(problems, ["a process holds memory on GPU GPU-x, which --query-gpu did not list"]);
});

Deno.test("applyComputeApps flags memory no listed process explains", () => {
  // Processes in another container are invisible: the GPU still is not free.
  const gpus = [gpu(0, "GPU-a", 78942), gpu(1, "GPU-b", 600), gpu(2, "GPU-c", null)];
  applyComputeApps(gpus, []);
  assertStringIncludes(
    gpus[0].health.problems[0],
    "78942 MiB in use by processes nvidia-smi does not list",
  );
  assertEquals(gpus[1].health.problems, []); // under the 1024 MiB allowance
  assertEquals(gpus[2].health.problems, []); // unknown use is not evidence
  const strict = [gpu(0, "GPU-a", 600)];
  applyComputeApps(strict, [], { unattributedMemoryLimitMiB: 100 });
  assertEquals(strict[0].health.problems.length, 1);
});

Deno.test("applyComputeApps names a process nvidia-smi cannot identify", () => {
  const gpus = [gpu(0, "GPU-a", 5000)];
  applyComputeApps(gpus, [{ gpu_uuid: "GPU-a", pid: null, used_memory_mb: null }]);
  assertEquals(gpus[0].health.problems, [
    "memory held by a process that is not llmgw's: a process nvidia-smi cannot identify uses memory",
  ]);
});

Deno.test("compute apps on a recorded machine make its GPU unhealthy", () => {
  const { gpus } = parseGpuQuery(readFixture("machines/rtx4080super_workstation/query_gpu.csv"));
  const { apps } = parseComputeApps(
    readFixture("machines/rtx4080super_workstation/compute_apps.csv"),
  );
  applyComputeApps(gpus, apps);
  assertEquals(gpus[0].health.problems, [
    "memory held by a process that is not llmgw's: pid 2165 uses 25 MiB",
  ]);
});
