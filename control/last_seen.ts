/**
 * Nodes' last-seen times in the store, so a restarted control plane shows
 * when each node was really last heard from rather than its own start
 * (docs/control_plane.md). Heartbeats never write the store: a reconcile
 * pass writes, in one batch, the nodes heard from at least
 * {@link LAST_SEEN_WRITE_EVERY_MS} after their stored time, and a stop
 * writes every newer time. A restart therefore shows a time at most that
 * much (plus a pass) too old, and exact after a clean stop.
 *
 * @module
 */
import type { ControlState } from "./state.ts";
import type { NodeSeen } from "./store/store.ts";

/** The least time between two writes of one node's last-seen time. */
export const LAST_SEEN_WRITE_EVERY_MS = 60_000;

/**
 * Writes the last-seen times that are due: each node heard from at least
 * `everyMs` after its stored time (0: every newer time, on stop). The
 * in-memory records follow, so a later `putNode` writes the same time.
 */
export async function recordLastSeen(
  state: ControlState,
  everyMs: number = LAST_SEEN_WRITE_EVERY_MS,
): Promise<number> {
  const due: NodeSeen[] = [];
  for (const n of state.nodes.values()) {
    const heard = state.inventory.lastHeard(n.id);
    if (heard === undefined) continue;
    const stored = n.last_seen_at ?? null;
    if (stored === null || heard - stored >= Math.max(everyMs, 1)) {
      due.push({ id: n.id, last_seen_at: heard });
    }
  }
  if (due.length === 0) return 0;
  await state.store.recordNodesSeen(due);
  for (const { id, last_seen_at } of due) {
    const n = state.nodes.get(id);
    if (n !== undefined) n.last_seen_at = last_seen_at;
  }
  return due.length;
}

/** Shows each restored node's stored last-seen time (call right after restoring it). */
export function restoreLastSeen(state: ControlState, nodeId: string): void {
  const at = state.nodes.get(nodeId)?.last_seen_at;
  if (typeof at === "number") state.inventory.restoreLastSeen(nodeId, at);
}
