/**
 * What an agent reports about its model cache in each heartbeat (issue #25
 * item 5): the revisions it holds or is fetching, the room a new revision
 * has under the high watermark once everything evictable is evicted
 * (placement's `insufficient_disk` and its preference for holders read
 * these), and the evictions since the last heartbeat the control plane
 * took (each becomes a `model_evicted` event), and the engine compile
 * cache directories it evicted (each an `engine_cache_evicted` event;
 * optional: an older agent sends none), and the pulls it was asked for
 * that failed for good (`pulls_failed`: the control plane marks the node's
 * part of the pull `failed`; optional: an older agent sends none).
 *
 * Optional on the wire (`model_cache` of the heartbeat): an older agent
 * sends none, and its nodes are then neither filtered for disk nor
 * preferred as holders. Bounded by protocol/report_bounds.ts: the most
 * recently used {@link REPORT_BOUNDS.cacheRevisions} revisions are listed
 * (every one being fetched first), the rest only counted in `omitted`.
 *
 * @module
 */
import { z } from "zod";
import { COMMIT_PATTERN } from "../models/hub_protocol.ts";
import { REPORT_BOUNDS } from "./report_bounds.ts";
import type { Assert, Same } from "./same_type.ts";

/** One model revision in an agent's cache. */
export interface CachedRevisionReport {
  /** The hub id. */
  repo: string;
  /** The commit (40 hex). */
  commit: string;
  /** Its bytes: the files its snapshot links, or the download's total while it is fetched. */
  bytes: number;
  /**
   * `complete`: every file verified and linked, the download finished;
   * `downloading`: being fetched now; `partial`: some files here, but no
   * download of it finished (one stopped midway, or a hub cache found on
   * disk and not yet checked): not a holder, its bytes need no new room.
   */
  state: "complete" | "downloading" | "partial";
  /** Bytes on disk so far (`bytes` when complete). */
  bytes_done: number;
  /** When a shard last used it or its download completed (ms since epoch); null if never recorded. */
  last_used: number | null;
  /** Kept from eviction: a deployment with `pinned: true` names it. */
  pinned: boolean;
}

/** One revision the agent evicted. */
export interface EvictionReport {
  /** The hub id. */
  repo: string;
  /** The commit. */
  commit: string;
  /** Bytes freed. */
  bytes: number;
  /** When (ms since epoch). */
  at: number;
  /** Why, in words (the disk over the high watermark, with the numbers). */
  reason: string;
}

/** One engine compile and JIT cache directory the agent evicted (issue #25 item 7). */
export interface EngineCacheEvictionReport {
  /** The engine plugin. */
  engine: string;
  /** The directory's name: its key (engines/compile_cache.ts). */
  key: string;
  /** Its model (hub id or path); null when the directory kept no record of it. */
  model: string | null;
  /** Its model's commit; null for a local path, an unresolved revision or no record. */
  commit: string | null;
  /** Bytes freed. */
  bytes: number;
  /**
   * True when the agent's walk of the directory was cut short (its time or
   * entry bound): at least `bytes` were freed. Absent: `bytes` is whole.
   */
  bytes_at_least?: boolean;
  /** When (ms since epoch). */
  at: number;
  /** `revision_evicted`: its model revision left the cache; `disk_pressure`: the watermarks. */
  cause: "revision_evicted" | "disk_pressure";
  /** Why, in words. */
  reason: string;
}

/**
 * A pull (`llmgw models pull`, a rollout's pre-pull) that failed for good on
 * the agent: an unknown repo or revision, a gated repo, no room, content
 * that failed its hash from every source. Sent at every heartbeat while
 * the desired state still asks for the pull; a retryable failure (hub
 * unreachable, a peer gone) is never sent: the agent tries again.
 */
export interface PullFailureReport {
  /** The hub id. */
  repo: string;
  /** The commit. */
  commit: string;
  /** What failed (agent/pull_failure.ts), e.g. `revision_not_found`, `gated`, `insufficient_disk`. */
  kind: string;
  /** The hub's or the disk's words; never a token. */
  message: string;
  /** When (ms since epoch, the agent's clock). */
  at: number;
  /**
   * The `requested_at` of the desired pull it failed under: the control
   * plane applies the report only to that request. Absent from an older
   * agent, or under an older control plane.
   */
  requested_at?: number;
}

/** An agent's model cache, as its heartbeat carries it. */
export interface ModelCacheReport {
  /**
   * Bytes a new revision may take before the cache's disk passes the high
   * watermark, once every revision no shard uses and no deployment pins is
   * evicted; null when the agent could not read its disk.
   */
  room_bytes: number | null;
  /** Revisions held or being fetched: downloads first, then most recently used. */
  revisions: CachedRevisionReport[];
  /** Revisions held beyond the bound and left out (least recently used). */
  omitted: number;
  /** Evictions not yet reported, oldest first. */
  evicted: EvictionReport[];
  /** Engine cache directories evicted and not yet reported, oldest first. */
  engine_caches_evicted?: EngineCacheEvictionReport[];
  /** Pulls still asked for that failed for good. */
  pulls_failed?: PullFailureReport[];
}

const Repo = z.string().min(1).max(REPORT_BOUNDS.cacheRepo);
const Commit = z.string().regex(COMMIT_PATTERN, "must be a commit of 40 hex digits");

/** The schema of {@link ModelCacheReport}. */
export const ModelCacheReportSchema = z.object({
  room_bytes: z.number().int().min(0).nullable(),
  revisions: z.array(z.object({
    repo: Repo,
    commit: Commit,
    bytes: z.number().int().min(0),
    state: z.enum(["complete", "downloading", "partial"]),
    bytes_done: z.number().int().min(0),
    last_used: z.number().nullable(),
    pinned: z.boolean(),
  })).max(REPORT_BOUNDS.cacheRevisions),
  omitted: z.number().int().min(0),
  evicted: z.array(z.object({
    repo: Repo,
    commit: Commit,
    bytes: z.number().int().min(0),
    at: z.number(),
    reason: z.string().max(REPORT_BOUNDS.reason),
  })).max(REPORT_BOUNDS.cacheEvictions),
  engine_caches_evicted: z.array(z.object({
    engine: z.string().min(1).max(REPORT_BOUNDS.engineCacheKey),
    key: z.string().min(1).max(REPORT_BOUNDS.engineCacheKey),
    model: z.string().max(REPORT_BOUNDS.downloadModel).nullable(),
    commit: z.string().max(REPORT_BOUNDS.downloadCommit).nullable(),
    bytes: z.number().int().min(0),
    bytes_at_least: z.boolean().optional(),
    at: z.number(),
    cause: z.enum(["revision_evicted", "disk_pressure"]),
    reason: z.string().max(REPORT_BOUNDS.reason),
  })).max(REPORT_BOUNDS.cacheEvictions).optional(),
  pulls_failed: z.array(z.object({
    repo: Repo,
    commit: Commit,
    kind: z.string().min(1).max(REPORT_BOUNDS.failureKind),
    message: z.string().max(REPORT_BOUNDS.reason),
    at: z.number(),
    requested_at: z.number().optional(),
  })).max(REPORT_BOUNDS.pullFailures).optional(),
});

// `deno check` fails here when the interfaces and the schema drift apart.
type _ModelCacheReportMatchesSchema = Assert<
  Same<z.output<typeof ModelCacheReportSchema>, ModelCacheReport>
>;

/** `repo@commit`: how placement and the control plane name a held revision. */
export function revisionName(repo: string, commit: string): string {
  return `${repo}@${commit}`;
}
