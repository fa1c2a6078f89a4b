/**
 * A node that ran out of disk fetching a model revision is not chosen for
 * that revision again at once (issue #25 item 8): the one owner of the rule.
 * A disk-full puts the replica back to pending (control/replica_failures.ts
 * `diskFullFailure`), and placement weighs each node's reported cache room;
 * but a node whose report keeps claiming room it does not have (another
 * writer on the disk, a quota the agent cannot see) would get the replica
 * back every pass. So after a disk-full on node N for revision R, N is left
 * out for R (`disk_full_backoff`, placement/filters.ts) until either
 *
 * - its backoff ends: 30 s after the first failure in a row, doubling to at
 *   most 10 min ({@link DISK_FULL_BACKOFF}), or
 * - its reported room has grown, since its lowest report after the failure,
 *   by the revision's size: room that the failure cannot have counted.
 *
 * Other nodes are tried meanwhile. The count in a row starts over when the
 * node reports R held (a fetch there succeeded), and a record is forgotten
 * an hour after its backoff ended with no new failure. Pure functions of
 * the facts and the time, and a small book the control state keeps; the
 * records live in memory (a restarted control plane may try a node once
 * more). Placement takes the verdicts as input (`NodeModelCache.backoff`),
 * built by control/model_caches.ts `placementIndexOptions`.
 *
 * @module
 */
import { backoffDelay, type BackoffPolicy } from "../supervisor/backoff.ts";
import { formatBytes, formatSeconds } from "../text/bytes.ts";

/** 30 s after the first disk-full in a row, doubling, at most 10 min. */
export const DISK_FULL_BACKOFF: BackoffPolicy = { initialMs: 30_000, maxMs: 600_000, factor: 2 };

/** How long after its backoff ended a record with no new failure is kept (its count with it). */
export const FORGET_AFTER_MS = 3_600_000;

/** One node's disk-fulls in a row for one model revision. */
export interface DiskFull {
  /** The node. */
  node: string;
  /** The revision as placement keys it (placement/filters.ts `diskKey`). */
  revision: string;
  /** The revision in words: `repo@abc1234`. */
  name: string;
  /** When the last one was recorded (the control plane's clock). */
  at: number;
  /** Disk-fulls in a row. */
  failures: number;
  /** When the backoff ends. */
  until: number;
  /** The revision's bytes (what a fetch there needs); null when unknown: only time lifts it. */
  needed: number | null;
  /** The lowest room the node reported since the last failure; null while none was reported. */
  roomLow: number | null;
  /** The room it reported when it failed; null when unknown. */
  roomThen: number | null;
  /** What its agent said it needed and had ("needs 14.2 GiB more, 1.0 GiB free"); null when unsaid. */
  said: string | null;
}

/** What {@link afterDiskFull} is told of a new disk-full. */
export interface DiskFullFacts {
  /** The node. */
  node: string;
  /** The revision's key. */
  revision: string;
  /** The revision in words. */
  name: string;
  /** Now. */
  at: number;
  /** The revision's bytes; null when unknown. */
  needed: number | null;
  /** The node's last reported room; null when unknown. */
  room: number | null;
  /** The agent's reason for the failure, in words (its "needs … more, … free" is kept). */
  reason: string;
}

/**
 * The record after a disk-full: one more in a row than `prev` (a record of
 * the same node and revision, or null), its backoff counted from now.
 */
export function afterDiskFull(
  prev: DiskFull | null,
  f: DiskFullFacts,
  policy: BackoffPolicy = DISK_FULL_BACKOFF,
): DiskFull {
  const failures = (prev?.failures ?? 0) + 1;
  return {
    node: f.node,
    revision: f.revision,
    name: f.name,
    at: f.at,
    failures,
    until: f.at + backoffDelay(failures, policy),
    needed: f.needed,
    roomLow: f.room,
    roomThen: f.room,
    said: AGENT_WORDS.exec(f.reason)?.[0] ?? null,
  };
}

/** The agent's figures in an `insufficient_disk` reason (agent/model_cache/disk_space.ts). */
const AGENT_WORDS = /needs [^,;()]+ more, [^,;()]+ free/;

/** The record after the node reported `room` (its lowest report is what room grows from). */
export function withRoomReport(d: DiskFull, room: number | null): DiskFull {
  if (room === null || (d.roomLow !== null && d.roomLow <= room)) return d;
  return { ...d, roomLow: room };
}

/** The reported room at which the node is tried again before its backoff ends; null: none. */
export function roomToRetry(d: DiskFull): number | null {
  return d.needed === null || d.roomLow === null ? null : d.roomLow + d.needed;
}

/**
 * Why the node is left out for the revision at `now` with `room` reported,
 * in words after its name ("ran out of disk fetching …"); null when it may
 * be chosen: its backoff ended, or its room grew by the revision's size.
 */
export function diskFullHold(d: DiskFull, room: number | null, now: number): string | null {
  if (now >= d.until) return null;
  const enough = roomToRetry(d);
  if (enough !== null && room !== null && room >= enough) return null;
  const facts = [
    d.said === null ? null : `its agent: ${d.said}`,
    d.roomThen === null ? null : `it reported room for ${formatBytes(d.roomThen)}`,
  ].filter((x) => x !== null);
  const why = facts.length === 0 ? "" : ` (${facts.join("; ")})`;
  const sooner = enough === null
    ? ""
    : `, or sooner once its reported room reaches ${formatBytes(enough)}`;
  const ago = now - d.at < 1_000 ? "just now" : `${formatSeconds((now - d.at) / 1000)} ago`;
  return `ran out of disk fetching ${d.name} ${ago}${why}; ` +
    `retried after ${new Date(d.until).toISOString()} (disk-full ${d.failures} in a row)${sooner}`;
}

/** Whether a record is old enough to forget: its backoff ended an hour ago, nothing since. */
export function stale(d: DiskFull, now: number): boolean {
  return now >= d.until + FORGET_AFTER_MS;
}

/** The control plane's disk-full records, by node and revision. */
export class DiskFullBook {
  readonly #byNode = new Map<string, Map<string, DiskFull>>();

  /** Records a disk-full of `f.node` for `f.revision`; answers the record. */
  record(f: DiskFullFacts): DiskFull {
    let mine = this.#byNode.get(f.node);
    if (mine === undefined) this.#byNode.set(f.node, mine = new Map());
    const prev = mine.get(f.revision) ?? null;
    const d = afterDiskFull(prev !== null && !stale(prev, f.at) ? prev : null, f);
    mine.set(f.revision, d);
    return d;
  }

  /**
   * A node's cache report came: its room lowers what room grows from, the
   * revisions it holds start over, and stale records go.
   */
  observe(node: string, room: number | null, holds: ReadonlySet<string>, now: number): void {
    const mine = this.#byNode.get(node);
    if (mine === undefined) return;
    for (const [revision, d] of mine) {
      if (holds.has(revision) || stale(d, now)) mine.delete(revision);
      else mine.set(revision, withRoomReport(d, room));
    }
    if (mine.size === 0) this.#byNode.delete(node);
  }

  /** Revision → why `node` is left out for it at `now`, for those it is. */
  holds(node: string, room: number | null, now: number): Map<string, string> {
    const out = new Map<string, string>();
    for (const [revision, d] of this.#byNode.get(node) ?? []) {
      const why = diskFullHold(d, room, now);
      if (why !== null) out.set(revision, why);
    }
    return out;
  }

  /** The record of `node` for `revision`, if any. */
  get(node: string, revision: string): DiskFull | undefined {
    return this.#byNode.get(node)?.get(revision);
  }

  /** Forgets a node (removed). */
  forget(node: string): void {
    this.#byNode.delete(node);
  }
}
