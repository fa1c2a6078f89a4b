/**
 * Deployments and profiles (design §6.1): one zod schema for YAML files, JSON
 * files and the API, published as JSON Schema for editors. Field names are
 * snake_case on the wire.
 *
 * @module
 */
import { z } from "zod";
import { MAX_REVISION_CHARS, revisionProblem } from "./model_revision.ts";
import { MAX_ENGINE_OPTIONS, MAX_ENV_VALUE_CHARS, MAX_ENV_VARS } from "../protocol/shard_launch.ts";

/** A DNS-label-like name: lower-case letters, digits and '-', 1-63 characters. */
export const NAME_PATTERN: RegExp = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Label keys as operators write them (Kubernetes-style). */
export const LABEL_KEY_PATTERN: RegExp = /^[A-Za-z0-9]([A-Za-z0-9_./-]{0,251}[A-Za-z0-9])?$/;

/** One way to run the model: engine, GPUs, parallelism (design §6.1). */
export const ProfileSchema = z.object({
  name: z.string().regex(NAME_PATTERN, "must be a lower-case name of letters, digits and '-'")
    .describe("Profile name, unique within the deployment."),
  engine: z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/, "must be an engine name such as vllm")
    .describe("Engine plugin: vllm, sglang, or a third-party plugin's name."),
  gpu_class: z.string().regex(/^[a-z0-9]+-\d+g$/, "must be a GPU class such as h100-80g")
    .describe("GPU class, e.g. h100-80g. Every GPU of a replica is of this class."),
  tensor_parallel: z.number().int().min(1).max(1024)
    .describe("Tensor-parallel size (GPUs per pipeline stage)."),
  pipeline_parallel: z.number().int().min(1).max(256).default(1)
    .describe("Pipeline-parallel size."),
  nodes: z.number().int().min(1).max(1024).default(1).describe("Nodes per replica."),
  gpus_per_node: z.number().int().min(1).max(64).optional()
    .describe("GPUs on each node; default tensor_parallel × pipeline_parallel / nodes."),
  quantization: z.string().regex(/^[a-z0-9_-]{1,32}$/, "must be a quantization name such as fp8")
    .default("none").describe("none, fp8, awq, gptq, … (the engine must support it)."),
  engine_args: z.array(z.string().max(4096)).max(256).default([])
    .describe("Extra engine arguments, appended to the command line."),
  env: z.record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
    z.string().max(MAX_ENV_VALUE_CHARS),
  )
    .refine((env) => Object.keys(env).length <= MAX_ENV_VARS, {
      message: `must set at most ${MAX_ENV_VARS} variables`,
    })
    .default({}).describe("Extra environment variables for the engine."),
  engine_options: z.record(
    z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, "must be an option name such as multi_node_backend"),
    z.union([z.string().max(4096), z.number(), z.boolean()]),
  ).refine((o) => Object.keys(o).length <= MAX_ENGINE_OPTIONS, {
    message: `must set at most ${MAX_ENGINE_OPTIONS} options`,
  }).default({}).describe(
    "Engine-specific options the plugin understands, e.g. {multi_node_backend: ray} for vllm.",
  ),
  node_selector: z.record(
    z.string().regex(LABEL_KEY_PATTERN, "must be a label key"),
    z.string().max(253),
  )
    .default({}).describe("Node labels that must all match."),
}).strict();

/**
 * How gateways pick a replica for a request (design §12): the least
 * outstanding of two drawn at random, the replica that holds the
 * conversation's KV cache (consistent hashing with bounded loads), or
 * uniformly at random (a baseline for benchmarks).
 */
export const ROUTING_POLICIES = ["least_outstanding", "prefix_affinity", "random"] as const;

/** One of {@link ROUTING_POLICIES}. */
export type RoutingPolicy = typeof ROUTING_POLICIES[number];

/**
 * The policy of a deployment that names none: prefix affinity, from the
 * routing benchmark (docs/benchmarks.md): on the same multi-turn trace it
 * had a cache hit rate 22 points above least outstanding and a third of its
 * p99 time to first token, with replicas as evenly loaded.
 */
export const DEFAULT_ROUTING: RoutingPolicy = "prefix_affinity";

/** The progress deadline of a deployment that sets none: ten minutes (design §6.3). */
export const DEFAULT_PROGRESS_DEADLINE_SECONDS = 600;

/**
 * How a changed deployment replaces its replicas (design §6.3). Absent
 * fields take their defaults where they are used, so a deployment that
 * names none stores none.
 */
export const RolloutSettingsSchema = z.object({
  progress_deadline_seconds: z.number().int().min(1).max(86_400).optional()
    .describe(
      "Seconds a step of a rollout may take before the rollout stops and the previous " +
        "revision comes back: a new replica must be ready within it (default 600).",
    ),
}).strict();

/** A deployment: a model, how many replicas, and profiles in priority order (design §6.1). */
export const DeploymentSchema = z.object({
  name: z.string().regex(NAME_PATTERN, "must be a lower-case name of letters, digits and '-'")
    .describe("Deployment name."),
  model: z.string().min(1).max(1024).describe(
    "Hub id (org/name) or local path (absolute, or file://) of the model.",
  ),
  revision: z.string().max(MAX_REVISION_CHARS).superRefine((r, ctx) => {
    const problem = revisionProblem(r);
    if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
  }).optional().describe(
    "Hub model revision: a branch, tag or 40-hex commit (default main); resolved to a commit " +
      "at apply. A local path model takes none.",
  ),
  pinned: z.boolean().default(false).describe(
    "Keep this model revision's files in every agent's model cache: never evicted.",
  ),
  served_model_name: z.string().min(1).max(256).optional()
    .describe("Name clients use in the OpenAI `model` field; default: the deployment name."),
  replicas: z.number().int().min(0).max(10_000).default(1).describe("Replica count."),
  placement: z.enum(["pack", "spread"]).default("pack")
    .describe(
      "pack: fill partly used nodes first; spread: prefer nodes without a replica of this deployment.",
    ),
  profiles: z.array(ProfileSchema).min(1).max(32)
    .describe("Profiles in priority order: the first that fits is used."),
  routing: z.enum(ROUTING_POLICIES).optional()
    .describe(
      "How gateways pick a replica: prefix_affinity (default: the replica holding the " +
        "conversation's cache, within a load bound), least_outstanding or random.",
    ),
  rollout: RolloutSettingsSchema.optional()
    .describe("How a changed deployment replaces its replicas, one at a time."),
}).strict();

/** A profile with defaults applied and `gpus_per_node` resolved (design §6.1). */
export interface Profile {
  /** Profile name, unique within the deployment. */
  name: string;
  /** Engine plugin name: vllm, sglang, or a plugin's (design §8). */
  engine: string;
  /** GPU class (design §2); every GPU of a replica is of this class. */
  gpu_class: string;
  /** Tensor-parallel size. */
  tensor_parallel: number;
  /** Pipeline-parallel size. */
  pipeline_parallel: number;
  /** Nodes per replica. */
  nodes: number;
  /** GPUs on each node. */
  gpus_per_node: number;
  /** Quantization: none, fp8, awq, gptq, … */
  quantization: string;
  /** Extra engine arguments, appended to the command line. */
  engine_args: string[];
  /** Extra environment for the engine. */
  env: Record<string, string>;
  /** Engine-specific options, validated by the engine plugin (e.g. vllm's multi_node_backend). */
  engine_options: Record<string, string | number | boolean>;
  /** Node labels that must all match. */
  node_selector: Record<string, string>;
}

/** A deployment with defaults applied (design §6.1). */
export interface Deployment {
  /** Deployment name. */
  name: string;
  /** Hub id or local path of the model. */
  model: string;
  /**
   * The hub revision (branch, tag or commit) the model is read at: `main`
   * when not given; absent for a local path model, which takes none.
   */
  revision?: string;
  /**
   * Keep this revision's files from eviction in agents' model caches; the
   * schema fills false, so only a spec built in code leaves it out.
   */
  pinned?: boolean;
  /** The name clients use in the OpenAI `model` field; defaults to the deployment name. */
  served_model_name: string;
  /** Replica count. */
  replicas: number;
  /** pack: fill partly used nodes first; spread: prefer nodes without a replica of this deployment. */
  placement: "pack" | "spread";
  /** Profiles in priority order: the first that fits is used. */
  profiles: Profile[];
  /** How gateways pick a replica; absent: {@link DEFAULT_ROUTING}. */
  routing?: RoutingPolicy;
  /** How a change replaces replicas (design §6.3); absent: the defaults. */
  rollout?: {
    /** Seconds a step may take before the rollout is reverted; absent: 600. */
    progress_deadline_seconds?: number;
  };
}

/** The deployment file's JSON Schema, generated from {@link DeploymentSchema}. */
export function deploymentJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(DeploymentSchema, { io: "input" }),
    title: "llmgw deployment",
  };
}
