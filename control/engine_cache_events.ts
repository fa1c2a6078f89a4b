/**
 * Each engine compile cache directory an agent reports evicted (issue #25
 * item 7; agent/engine_cache/) as an `engine_cache_evicted` event on its
 * node, beside the `model_evicted` events of its model cache
 * (control/model_caches.ts), so `llmgw events` shows why the next start of
 * that shape compiles again.
 *
 * @module
 */
import { type ModelCacheReport, revisionName } from "../protocol/model_cache_report.ts";
import { formatBytes } from "../text/bytes.ts";
import type { ControlState } from "./state.ts";

/** Records the engine cache evictions in `report` as events. */
export async function recordEngineCacheEvictions(
  state: Pick<ControlState, "event">,
  nodeId: string,
  report: ModelCacheReport,
): Promise<void> {
  for (const e of report.engine_caches_evicted ?? []) {
    const of = e.model === null
      ? ""
      : ` of ${e.commit === null ? e.model : revisionName(e.model, e.commit)}`;
    await state.event(
      "engine_cache_evicted",
      `node/${nodeId}`,
      `evicted the ${e.engine} compile cache ${e.key}${of}, ${e.bytes_at_least ? "at least " : ""}${
        formatBytes(e.bytes)
      } freed: ${e.reason}`,
    );
  }
}
