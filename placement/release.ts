/**
 * Releases in a placement index: the inverse of `applyPlacement`
 * (cluster_index.ts), so one index stays true through a reconcile pass that
 * removes and rebuilds replicas before it places others.
 *
 * @module
 */
import type { ClusterIndex, IndexedNode } from "./cluster_index.ts";
import { forgetStableFit } from "./stable_fit.ts";

/** What {@link releasePlacement} needs of a released allocation. */
export interface ReleasedShard {
  /** Node id. */
  node: string;
  /** GPUs freed. */
  gpu_indices: readonly number[];
}

/**
 * Records a release in the index (the inverse of `applyPlacement`):
 * the GPUs are free again, or unhealthy when their node says so, and the
 * deployment counts once less on each node. A node the index lacks is
 * skipped (it left the cluster; nothing can be placed there anyway).
 */
export function releasePlacement(
  index: ClusterIndex,
  deployment: string | null | undefined,
  shards: readonly ReleasedShard[],
): void {
  const touched = new Set<IndexedNode>();
  let unhealthyFreed = false;
  for (const s of shards) {
    const n = index.byId.get(s.node);
    if (n === undefined) continue;
    for (const i of s.gpu_indices) {
      if (!n.allocatedIndices.delete(i)) continue;
      for (const [cls, slot] of n.classes) {
        const gpu = slot.gpus.find((g) => g.index === i);
        if (gpu === undefined) continue;
        slot.allocated--;
        if (gpu.health.problems.length > 0) {
          slot.unhealthy++;
          unhealthyFreed = true;
        } else {
          let at = 0;
          while (at < slot.free.length && slot.free[at] < i) at++;
          slot.free.splice(at, 0, i);
          index.freeByClass.get(cls)![slot.pos] = slot.free.length;
        }
      }
    }
    touched.add(n);
  }
  if (deployment !== undefined && deployment !== null) {
    for (const n of touched) {
      const k = (n.deployments.get(deployment) ?? 0) - 1;
      if (k > 0) n.deployments.set(deployment, k);
      else n.deployments.delete(deployment);
    }
  }
  // The stable verdicts count unhealthy GPUs, which "stay so" only while none is released.
  if (unhealthyFreed) forgetStableFit(index);
}
