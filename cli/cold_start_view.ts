/**
 * The "Cold start" block of `llmgw describe replica` (issue #25 item 7):
 * each shard's cold-start receipt as a table, phase by phase: the seconds
 * the supervisor saw, the engine's own figure when its log gives one, and
 * whether a persistent cache made the phase warm or the engine skipped it.
 *
 * @module
 */
import type { ShardListing } from "../protocol/admin_protocol.ts";
import { COLD_START_COLUMNS, coldStartRows } from "../protocol/cold_start_receipt.ts";
import { renderTable } from "../text/table.ts";

/** The block's lines; empty when no shard reported a receipt. */
export function coldStartLines(shards: readonly ShardListing[]): string[] {
  const withReceipt = shards.filter((s) => s.cold_start !== null);
  if (withReceipt.length === 0) return [];
  const out = ["Cold start:"];
  for (const s of withReceipt) {
    const r = s.cold_start!;
    out.push(`  rank ${s.rank} on ${s.node}, spawned ${new Date(r.spawned_at).toISOString()}:`);
    const table = renderTable([...COLD_START_COLUMNS], coldStartRows(r));
    out.push(...table.split("\n").map((l) => `    ${l}`));
  }
  return out;
}
