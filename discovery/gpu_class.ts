/**
 * GPU classes (design §2): two GPUs are interchangeable only if they are the
 * same product with the same memory. The class is `<model>-<GiB>g`.
 *
 * @module
 */

/** Vendor and brand words that never distinguish a product. */
const BRAND_WORDS = new Set(["nvidia", "tesla", "geforce", "quadro"]);

/**
 * Form-factor and memory-technology tokens: they name how a product is packaged
 * or what memory it carries, which the GiB size already captures. `pcie` is
 * deliberately not here: see {@link gpuClass}.
 */
const PACKAGING_WORDS = new Set([
  "sxm",
  "sxm2",
  "sxm3",
  "sxm4",
  "sxm5",
  "sxm6",
  "hbm",
  "hbm2",
  "hbm2e",
  "hbm3",
  "hbm3e",
  "gddr6",
  "gddr6x",
  "gddr7",
]);

/**
 * Words after the model number that name a different product rather than a
 * packaging of the same one: an H100 NVL is not an H100 SXM, an RTX 6000 Ada
 * is not a Quadro RTX 6000, an H100 PCIe has fewer SMs and slower memory than
 * an H100 SXM.
 */
const VARIANT_WORDS = new Set([
  "pcie",
  "nvl",
  "ada",
  "blackwell",
  "max",
  "ti",
  "super",
  "mig",
]);

/** A memory size token such as `80gb`, `48g`, `141gb`, `480gb`. */
const MEMORY_TOKEN = /^\d+(gb|g|gib)$/;

/**
 * Derives the GPU class used for placement from the product name nvidia-smi
 * prints and the driver's total memory in MiB (design §2).
 *
 * - The model token is the first word of the lower-cased name, after dropping
 *   vendor words (nvidia, tesla, geforce, quadro), that contains a digit and
 *   is not a memory or packaging token (80gb, sxm5, hbm3).
 * - A bare number keeps the series words before it, so "GeForce RTX 4090" is
 *   `rtx4090`, not `4090`, and "RTX PRO 6000" is `rtxpro6000`.
 * - Variant words after it are appended (`pcie`, `nvl`, `ada`, …), because
 *   NVIDIA sells different products under one number: "NVIDIA H100 PCIe" is
 *   `h100pcie-80g`, "NVIDIA H100 80GB HBM3" and "H100-SXM5-80GB" are
 *   `h100-80g`, "NVIDIA RTX 6000 Ada Generation" is `rtx6000ada-48g` while
 *   "Quadro RTX 6000" is `rtx6000-24g`.
 * - The size is the driver's MiB / 1024, rounded: an L40S reports 46068 MiB,
 *   so it is `l40s-45g` whatever the box says (design §2: consistency matters
 *   more than the marketing number, because the number decides what fits).
 *
 * @param name The product name as nvidia-smi prints it, e.g. "NVIDIA L40S".
 * @param memoryTotalMiB The driver's total memory in MiB.
 * @returns The class, e.g. `l40s-45g`.
 * @throws {RangeError} When the name is empty or the memory is not a positive number.
 *
 * @example
 * ```ts
 * import { gpuClass } from "./gpu_class.ts";
 * gpuClass("NVIDIA H100 80GB HBM3", 81559); // "h100-80g"
 * ```
 */
export function gpuClass(name: string, memoryTotalMiB: number): string {
  if (!Number.isFinite(memoryTotalMiB) || memoryTotalMiB <= 0) {
    throw new RangeError(
      `Cannot derive GPU class for "${name}": memory total must be a positive number of MiB, got ${memoryTotalMiB}`,
    );
  }
  const tokens = name.toLowerCase().split(/[^a-z0-9]+/).filter((t) => t !== "");
  const words = tokens.filter((t) => !BRAND_WORDS.has(t));
  if (words.length === 0) {
    throw new RangeError("Cannot derive GPU class: product name is empty");
  }
  const modelAt = words.findIndex((t) =>
    /\d/.test(t) && !MEMORY_TOKEN.test(t) && !PACKAGING_WORDS.has(t)
  );
  let model: string;
  if (modelAt === -1) {
    // No word with a digit ("Graphics Device"): the whole name, so that an
    // unknown product still gets a class of its own rather than a shared one.
    model = words.filter((t) => !PACKAGING_WORDS.has(t) && !MEMORY_TOKEN.test(t)).join("");
  } else {
    const series = /^\d+$/.test(words[modelAt])
      ? words.slice(0, modelAt).filter((t) => !/\d/.test(t)).join("")
      : "";
    const variants = words.slice(modelAt + 1).filter((t) => VARIANT_WORDS.has(t));
    model = series + words[modelAt] + [...new Set(variants)].join("");
  }
  return `${model}-${Math.round(memoryTotalMiB / 1024)}g`;
}
