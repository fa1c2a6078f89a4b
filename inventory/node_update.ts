/**
 * Liveness transitions of a node record (design §4): what being heard from or
 * staying silent does to its state, and what the store reports back: the
 * state change and the allocated GPUs that went missing or unhealthy.
 *
 * @module
 */
import { shardLabel } from "./allocation_ledger.ts";
import { livenessAt, type LivenessThresholds, worseLiveness } from "./node_state.ts";
import {
  type InventoryNode,
  inventoryNodeOf,
  type NodeRecord,
  recordState,
  sortedAllocations,
} from "./node_record.ts";
import { isHealthy } from "./node_report.ts";
import type { NodeState } from "./types.ts";

/** A node's reported state changing (design §4). */
export interface StateTransition {
  /** The node id. */
  node: string;
  /** The state before. */
  from: NodeState;
  /** The state after. */
  to: NodeState;
}

/**
 * An allocated GPU that its node no longer reports, or reports unhealthy.
 * The allocation is kept: rebuilding the replica is the control plane's job
 * (design §5.4).
 */
export interface AllocatedGpuProblem {
  /** The node id. */
  node: string;
  /** The GPU's index. */
  gpu_index: number;
  /** The replica holding it. */
  replica_id: string;
  /** The shard holding it. */
  shard_id: string;
  /** `missing`: not in the node's GPU list any more; `unhealthy`: has health problems. */
  problem: "missing" | "unhealthy";
  /** In words, e.g. "GPU 3 on node n1, held by shard r-1/0, is unhealthy: 2 ECC errors". */
  message: string;
}

/** What a heartbeat did. */
export interface NodeUpdate {
  /** The node (a copy, made when read). */
  readonly node: InventoryNode;
  /** The state change, e.g. `lost` → `ready`; `null` when the state did not change. */
  transition: StateTransition | null;
  /**
   * Every allocated GPU that is now missing or unhealthy (level-triggered:
   * reported on each update while it lasts). Empty when no GPU list was sent.
   */
  allocated_gpu_problems: AllocatedGpuProblem[];
}

/** What a registration did. */
export interface RegistrationResult extends NodeUpdate {
  /** True when the node was not known before. */
  created: boolean;
}

/**
 * Marks a record heard from at `nowMs`: liveness back to `ready`, intent
 * untouched (design §1.3). The last-seen time never moves back, so a clock
 * stepping back cannot make a node look silent for longer.
 */
export function markHeard(record: NodeRecord, nowMs: number): void {
  record.lastSeenMs = Math.max(record.lastSeenMs, nowMs);
  record.heardMs = Math.max(record.heardMs, nowMs);
  record.liveness = "ready";
}

/**
 * Applies the liveness timers at `nowMs` to one record and returns its state
 * change, or `null` when there is none. Time only makes liveness worse: only
 * being heard from brings a node back.
 */
export function applyTimers(
  record: NodeRecord,
  nowMs: number,
  thresholds: Readonly<LivenessThresholds>,
): StateTransition | null {
  const liveness = worseLiveness(
    record.liveness,
    livenessAt(record.lastSeenMs, nowMs, thresholds),
  );
  if (liveness === record.liveness) return null;
  const from = recordState(record);
  record.liveness = liveness;
  return { node: record.reg.id, from, to: recordState(record) };
}

/**
 * What a registration or heartbeat did to a record whose state was `from`;
 * GPU problems only when the node sent its GPUs.
 */
export function nodeUpdate(record: NodeRecord, from: NodeState, gpusReported: boolean): NodeUpdate {
  const to = recordState(record);
  // The copy is made when asked for, as of now: heartbeats, at fleet rate, mostly never ask.
  return {
    get node() {
      return inventoryNodeOf(record);
    },
    transition: from === to ? null : { node: record.reg.id, from, to },
    allocated_gpu_problems: gpusReported ? allocatedGpuProblems(record) : [],
  };
}

/**
 * Every allocated GPU of a record that its GPU list lacks or reports
 * unhealthy, by replica, shard and GPU index.
 */
export function allocatedGpuProblems(record: NodeRecord): AllocatedGpuProblem[] {
  const id = record.reg.id;
  const gpus = new Map(record.reg.gpus.map((g) => [g.index, g]));
  const problems: AllocatedGpuProblem[] = [];
  for (const a of sortedAllocations(record)) {
    for (const i of [...a.gpu_indices].sort((x, y) => x - y)) {
      const gpu = gpus.get(i);
      const held = `GPU ${i} on node ${id}, held by shard ${shardLabel(a.replica_id, a.shard_id)}`;
      const base = { node: id, gpu_index: i, replica_id: a.replica_id, shard_id: a.shard_id };
      if (gpu === undefined) {
        problems.push({ ...base, problem: "missing", message: `${held}, is no longer reported` });
      } else if (!isHealthy(gpu)) {
        problems.push({
          ...base,
          problem: "unhealthy",
          message: `${held}, is unhealthy: ${gpu.health.problems.join("; ")}`,
        });
      }
    }
  }
  return problems;
}
