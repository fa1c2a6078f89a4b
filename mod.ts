/**
 * llmgw's public API for engine-plugin authors and tools.
 *
 * This release exports hardware discovery (design §5): the nvidia-smi and
 * sysfs parsers, the GPU class derivation of design §2, fabric attachment, and
 * the inventory types that the scheduler consumes.
 *
 * @example Derive a GPU class
 * ```ts
 * import { gpuClass } from "./mod.ts";
 * gpuClass("NVIDIA L40S", 46068); // "l40s-45g"
 * ```
 *
 * @example Parse recorded nvidia-smi output
 * ```ts
 * import { parseGpuQuery } from "./mod.ts";
 * const { gpus } = parseGpuQuery(
 *   "index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\n",
 * );
 * gpus[0].class; // "h100-80g"
 * ```
 *
 * @module
 */
export * from "./discovery/mod.ts";
export * from "./deployment/mod.ts";
export type { Allocation, ClusterNode, NodeState } from "./inventory/types.ts";
export { NODE_STATES } from "./inventory/types.ts";
export * from "./placement/mod.ts";
export { type FieldPath, formatPath, type InputIssue } from "./validation/issues.ts";
export * from "./engines/mod.ts";
