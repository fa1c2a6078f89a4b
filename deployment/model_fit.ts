/**
 * A deployment's model against its profiles' GPUs (issue #25 item 6): the
 * one place that puts a model's facts (models/model_facts.ts), the engine's
 * memory settings (engines/memory_settings.ts) and the memory estimate
 * (models/memory_estimate.ts) together. Placement's filters ask
 * {@link modelFit} per profile; `apply`, `plan` and `scale` ask
 * {@link modelIssues}.
 *
 * Facts are optional: a model whose facts are unknown, or an engine whose
 * memory settings are unknown (a plugin), is refused nothing.
 *
 * @module
 */
import { type EngineMemorySettings, engineMemorySettings } from "../engines/memory_settings.ts";
import {
  classMemoryBytes,
  estimateMemory,
  fitsGpu,
  insufficientMemoryText,
  type MemoryEstimate,
  tensorParallelProblem,
} from "../models/memory_estimate.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import type { DeploymentIssue } from "./validate.ts";
import type { Deployment, Profile } from "./schema.ts";

/** A model against one profile. */
export interface ModelFit {
  /** The model's facts. */
  facts: ModelFacts;
  /** The engine's memory settings for the profile. */
  settings: EngineMemorySettings;
  /** What one GPU of a replica needs. */
  estimate: MemoryEstimate;
  /** Why the engine would refuse the profile's tensor_parallel; null when it divides the heads. */
  tensorParallelProblem: string | null;
  /** Identifies this fit among a profile's possible ones (placement memoizes per profile). */
  key: string;
}

/** The model against `profile`; null when the engine's memory settings are unknown. */
export function modelFit(facts: ModelFacts, profile: Profile): ModelFit | null {
  const settings = engineMemorySettings(
    profile.engine,
    profile.engine_args,
    profile.tensor_parallel,
  );
  if (settings === null) return null;
  const estimate = estimateMemory(facts, profile, settings);
  const tensorParallelProblemText = tensorParallelProblem(facts, profile.tensor_parallel);
  return {
    facts,
    settings,
    estimate,
    tensorParallelProblem: tensorParallelProblemText,
    key: JSON.stringify([estimate.total_bytes, settings.fraction, tensorParallelProblemText]),
  };
}

/** What to change when a profile's GPUs are too small for the model. */
const MEMORY_ADVICE =
  "use a larger tensor_parallel or pipeline_parallel, a GPU class with more memory, a quantized model, or a shorter context (--max-model-len / --context-length in engine_args)";

/**
 * The model's problems with a deployment's profiles, as validation issues:
 *
 * - a tensor_parallel that does not divide the attention heads is an error:
 *   the engine refuses it on any hardware;
 * - a profile whose GPU class can never hold the model (by the largest GPU
 *   of the class the cluster reports, else the class name's size) is a
 *   warning when another profile of the deployment can run it, and an error
 *   when none can: the deployment could then never run anywhere.
 *
 * @param gpuBytes The memory of the largest GPU of a class the cluster
 *   reports, when it reports one.
 */
export function modelIssues(
  deployment: Deployment,
  facts: ModelFacts | null,
  gpuBytes: (gpuClass: string) => number | undefined = () => undefined,
): { errors: DeploymentIssue[]; warnings: DeploymentIssue[] } {
  const errors: DeploymentIssue[] = [];
  const tooSmall: DeploymentIssue[] = [];
  if (facts === null) return { errors, warnings: [] };
  let someCanRun = false;
  deployment.profiles.forEach((p, i) => {
    const fit = modelFit(facts, p);
    if (fit === null) {
      someCanRun = true;
      return;
    }
    const name = `profile "${p.name}"`;
    if (fit.tensorParallelProblem !== null) {
      errors.push({
        path: ["profiles", i, "tensor_parallel"],
        message: `${name}: ${fit.tensorParallelProblem}`,
      });
      return;
    }
    const bytes = gpuBytes(p.gpu_class) ?? classMemoryBytes(p.gpu_class);
    if (bytes === null || fitsGpu(fit.estimate, bytes, fit.settings.fraction)) {
      someCanRun = true;
      return;
    }
    tooSmall.push({
      path: ["profiles", i, "gpu_class"],
      message: `${name}: insufficient_gpu_memory: ${
        insufficientMemoryText(fit.estimate, p.gpu_class, bytes, fit.settings)
      } for ${facts.source}, so this profile can never be placed: ${MEMORY_ADVICE}`,
    });
  });
  return someCanRun
    ? { errors, warnings: tooSmall }
    : { errors: [...errors, ...tooSmall], warnings: [] };
}
