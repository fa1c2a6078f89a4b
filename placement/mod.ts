/**
 * Placement (design §7): pure, deterministic, explained.
 *
 * @module
 */
export * from "./types.ts";
export { type LabelFacts, type ReasonCode, reasonLabel, REASONS } from "./reasons.ts";
export {
  type AppliedShard,
  applyPlacement,
  type ClassMember,
  type ClassSlot,
  type ClusterIndex,
  compareIds,
  indexCluster,
  type IndexedNode,
  type IndexOptions,
  type NodeModelCache,
  withoutNodes,
} from "./cluster_index.ts";
export { type ReleasedShard, releasePlacement } from "./release.ts";
export { chooseGpus, nvlinkDomains } from "./gpu_choice.ts";
export {
  computeCapabilityFilter,
  diskFullBackoffFilter,
  diskKey,
  diskName,
  engineFilter,
  freeGpusFilter,
  gpuMemoryFilter,
  type ModelDisk,
  modelDisk,
  NODE_FILTERS,
  type NodeFilter,
  nodeSelectorFilter,
  nodeSizeFilter,
  nodeStateFilter,
  type ProfileContext,
  profileContext,
  STABLE_FILTERS,
  tensorParallelHeadsFilter,
} from "./filters.ts";
export { formatCount } from "./groups.ts";
export {
  explanationLines,
  type ExplanationLinesOptions,
  place,
  type PlaceOptions,
  placeReplica,
} from "./place.ts";
export type { CheckpointQuantization, ModelFacts } from "../models/model_facts.ts";
