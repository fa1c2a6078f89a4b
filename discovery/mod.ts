/**
 * Hardware discovery (design §5): GPUs through nvidia-smi, InfiniBand and RoCE
 * adapters through sysfs, fabric attachments from the operator's assignment.
 *
 * @module
 */
export * from "./types.ts";
export { gpuClass } from "./gpu_class.ts";
export {
  type CsvColumn,
  type CsvRow,
  type CsvTable,
  NvidiaSmiParseError,
  parseCsvTable,
  smiNumber,
  type SmiValue,
  smiValue,
} from "./nvidia_smi_csv.ts";
export {
  GPU_QUERY_FIELDS,
  type GpuQueryResult,
  inaccessibleGpus,
  invalidQueryField,
  normalizePciBusId,
  parseCudaVersion,
  parseGpuQuery,
} from "./gpu_query.ts";
export {
  applyComputeApps,
  COMPUTE_APPS_FIELDS,
  type ComputeApp,
  type ComputeAppsResult,
  type OwnershipOptions,
  parseComputeApps,
} from "./compute_apps.ts";
export { parseTopoMatrix, type TopoGpu, type TopoMatrix, TopoParseError } from "./topo_matrix.ts";
export {
  chooseRoceV2GidIndex,
  type GidEntry,
  parseLinkLayer,
  parsePortState,
  parseRate,
  readInfinibandAdapters,
} from "./infiniband.ts";
export {
  attachFabrics,
  type FabricConfig,
  FabricConfigError,
  parseFabricFlag,
  validateFabricConfig,
} from "./fabrics.ts";
export {
  CommandError,
  type CommandFailureKind,
  type CommandOutput,
  runCommand,
  type RunLimits,
} from "./run_command.ts";
export { discoverInventory, type DiscoveryOptions } from "./discover.ts";
