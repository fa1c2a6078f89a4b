/**
 * Persistent per-host compile and JIT cache directories for engines (issue
 * #25 item 7): one directory per engine version, model revision, GPU class
 * and parallelism, under the agent's state directory, so a restart of the
 * same shape on the same host finds what the last start compiled (vLLM's
 * torch.compile artifacts, Inductor's and Triton's kernels, FlashInfer's JIT
 * modules) instead of compiling again. What each variable moves is in
 * engine reference §9.
 *
 * The key is coarser than vLLM's own (which hashes its whole config, the
 * traced source files and the compiler: engine reference §9): two launches
 * with one key but other engine arguments share a directory, and vLLM keeps
 * their artifacts apart by its own hash inside it. The key only decides
 * which starts may share, and keeps what one model compiled from being
 * found by another model's engines.
 *
 * @module
 */
import type { DesiredLaunch } from "./types.ts";
import { hashBytes, sha256Hash } from "../models/file_hash.ts";

/** What a compile cache's key is made of. */
export interface CompileCacheKeyInput {
  /** Engine plugin name. */
  engine: string;
  /** The engine version installed on the host; null when unknown. */
  engine_version: string | null;
  /** Hub id or path of the model. */
  model: string;
  /** The model's revision (commit) when known; null otherwise. */
  revision: string | null;
  /** GPU class of the shard's GPUs. */
  gpu_class: string;
  /** Tensor-parallel size. */
  tensor_parallel: number;
  /** Pipeline-parallel size. */
  pipeline_parallel: number;
  /** Nodes of the replica. */
  nodes: number;
}

/**
 * The key's parts for one launch of `engine`; a desired launch (ports still
 * open) gives the same key as the launch it becomes, so the agent can tell
 * which directories its desired shards will use (agent/engine_cache/).
 */
export function compileCacheKeyInput(engine: string, launch: DesiredLaunch): CompileCacheKeyInput {
  return {
    engine,
    engine_version: launch.engine_version,
    model: launch.model,
    // The resolved commit: a key follows its revision out of the model cache
    // (agent/engine_cache/). Absent for a local path or an unresolved
    // revision: the model's id stands for it then.
    revision: launch.model_commit ?? null,
    gpu_class: launch.gpus[0]?.class ?? "none",
    tensor_parallel: launch.profile.tensor_parallel,
    pipeline_parallel: launch.profile.pipeline_parallel,
    nodes: launch.world.nodes,
  };
}

/**
 * The directory name for a key: readable parts (model, GPU class,
 * parallelism, engine version) then 12 hex digits of the SHA-256 of every
 * part, so two keys that read alike after the path-safe cut still differ.
 * The same input always gives the same name.
 */
export function compileCacheKey(k: CompileCacheKeyInput): string {
  const canonical = JSON.stringify([
    k.engine,
    k.engine_version,
    k.model,
    k.revision,
    k.gpu_class,
    k.tensor_parallel,
    k.pipeline_parallel,
    k.nodes,
  ]);
  const hash = hashBytes(sha256Hash(), new TextEncoder().encode(canonical)).slice(0, 12);
  const readable = [
    safe(k.model.replaceAll("/", "--"), 64),
    ...(k.revision === null ? [] : [safe(k.revision, 12)]),
    safe(k.gpu_class, 32),
    `tp${k.tensor_parallel}-pp${k.pipeline_parallel}-n${k.nodes}`,
    `v${safe(k.engine_version ?? "unknown", 32)}`,
  ].join("_");
  return `${readable}_${hash}`;
}

/** The directory of a key: `<root>/<engine>/<key>`. */
export function compileCacheDir(root: string, k: CompileCacheKeyInput): string {
  return `${root.replace(/\/+$/, "")}/${safe(k.engine, 64)}/${compileCacheKey(k)}`;
}

/**
 * The environment that points an engine's compile and JIT caches into `dir`:
 * vLLM's cache root (its torch.compile cache is
 * `$VLLM_CACHE_ROOT/torch_compile_cache`), Inductor's and Triton's caches,
 * and FlashInfer's JIT workspace (it appends `.cache/flashinfer`).
 * Variables a torch-based engine does not read are harmless to it.
 */
export function compileCacheEnv(dir: string): Record<string, string> {
  return {
    VLLM_CACHE_ROOT: `${dir}/vllm`,
    TORCHINDUCTOR_CACHE_DIR: `${dir}/torchinductor`,
    TRITON_CACHE_DIR: `${dir}/triton`,
    FLASHINFER_WORKSPACE_BASE: dir,
  };
}

/** Path-safe: letters, digits, `.`, `-`, `+`, `=`; anything else becomes `_`; at most `max` characters. */
function safe(s: string, max: number): string {
  const out = s.replace(/[^A-Za-z0-9.+=-]/g, "_").replace(/^\.+/, "_");
  return (out === "" ? "_" : out).slice(0, max);
}
