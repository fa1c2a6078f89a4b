/**
 * Removing a node from the cluster (`DELETE /v1/nodes/:id`, `llmgw delete
 * node`): a decommissioned or mistyped node leaves the inventory, the store
 * and the fleet totals. Only a node that holds no replica, and that is lost
 * or that the operator cordoned or drained, can go (docs/control_plane.md):
 * a live node in service is refused, so a typo cannot cut traffic. A
 * removed node's agent that is still running registers again as a new node.
 *
 * @module
 */
import type { InventoryNode } from "../inventory/store.ts";
import { ConflictError, NotFoundError } from "./errors.ts";
import { sweepPulls } from "./model_pull_sweep.ts";
import type { ControlState } from "./state.ts";

/** The replicas placed on a node, by id, sorted. */
export function replicasOnNode(state: ControlState, nodeId: string): string[] {
  const ids = new Set<string>();
  for (const a of state.inventory.getNode(nodeId)?.allocations ?? []) ids.add(a.replica_id);
  for (const r of state.replicas.values()) {
    if (r.placement?.shards.some((s) => s.node === nodeId)) ids.add(r.id);
  }
  return [...ids].sort();
}

/**
 * Why a node cannot be removed now, or null when it can.
 *
 * @throws {NotFoundError} For an unknown node.
 */
export function removalRefusal(state: ControlState, nodeId: string): string | null {
  const node = state.inventory.getNode(nodeId);
  if (node === undefined || !state.nodes.has(nodeId)) throw new NotFoundError(`no node ${nodeId}`);
  const held = replicasOnNode(state, nodeId);
  if (held.length > 0) {
    const shown = held.slice(0, 5).join(", ") + (held.length > 5 ? `, … (${held.length})` : "");
    return `node ${nodeId} holds ${held.length} replica${held.length === 1 ? "" : "s"} ` +
      `(${shown}): drain it first (llmgw drain ${nodeId}) and wait until it is drained`;
  }
  if (node.liveness !== "lost" && node.intent === "none") {
    return `node ${nodeId} is ${node.state} and in service: cordon or drain it first ` +
      `(llmgw drain ${nodeId}), or stop its agent and wait until it is lost`;
  }
  return null;
}

/**
 * Removes a node: its stored record and credential, its inventory entry, its
 * reports. The caller forgets what it keeps by node (desired states).
 *
 * @throws {NotFoundError} For an unknown node.
 * @throws {ConflictError} When it holds replicas, or is live and in service.
 */
export function removeNode(state: ControlState, nodeId: string): Promise<InventoryNode> {
  return state.locked(async () => {
    const refusal = removalRefusal(state, nodeId);
    if (refusal !== null) throw new ConflictError(`Cannot remove node: ${refusal}`);
    const node = state.inventory.getNode(nodeId)!;
    const stored = state.nodes.get(nodeId)!;
    await state.store.deleteNode(nodeId);
    state.nodes.delete(nodeId);
    state.byTokenHash.delete(stored.token_hash);
    state.reports.delete(nodeId);
    state.modelCaches.delete(nodeId);
    state.diskFull.forget(nodeId);
    state.awaitingFirstReport.delete(nodeId);
    state.dirty.delete(nodeId);
    state.inventory.removeNode(nodeId);
    await state.event(
      "node_removed",
      `node/${nodeId}`,
      `operator: removed (was ${node.state}, ${node.gpus.length} GPUs)`,
    );
    state.kick();
    // Last, and never fatal: the node is gone everywhere else, and a pull part of an
    // unknown node is asked of no agent (desired states go to known nodes only). The sweep
    // cancels its parts; one the store refuses now, the next sweep cancels.
    await sweepPulls(state, state.now());
    return node;
  });
}
