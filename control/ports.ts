/**
 * The ports agents allocated for their shards, learned from heartbeats and
 * kept with each placement: views and gateway polls read them, and the other
 * ranks of a multi-node replica get rank 0's in their launches.
 *
 * @module
 */
import type { ShardReport } from "../protocol/agent_protocol.ts";
import type { ControlState } from "./state.ts";
import type { StoredReplica } from "./store/store.ts";
import { replicaOfShard } from "../protocol/ids.ts";
import { learnsRendezvous } from "../engines/port_block.ts";

/**
 * Records the ports in a node's shard reports. Returns the replicas whose
 * ports changed, for the caller to store (the replica book's `savePorts`);
 * the nodes of their other ranks are marked for a new desired state when
 * rank 0's ports changed.
 */
export function learnPorts(
  state: ControlState,
  reports: readonly ShardReport[],
): StoredReplica[] {
  const changed = new Set<StoredReplica>();
  for (const report of reports) {
    if (report.port === 0) continue;
    const r = state.replicas.get(replicaOfShard(report.id));
    const shard = r?.placement?.shards.find((s) => s.shard_id === report.id);
    if (r === undefined || r.placement === null || shard === undefined) continue;
    const ports = r.placement.ports;
    let leaderChanged = false;
    if (ports.http[shard.shard_id] !== report.port) {
      ports.http[shard.shard_id] = report.port;
      changed.add(r);
      leaderChanged = shard.rank === 0;
    }
    const rendezvous = report.rendezvous_port ?? null;
    const learns = learnsRendezvous(shard.rank, r.placement.shards.length);
    if (learns && ports.rendezvous !== rendezvous) {
      ports.rendezvous = rendezvous;
      changed.add(r);
      leaderChanged = true;
    }
    if (leaderChanged) {
      for (const s of r.placement.shards) if (s.rank !== 0) state.dirty.add(s.node);
    }
  }
  return [...changed];
}
