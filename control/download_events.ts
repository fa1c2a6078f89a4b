/**
 * The events a heartbeat makes about its shards' model downloads (issue #25
 * item 5), from the reports before and after it: a download started, its
 * sources changed, it completed, or a try failed and will be retried. Never
 * one per percent. A download that fails for good fails its shard
 * (permanent), which the reconciler tells once. Pure: shard_events.ts
 * gathers them with the heartbeat's other shard events.
 *
 * @module
 */
import type { ShardReport } from "../protocol/agent_protocol.ts";
import { formatBytes } from "../text/bytes.ts";
import { downloadSourcesText } from "../protocol/cold_start_receipt.ts";

/** One event about a shard's download. */
export interface DownloadEvent {
  /** What happened. */
  kind: "download_started" | "download_source_changed" | "download_completed" | "download_failed";
  /** The shard it is about. */
  shard: string;
  /** In words. */
  message: string;
}

/** States a shard reaches once its model is on its host. */
const STARTED: ReadonlySet<string> = new Set(["starting", "loading", "ready"]);

/**
 * The download events of one heartbeat of `node`; with no previous report
 * (this control plane's first from the node), a download under way since
 * before `startedAt` was told by its predecessor.
 */
export function downloadEvents(
  node: string,
  before: ReadonlyMap<string, ShardReport> | undefined,
  shards: readonly ShardReport[],
  startedAt: number,
): DownloadEvent[] {
  const out: DownloadEvent[] = [];
  for (const s of shards) {
    const was = before?.get(s.id);
    const d = s.download ?? null;
    const wasD = was?.download ?? null;
    const on = `shard ${s.id} on ${node}`;
    const what = (x: NonNullable<ShardReport["download"]>) =>
      x.commit === null ? x.model : `${x.model}@${x.commit}`;
    if (s.state === "downloading" && was?.state !== "downloading") {
      if (before === undefined && s.since < startedAt) continue;
      const model = d === null ? "its model" : what(d);
      out.push({ kind: "download_started", shard: s.id, message: `${on}: downloading ${model}` });
      continue;
    }
    // The receipt of the run it started says where the bytes came from.
    const receipt = s.cold_start ?? null;
    const fresh = receipt !== null && receipt.spawned_at !== was?.cold_start?.spawned_at;
    const got = fresh ? receipt.download : null;
    const suppliedBy = got === null ? "" : downloadSourcesText(got);
    if (was?.state === "downloading" && STARTED.has(s.state)) {
      const size = wasD === null || wasD.bytes_total === 0
        ? ""
        : ` (${formatBytes(wasD.bytes_total)}${suppliedBy})`;
      const model = wasD === null ? "its model" : what(wasD);
      out.push({
        kind: "download_completed",
        shard: s.id,
        message: `${on}: ${model} downloaded${size}; the engine starts`,
      });
      continue;
    }
    // A download that began and ended between two heartbeats: told once, from its receipt.
    if (
      got !== null && got.bytes > 0 && STARTED.has(s.state) &&
      (was === undefined || (was.state !== "downloading" && !STARTED.has(was.state))) &&
      !(before === undefined && receipt!.spawned_at < startedAt)
    ) {
      out.push({
        kind: "download_completed",
        shard: s.id,
        message: `${on}: its model downloaded (${
          formatBytes(got.bytes)
        }${suppliedBy}); the engine starts`,
      });
      continue;
    }
    if (d === null || wasD === null || s.state !== "downloading") continue;
    if (d.failures > wasD.failures && d.last_error !== null) {
      out.push({
        kind: "download_failed",
        shard: s.id,
        message: `${on}: download of ${what(d)} failed (try ${d.failures}): ${d.last_error}; ` +
          "the agent tries again after a backoff",
      });
    }
    const from = wasD.sources.join(", ");
    const to = d.sources.join(", ");
    // An empty list is a moment between chunks, not a change of source.
    if (from !== "" && to !== "" && from !== to) {
      out.push({
        kind: "download_source_changed",
        shard: s.id,
        message: `${on}: download of ${what(d)} now from ${to} (was ${from})`,
      });
    }
  }
  return out;
}
