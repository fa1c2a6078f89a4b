/**
 * Deployments and profiles (design §6): schema, loading and validation.
 *
 * @module
 */
export {
  DEFAULT_ROUTING,
  type Deployment,
  deploymentJsonSchema,
  type Profile,
  ROUTING_POLICIES,
  type RoutingPolicy,
} from "./schema.ts";
export {
  DeploymentError,
  type LoadedDeployment,
  parseDeployment,
  parseDeploymentText,
} from "./load.ts";
export {
  BUILTIN_ENGINES,
  type ClassFacts,
  classFacts,
  type ClassSize,
  type DeploymentIssue,
  resolveGpusPerNode,
  validateDeployment,
  type ValidateOptions,
  type ValidationResult,
} from "./validate.ts";
export {
  compareComputeCapability,
  FP8_MIN_COMPUTE_CAPABILITY,
  fp8Capable,
  fp8Requirement,
  needsFp8Hardware,
} from "./quantization.ts";
export type { ModelFit } from "./model_fit.ts";
export type { MemoryEstimate } from "../models/memory_estimate.ts";
export { type ParallelismProblem, parallelismProblems, type ParallelShape } from "./parallelism.ts";
