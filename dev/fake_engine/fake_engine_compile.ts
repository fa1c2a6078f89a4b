/**
 * The fake vLLM's torch.compile cache (issue #25 item 7), as vLLM keeps it
 * (engine reference §9): under `$VLLM_CACHE_ROOT/torch_compile_cache/<hash>/
 * rank_<r>_<dp>/backbone`, where `<hash>` (10 hex digits) comes from what
 * the compiled graph depends on, and `vllm_compile_cache.py` in it lists the
 * compiled graphs. A start that finds that file loads the graphs ("Directly
 * load the compiled graph(s) … from the cache") instead of compiling; one
 * that does not compiles and writes it.
 *
 * Stricter than vLLM where it must differ: without `VLLM_CACHE_ROOT` the fake
 * compiles every time and writes nothing (vLLM would use ~/.cache/vllm; the
 * fake never writes into a home directory), and `VLLM_DISABLE_COMPILE_CACHE=1`
 * turns the cache off as in vLLM. A cache directory that cannot be created
 * fails the start, as vLLM's `os.makedirs` does.
 *
 * @module
 */
import type { EngineConfig } from "./fake_engine_command.ts";

/** Where a start's compiled graphs are, and whether they are there already. */
export interface CompileCache {
  /** The local cache directory (rank and backbone included); null when the cache is off. */
  dir: string | null;
  /** True when the directory holds the compiled graphs of this key. */
  warm: boolean;
}

/** The file vLLM's compiler manager writes its graph handles to. */
export const CACHE_FILE = "vllm_compile_cache.py";

/**
 * The cache key's hash: the factors of vLLM's `compute_hash` the fake knows
 * of (model, parallelism, quantization, length, version), 10 hex digits as
 * vLLM's `hash_key[:10]`.
 */
export async function compileHash(cfg: EngineConfig, version: string): Promise<string> {
  const factors = JSON.stringify([
    version,
    cfg.model,
    cfg.tp,
    cfg.pp,
    cfg.quantization,
    cfg.max_model_len,
    cfg.flags.get("--dtype") ?? "auto",
    cfg.flags.get("--kv-cache-dtype") ?? "auto",
  ]);
  const d = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(factors)),
  );
  return [...d.slice(0, 5)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Finds this start's cache directory (made, as vLLM makes it) and whether it is warm. */
export async function openCompileCache(
  cfg: EngineConfig,
  version: string,
  env: { get(name: string): string | undefined },
): Promise<CompileCache> {
  const root = env.get("VLLM_CACHE_ROOT");
  if (root === undefined || root === "" || env.get("VLLM_DISABLE_COMPILE_CACHE") === "1") {
    return { dir: null, warm: false };
  }
  const hash = await compileHash(cfg, version);
  const dir = `${root}/torch_compile_cache/${hash}/rank_${cfg.node_rank}_0/backbone`;
  Deno.mkdirSync(dir, { recursive: true });
  let warm = false;
  try {
    warm = Deno.readTextFileSync(`${dir}/${CACHE_FILE}`).includes(hash);
  } catch {
    // Not compiled here yet.
  }
  return { dir, warm };
}

/** Records a finished compile, so the next start of the same key loads it. */
export function saveCompiled(cache: CompileCache): void {
  if (cache.dir === null) return;
  const hash = cache.dir.split("/").at(-3) ?? "";
  // Written whole then renamed: a start killed mid-write leaves no half file to trust.
  const tmp = `${cache.dir}/${CACHE_FILE}.tmp`;
  Deno.writeTextFileSync(tmp, `# llmgw fake engine: compiled graphs of ${hash}\n{}\n`);
  Deno.renameSync(tmp, `${cache.dir}/${CACHE_FILE}`);
}
