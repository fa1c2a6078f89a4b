/**
 * The events a node's heartbeat makes about its shards, from the reports
 * before and after it (design §13): each new failure (with its crash-loop
 * count), each new notice, and each return to ready after a failure
 * (`shard_recovered`), so every failure an operator reads is closed by an
 * event saying when the shard served again; and its model download's start,
 * source changes, completion and failed tries (download_events.ts). Pure:
 * nodes.ts writes them.
 *
 * @module
 */
import type { ShardReport } from "../protocol/agent_protocol.ts";
import { shardFailureMessage } from "./events.ts";
import { type DownloadEvent, downloadEvents } from "./download_events.ts";

/** One event about a shard. */
export interface ShardEvent {
  /** `shard_failed`, `shard_notice`, `shard_recovered`, or one of its download (download_events.ts). */
  kind: "shard_failed" | "shard_notice" | "shard_recovered" | DownloadEvent["kind"];
  /** The shard it is about. */
  shard: string;
  /** In words. */
  message: string;
}

/**
 * The events of one heartbeat of `node`. Something the previous report
 * already had is not told again; with no previous report (this control
 * plane's first from the node), something from before `startedAt` was told
 * by its predecessor. A failure the agent gave up on (permanent) is told
 * once, by the reconciler, when it moves or fails the replica.
 */
export function shardEvents(
  node: string,
  before: ReadonlyMap<string, ShardReport> | undefined,
  shards: readonly ShardReport[],
  startedAt: number,
): ShardEvent[] {
  const out: ShardEvent[] = downloadEvents(node, before, shards, startedAt);
  const told = (at: number, seen: number | undefined) =>
    seen === at || (before === undefined && at < startedAt);
  for (const s of shards) {
    const f = s.last_failure;
    if (f === null || f.permanent === true) continue;
    if (told(f.at, before?.get(s.id)?.last_failure?.at)) continue;
    const c = s.crash_loop;
    const count = c === null || c === undefined
      ? ""
      : ` (failure ${c.failures} in a row; the agent gives up on this node at ${c.limit})`;
    out.push({
      kind: "shard_failed",
      shard: s.id,
      message: shardFailureMessage(s.id, node, { ...f, reason: f.reason + count }),
    });
  }
  for (const s of shards) {
    const n = s.notice;
    if (n === null || n === undefined) continue;
    if (told(n.at, before?.get(s.id)?.notice?.at)) continue;
    out.push({
      kind: "shard_notice",
      shard: s.id,
      message: `shard ${s.id} on ${node}: ${n.message}`,
    });
  }
  for (const s of shards) {
    const f = s.last_failure;
    if (s.state !== "ready" || f === null) continue;
    const was = before?.get(s.id);
    // Ready before, and the same failure: this return was told already.
    if (was?.state === "ready" && was.last_failure?.at === f.at) continue;
    if (before === undefined && f.at < startedAt) continue;
    const down = Number.isFinite(s.since) && s.since >= f.at
      ? ` ${Math.round((s.since - f.at) / 1000)} s after`
      : " after";
    out.push({
      kind: "shard_recovered",
      shard: s.id,
      message: `shard ${s.id} on ${node} is ready again${down} it failed: ${f.reason}`,
    });
  }
  return out;
}
