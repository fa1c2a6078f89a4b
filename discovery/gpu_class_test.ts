import { assertEquals, assertThrows } from "../tests/assert.ts";
import { gpuClass } from "./gpu_class.ts";

// Names as nvidia-smi prints them and the MiB the driver reports for each
// product (recorded outputs in tests/fixtures/machines and public issues).
const cases: [name: string, mib: number, expected: string][] = [
  ["NVIDIA H100 80GB HBM3", 81559, "h100-80g"],
  ["H100-SXM5-80GB", 81559, "h100-80g"],
  ["NVIDIA H100 PCIe", 81559, "h100pcie-80g"],
  ["NVIDIA H100 NVL", 95830, "h100nvl-94g"],
  ["NVIDIA H200", 143771, "h200-140g"],
  ["NVIDIA H200 NVL", 143771, "h200nvl-140g"],
  ["NVIDIA GH200 480GB", 97871, "gh200-96g"],
  ["NVIDIA B200", 183359, "b200-179g"],
  ["NVIDIA A100-SXM4-80GB", 81920, "a100-80g"],
  ["NVIDIA A100-SXM4-40GB", 40960, "a100-40g"],
  ["NVIDIA A100 80GB PCIe", 81920, "a100pcie-80g"],
  ["NVIDIA A100-PCIE-40GB", 40960, "a100pcie-40g"],
  ["NVIDIA L40S", 46068, "l40s-45g"],
  ["NVIDIA L4", 23034, "l4-22g"],
  ["NVIDIA A10G", 23028, "a10g-22g"],
  ["Tesla V100-SXM2-16GB", 16384, "v100-16g"],
  ["Tesla T4", 15360, "t4-15g"],
  ["NVIDIA GeForce RTX 4090", 24564, "rtx4090-24g"],
  ["NVIDIA GeForce RTX 3090", 24576, "rtx3090-24g"],
  ["NVIDIA GeForce RTX 4070 Ti SUPER", 16376, "rtx4070tisuper-16g"],
  ["NVIDIA RTX 6000 Ada Generation", 49140, "rtx6000ada-48g"],
  ["Quadro RTX 6000", 24576, "rtx6000-24g"],
  ["NVIDIA RTX A6000", 49140, "a6000-48g"],
  ["NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, "rtxpro6000blackwell-96g"],
  ["Graphics Device", 81559, "graphicsdevice-80g"],
];

Deno.test("gpuClass derives design §2 classes from real product names", () => {
  for (const [name, mib, expected] of cases) {
    assertEquals(gpuClass(name, mib), expected, `${name} (${mib} MiB)`);
  }
});

Deno.test("gpuClass keeps distinct products distinct", () => {
  const classes = new Map<string, string>();
  const sameProduct = new Set(["NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"]);
  for (const [name, mib] of cases) {
    const cls = gpuClass(name, mib);
    const other = classes.get(cls);
    if (other !== undefined && !(sameProduct.has(other) && sameProduct.has(name))) {
      throw new Error(`${name} and ${other} collide on ${cls}`);
    }
    classes.set(cls, name);
  }
});

Deno.test("gpuClass rejects unusable input with a clear error", () => {
  assertThrows(() => gpuClass("NVIDIA L40S", 0), RangeError, "memory total must be a positive");
  assertThrows(() => gpuClass("NVIDIA L40S", Number.NaN), RangeError, "L40S");
  assertThrows(() => gpuClass("  nvidia ", 1024), RangeError, "product name is empty");
});
