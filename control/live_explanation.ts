/**
 * A replica explained against the live inventory (design §1.2): what
 * `llmgw plan` would print for it now, beside what its last placement said
 * and why it is failing. `llmgw explain` and `llmgw describe replica` show it.
 *
 * @module
 */
import { placementIndexOptions } from "./model_caches.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { indexCluster, place } from "../placement/mod.ts";
import type { Explanation } from "../placement/types.ts";
import { NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
import { type ReplicaView, replicaView } from "./views.ts";

/**
 * Up to this many nodes, the live explanation names every rejected node;
 * past it, rejections are grouped by reason (counts, what the nodes share,
 * examples), which stays readable and cheap on a 10,000-node fleet.
 */
export const PER_NODE_DETAIL_MAX_NODES = 64;

/** A replica and its explanation on the live inventory. */
export interface LiveExplanation {
  /** The replica as `GET /v1/replicas` shows it (state, shards, last failures with log tails). */
  replica: ReplicaView;
  /**
   * Where the replica would be placed now, on the nodes as they are, with the
   * GPUs it holds itself counted as free: the same filters and scores as
   * `llmgw plan`. Null when its deployment is gone.
   */
  live: Explanation | null;
  /** Whether `live` names every rejected node (`full`) or groups them (`grouped`). */
  detail: "full" | "grouped";
  /** How many nodes the live inventory has. */
  nodes: number;
}

/**
 * The nodes as placement would see them if `replicaId` held nothing: a
 * placed replica is explained as if it were being placed now.
 */
export function withoutReplica(nodes: readonly ClusterNode[], replicaId: string): ClusterNode[] {
  return nodes.map((n) => ({
    ...n,
    allocations: n.allocations.filter((a) => a.replica_id !== replicaId),
  }));
}

/**
 * Explains one replica on the live inventory.
 *
 * @throws {NotFoundError} When there is no such replica.
 */
export function liveExplanation(state: ControlState, replicaId: string): LiveExplanation {
  const r = state.replicas.get(replicaId);
  if (r === undefined) throw new NotFoundError(`no replica ${replicaId}`);
  const nodes = withoutReplica(state.inventory.snapshot(), replicaId);
  const detail = nodes.length <= PER_NODE_DETAIL_MAX_NODES ? "full" : "grouped";
  const spec = state.deployments.get(r.deployment)?.spec;
  const live = spec === undefined
    ? null
    : place(indexCluster(nodes, placementIndexOptions(state)), spec, `${replicaId}.explain`, {
      detail,
    }).explanation;
  return { replica: replicaView(state, r), live, detail, nodes: nodes.length };
}
