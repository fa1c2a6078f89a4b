/**
 * The "Cold start" block of `llmgw describe replica` (issue #25 item 7):
 * each shard's cold-start receipt as a table, phase by phase: the seconds
 * the supervisor saw, the engine's own figure when its log gives one, and
 * whether a persistent cache made the phase warm or the engine skipped it.
 *
 * @module
 */
import type { ShardListing } from "../protocol/admin_protocol.ts";
import { downloadSourcesText, type PhaseReceipt } from "../protocol/cold_start_receipt.ts";
import { phaseSeconds } from "../supervisor/cold_start_receipt.ts";
import { renderTable } from "../text/table.ts";

/** The block's lines; empty when no shard reported a receipt. */
export function coldStartLines(shards: readonly ShardListing[]): string[] {
  const withReceipt = shards.filter((s) => s.cold_start !== null);
  if (withReceipt.length === 0) return [];
  const out = ["Cold start:"];
  for (const s of withReceipt) {
    const r = s.cold_start!;
    out.push(`  rank ${s.rank} on ${s.node}, spawned ${new Date(r.spawned_at).toISOString()}:`);
    const rows: string[][] = [];
    if (r.download !== null) {
      rows.push([
        "download",
        r.download.seconds.toFixed(2),
        "",
        `${gib(r.download.bytes)} fetched${downloadSourcesText(r.download)}`,
      ]);
    }
    for (const p of r.phases) rows.push(phaseRow(p));
    const ready = r.phases.find((p) => p.phase === "ready");
    if (ready?.end_ms != null) {
      rows.push(["total", (ready.end_ms / 1000).toFixed(2), "", "spawn to first ready probe"]);
    }
    const table = renderTable(["PHASE", "SECONDS", "ENGINE SAYS", "NOTE"], rows);
    out.push(...table.split("\n").map((l) => `    ${l}`));
  }
  return out;
}

function phaseRow(p: PhaseReceipt): string[] {
  const s = phaseSeconds(p);
  const note = p.skipped
    ? "skipped"
    : p.warm
    ? "warm: from the compile cache"
    : p.start_ms !== null && p.end_ms === null
    ? "under way"
    : s === null
    ? "not seen yet"
    : "";
  return [
    p.phase,
    s === null ? "-" : s.toFixed(2),
    p.engine_seconds === null ? "" : String(p.engine_seconds),
    note,
  ];
}

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
}
