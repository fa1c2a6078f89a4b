/**
 * Deployments and profiles (plan §6): schema, loading and validation.
 *
 * @module
 */
export { type Deployment, deploymentJsonSchema, type Profile } from "./schema.ts";
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
  compareComputeCapability,
  type DeploymentIssue,
  FP8_MIN_COMPUTE_CAPABILITY,
  resolveGpusPerNode,
  validateDeployment,
  type ValidateOptions,
  type ValidationResult,
} from "./validate.ts";
