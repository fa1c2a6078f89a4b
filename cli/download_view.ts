/**
 * A shard's model download as `describe replica` shows it (issue #25 item
 * 5): the "Download" block, one line per host with bytes, rate, ETA,
 * sources and the last error. `llmgw get replicas` shows its summary
 * (protocol/shard_download.ts `downloadSummary`) in the PROGRESS column.
 *
 * @module
 */
import type { ShardListing } from "../protocol/admin_protocol.ts";
import { downloadPercent } from "../protocol/shard_download.ts";
import { formatBytes, formatRate, formatSeconds } from "../text/bytes.ts";

/** describe's "Download" block; empty when no shard is downloading. */
export function downloadLines(shards: readonly ShardListing[]): string[] {
  const downloading = shards.filter((s) => s.download !== null);
  if (downloading.length === 0) return [];
  const out = ["Download:"];
  for (const s of downloading) {
    const d = s.download!;
    const pct = downloadPercent(d);
    const what = d.commit === null ? d.model : `${d.model}@${d.commit}`;
    out.push(`  rank ${s.rank} on ${s.node}: ${what}`);
    out.push(
      `    ${formatBytes(d.bytes_done)} of ${formatBytes(d.bytes_total)}` +
        (pct === null ? "" : ` (${pct}%)`) +
        `, ${formatRate(d.rate_bytes_per_second)}` +
        `, ETA ${d.eta_seconds === null ? "-" : formatSeconds(d.eta_seconds)}` +
        `, from ${d.sources.length === 0 ? "-" : d.sources.join(", ")}`,
    );
    if (d.last_error !== null) {
      out.push(`    try ${d.failures} failed: ${d.last_error}; trying again after a backoff`);
    }
  }
  return out;
}
