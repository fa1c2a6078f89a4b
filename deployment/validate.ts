/**
 * Validation before launch (design §6.2): refuse, with a message naming the
 * profile and the field, what cannot work, before anything runs.
 *
 * @module
 */
import type { FieldPath, InputIssue } from "../validation/issues.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { parallelismProblems, tooBigAdvice } from "./parallelism.ts";
import { fp8Capable, fp8Requirement, needsFp8Hardware } from "./quantization.ts";
import type { Deployment, Profile } from "./schema.ts";
import { HUB_CREDENTIALS, HUB_ENGINE_SETTINGS } from "../models/hub_env.ts";
import { engineKeepAliveProblem } from "../engines/engine_keep_alive.ts";

/** One problem with a deployment. */
export type DeploymentIssue = InputIssue;

/** What validation found: errors refuse the deployment, warnings do not. */
export interface ValidationResult {
  /** Problems that make the deployment impossible. */
  errors: DeploymentIssue[];
  /** Problems worth telling the operator that do not block it. */
  warnings: DeploymentIssue[];
}

/** GPUs known to the cluster, for checks that need the hardware. */
export interface ClassFacts {
  /** GPU class → compute capabilities seen on GPUs of that class (e.g. "8.0"). */
  computeCapabilities: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * GPU class → how many GPUs of it the cluster has, healthy or not, on nodes
   * in any state; absent when unknown (then no size warnings).
   */
  sizes?: ReadonlyMap<string, ClassSize>;
  /**
   * GPU class → the memory of its largest GPU in the cluster, in bytes, as
   * drivers report it; a class whose GPUs report none is absent (the
   * model's memory check then reads the class name's size).
   */
  memoryBytes?: ReadonlyMap<string, number>;
}

/** How many GPUs of one class the cluster has. */
export interface ClassSize {
  /** The most any one node has. */
  most: number;
  /** All of them, on every node. */
  total: number;
}

/** Options for {@link validateDeployment}. */
export interface ValidateOptions {
  /** Engines that exist (built in and plugins). Default: vllm, sglang. */
  knownEngines?: ReadonlySet<string>;
  /** The cluster's GPU classes, when known (warnings for absent classes, fp8 checks). */
  classes?: ClassFacts;
}

/** The built-in engine names (design §8). */
export const BUILTIN_ENGINES: ReadonlySet<string> = new Set(["vllm", "sglang"]);

/**
 * Why a profile's `env` may not set `key`, or null when it may: a hub
 * credential would be stored with the spec, shown in listings and events,
 * and handed to an engine that never talks to the hub; the hub settings are
 * llmgw's for every engine (offline, on the agent's model cache). The value
 * is never repeated: it may be a token.
 */
export function hubEnvProblem(key: string): string | null {
  if (HUB_CREDENTIALS.includes(key)) {
    return "is a hub credential, which a deployment must not hold (it is stored, listed and shown in events, and engines never talk to the hub): give the token to the agents and the control plane in their environment (HF_TOKEN) or token file (an agent's hf_token_file, control serve --hub-token-file; docs/models.md), and remove it from the profile";
  }
  if (HUB_ENGINE_SETTINGS.includes(key)) {
    return "is set by llmgw for every engine, which runs offline on the agent's model cache (docs/models.md); remove it from the profile (the hub or mirror the agents fetch from is their HF_ENDPOINT)";
  }
  return null;
}

/** Applies the one derived default: `gpus_per_node` = TP × PP / nodes when not given. */
export function resolveGpusPerNode(
  profile: Omit<Profile, "gpus_per_node"> & { gpus_per_node?: number },
): number | null {
  if (profile.gpus_per_node !== undefined) return profile.gpus_per_node;
  const total = profile.tensor_parallel * profile.pipeline_parallel;
  return total % profile.nodes === 0 ? total / profile.nodes : null;
}

/** Checks design §6.2's rules on a parsed deployment. */
export function validateDeployment(
  deployment: Deployment,
  options: ValidateOptions = {},
): ValidationResult {
  const engines = options.knownEngines ?? BUILTIN_ENGINES;
  const errors: DeploymentIssue[] = [];
  const warnings: DeploymentIssue[] = [];
  const seen = new Map<string, number>();
  deployment.profiles.forEach((p, i) => {
    const at = (field: string): FieldPath => ["profiles", i, field];
    const name = `profile "${p.name}"`;
    const first = seen.get(p.name);
    if (first !== undefined) {
      errors.push({
        path: at("name"),
        message: `${name} is also profile ${first}; names must be unique`,
      });
    }
    seen.set(p.name, i);
    if (!engines.has(p.engine)) {
      errors.push({
        path: at("engine"),
        message: `${name}: unknown engine "${p.engine}" (known: ${[...engines].sort().join(", ")})`,
      });
    }
    for (const e of parallelismProblems(p)) {
      errors.push({ path: at(e.field), message: `${name}: ${e.message}` });
    }
    for (const [key, value] of Object.entries(p.env)) {
      const problem = hubEnvProblem(key) ?? engineKeepAliveProblem(key, value);
      if (problem !== null) {
        errors.push({ path: [...at("env"), key], message: `${name}: env ${key} ${problem}` });
      }
    }
    const ccs = options.classes?.computeCapabilities.get(p.gpu_class);
    if (options.classes !== undefined && ccs === undefined) {
      warnings.push({
        path: at("gpu_class"),
        message: `${name}: no node in the cluster has ${p.gpu_class} GPUs`,
      });
    }
    if (needsFp8Hardware(p.quantization) && ccs !== undefined && ccs.size > 0) {
      // Refused only when no GPU of the class could run it; placement then
      // keeps the replica off the nodes whose GPUs cannot (design §6.2).
      const low = [...ccs].filter((cc) => !fp8Capable(cc));
      if (low.length === ccs.size) {
        errors.push({
          path: at("quantization"),
          message: `${name}: ${fp8Requirement(p.quantization)}, but ${p.gpu_class} GPUs have ${
            low.sort().join(", ")
          } (engines would fall back to a slower weight-only path; choose another quantization or class)`,
        });
      }
    }
    const size = options.classes?.sizes?.get(p.gpu_class);
    if (size !== undefined && size.most < p.gpus_per_node) {
      const most = size.most;
      warnings.push({
        path: at("gpus_per_node"),
        message:
          `${name}: a shard needs ${p.gpus_per_node} ${p.gpu_class} GPUs on one node, but no node has more than ${most}, so this profile can never be placed: ${
            tooBigAdvice(p, most)
          }`,
      });
    }
  });
  const short = fleetShortfall(deployment, options.classes?.sizes);
  if (short !== null) warnings.push({ path: ["replicas"], message: short });
  return { errors, warnings };
}

/**
 * Says so when the deployment's replicas need more GPUs than the whole
 * cluster has, on any placement: per class, its GPUs ÷ the fewest a replica
 * of that class needs (over the profiles that some node can hold), summed
 * over classes, bounds how many replicas can ever run. Null when they fit
 * that bound, or when no profile can be placed at all (said per profile).
 */
function fleetShortfall(
  deployment: Deployment,
  sizes: ReadonlyMap<string, ClassSize> | undefined,
): string | null {
  if (sizes === undefined) return null;
  const perReplica = new Map<string, number>(); // class → fewest GPUs a replica needs
  for (const p of deployment.profiles) {
    const size = sizes.get(p.gpu_class);
    if (size === undefined || size.most < p.gpus_per_node) continue;
    const need = p.nodes * p.gpus_per_node;
    perReplica.set(p.gpu_class, Math.min(need, perReplica.get(p.gpu_class) ?? need));
  }
  if (perReplica.size === 0) return null;
  const classes = [...perReplica].sort((a, b) => a[0] < b[0] ? -1 : 1).map(([cls, need]) => {
    const total = sizes.get(cls)!.total;
    return { cls, need, total, fit: Math.floor(total / need) };
  });
  const most = classes.reduce((sum, c) => sum + c.fit, 0);
  const want = deployment.replicas;
  if (want <= most) return null;
  const can = `at most ${most} can ever run`;
  if (classes.length === 1) {
    const c = classes[0];
    return `${want} replicas need ${
      want * c.need
    } ${c.cls} GPUs (${c.need} each), but the cluster has ${c.total} in all: ${can}`;
  }
  return `${want} replicas need more GPUs than the cluster has: ${can} (${
    classes.map((c) => `${c.cls}: ${c.total} GPUs in all, ${c.need} per replica`).join("; ")
  })`;
}

/** The GPU classes of a cluster and the compute capabilities seen for each, for validation. */
export function classFacts(nodes: readonly ClusterNode[]): ClassFacts {
  const map = new Map<string, Set<string>>();
  const sizes = new Map<string, ClassSize>();
  const memoryBytes = new Map<string, number>();
  for (const n of nodes) {
    const here = new Map<string, number>();
    for (const g of n.gpus) {
      if (g.class === null) continue;
      let s = map.get(g.class);
      if (s === undefined) map.set(g.class, s = new Set());
      if (g.compute_capability !== null) s.add(g.compute_capability);
      if (g.memory_total_mb !== null) {
        memoryBytes.set(
          g.class,
          Math.max(memoryBytes.get(g.class) ?? 0, g.memory_total_mb * 2 ** 20),
        );
      }
      here.set(g.class, (here.get(g.class) ?? 0) + 1);
    }
    for (const [cls, count] of here) {
      const size = sizes.get(cls);
      if (size === undefined) sizes.set(cls, { most: count, total: count });
      else {
        size.most = Math.max(size.most, count);
        size.total += count;
      }
    }
  }
  return { computeCapabilities: map, sizes, memoryBytes };
}
