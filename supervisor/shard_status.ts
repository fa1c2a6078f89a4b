/**
 * What the supervisor reports of one shard (design §9.3): its machine's
 * state (shard_machine.ts) with what the runner knows of the current run,
 * as copies, so a caller that changes a report changes nothing of the shard.
 *
 * @module
 */
import type { ShardSpec } from "../engines/types.ts";
import { reportedRendezvous } from "../engines/port_block.ts";
import type { ShardLaunch } from "../engines/types.ts";
import type { ShardMachineState } from "./shard_machine.ts";
import type { ColdStartReceipt } from "../protocol/cold_start_receipt.ts";
import type { ShardDownload } from "../protocol/shard_download.ts";
import type { DesiredShard, ShardMetrics, ShardReport } from "./types.ts";

/** What a runner knows of its shard besides its machine. */
export interface RunView {
  /** The shard as desired. */
  desired: DesiredShard;
  /** Hash of its launch. */
  hash: string;
  /** The run's process group leader, while there is one. */
  pid: number | null;
  /** The launch with this run's ports; null before they are taken. */
  launch: ShardLaunch | null;
  /** What its plugin built; null before it did. */
  spec: ShardSpec | null;
  /** The last notice that is not a failure. */
  notice: { at: number; message: string } | null;
  /** Failures in a row after which the supervisor gives up on this node. */
  crashLoopLimit: number;
  /** The run's cold-start receipt; null before a spawn or for an adopted engine. */
  coldStart: ColdStartReceipt | null;
  /** The model download while the shard is `downloading`; null otherwise. */
  download: ShardDownload | null;
}

/** The shard's status. */
export function shardStatus(m: ShardMachineState, run: RunView): ShardReport {
  return {
    id: run.desired.id,
    engine: run.desired.engine,
    state: m.state,
    since: m.since,
    pid: run.pid,
    port: run.launch?.port ?? 0,
    rendezvous_port: reportedRendezvous(run.launch),
    notice: run.notice === null ? null : { ...run.notice },
    serves_http: run.spec?.probes?.serves_http ?? false,
    progress: m.progress === null ? null : { ...m.progress },
    restarts: m.restarts,
    crash_loop: m.failures === 0 ? null : { failures: m.failures, limit: run.crashLoopLimit },
    adopted: m.adopted,
    last_failure: m.lastFailure === null
      ? null
      : { ...m.lastFailure, log_tail: [...m.lastFailure.log_tail] },
    spec_hash: run.hash,
    load_metrics: run.spec?.metrics ?? null,
    cold_start: run.coldStart === null ? null : structuredClone(run.coldStart),
    download: run.download,
  };
}

/** What the agent's metrics need of the shard beyond its status. */
export function shardMetrics(m: ShardMachineState, desired: DesiredShard): ShardMetrics {
  return {
    id: desired.id,
    gpu_indices: desired.launch.gpus.map((g) => g.index),
    restarts_total: m.restartsTotal,
    last_ready_after_ms: m.lastReadyAfterMs,
  };
}
