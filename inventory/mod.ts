/**
 * The control plane's inventory (design §4): node types, the node lifecycle,
 * the in-memory store, and the cluster file of `llmgw plan`.
 *
 * @module
 */
export * from "./types.ts";
export * from "./node_state.ts";
export * from "./store.ts";
export { ClusterFileError, parseClusterFile } from "./cluster_file.ts";
export type {
  FabricAttachment,
  FabricPort,
  Gpu,
  GpuHealth,
  LinkLayer,
} from "../discovery/types.ts";
export type { FieldPath, InputIssue } from "../validation/issues.ts";
