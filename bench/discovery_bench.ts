/**
 * Discovery parsing cost (design §16: "discovery well under a second beyond
 * nvidia-smi's own time"). Run: `deno task bench`. Figures: docs/benchmarks.md.
 */
import { parseGpuQuery, parseTopoMatrix, readInfinibandAdapters } from "../discovery/mod.ts";
import { fixturePath, readFixture } from "../tests/fixtures.ts";

const wideCsv = readFixture("machines/h100_sxm_vm/query_gpu.csv"); // 212 fields, 1 GPU
const header = wideCsv.split("\n")[0];
const row = wideCsv.split("\n")[1];
// An 8-GPU node with the same 212 fields.
const wide8 = [header, ...Array.from({ length: 8 }, (_, i) => row.replace(/, 0, /, `, ${i}, `))]
  .join("\n");
const narrow8 = readFixture("machines/dgx_h100_8x_nics/query_gpu.csv");
const topo = readFixture("machines/dgx_h100_8x_nics/topo.txt");
const sysfs = fixturePath("machines/dgx_h100_8x_nics/sysfs");

Deno.bench("parseGpuQuery, 8 GPUs x 5 fields", { group: "query-gpu", baseline: true }, () => {
  parseGpuQuery(narrow8);
});
Deno.bench("parseGpuQuery, 8 GPUs x 212 fields", { group: "query-gpu" }, () => {
  parseGpuQuery(wide8);
});
Deno.bench("parseTopoMatrix, DGX H100 (8 GPUs, 8 NICs)", () => {
  parseTopoMatrix(topo);
});
Deno.bench("readInfinibandAdapters, 12 adapters from a sysfs tree", async () => {
  await readInfinibandAdapters(sysfs);
});
