/**
 * The control plane's inventory (plan §4): node types, the node lifecycle,
 * the in-memory store, and the cluster file of `llmgw plan`.
 *
 * @module
 */
export * from "./types.ts";
export * from "./node_state.ts";
export * from "./store.ts";
export { ClusterFileError, ClusterFileSchema, parseClusterFile } from "./cluster_file.ts";
