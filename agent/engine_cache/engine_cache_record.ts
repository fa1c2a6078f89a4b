/**
 * The record an engine cache directory keeps of itself,
 * `<root>/<engine>/<key>/llmgw_key.json`: its key's parts (the directory's
 * name cuts them to be path-safe, so it cannot be read back) and the last
 * engine start that used it. Rewritten at every start (temporary file, then
 * rename); eviction reads it to follow a model revision and to order by
 * last use (engine_cache_plan.ts). Engines write only under `vllm/`,
 * `torchinductor/`, `triton/` and `.cache/` of the directory, never here.
 *
 * @module
 */
import { z } from "zod";
import type { CompileCacheKeyInput } from "../../engines/compile_cache.ts";

/** The record's file name inside a key directory. */
export const RECORD_FILE = "llmgw_key.json";

/** What the record holds. */
export interface EngineCacheRecord {
  key: CompileCacheKeyInput;
  /** The last engine start that used the directory, ms since the epoch. */
  last_used_ms: number;
}

const RecordSchema = z.object({
  key: z.object({
    engine: z.string(),
    engine_version: z.string().nullable(),
    model: z.string(),
    revision: z.string().nullable(),
    gpu_class: z.string(),
    tensor_parallel: z.number(),
    pipeline_parallel: z.number(),
    nodes: z.number(),
  }),
  last_used_ms: z.number(),
});

/** The record's text. */
export function formatRecord(r: EngineCacheRecord): string {
  return JSON.stringify(r) + "\n";
}

/**
 * The record in `text`; null when it cannot be read (a torn or foreign
 * file): the directory then counts as one without a record, evicted only by
 * last use, never by revision.
 */
export function parseRecord(text: string): EngineCacheRecord | null {
  try {
    const r = RecordSchema.safeParse(JSON.parse(text));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}
