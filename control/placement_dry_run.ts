/**
 * A placement dry run against the live inventory (`llmgw apply --dry-run`
 * placement, `POST /v1/deployments/dry-run`): where each replica of a
 * checked deployment would go now, with explanations, each placed replica
 * taking its GPUs from the next one's view, as the reconciler would place
 * them. Nothing changes.
 *
 * @module
 */
import { placementIndexOptions } from "./model_caches.ts";
import type { Deployment } from "../deployment/schema.ts";
import { applyPlacement, indexCluster, place } from "../placement/mod.ts";
import type { PlacementResult } from "../placement/types.ts";
import { replicaId } from "../protocol/ids.ts";
import type { ControlState } from "./state.ts";

/** Where each replica of `d` would go now; nothing changes. */
export function placementDryRun(state: ControlState, d: Deployment): PlacementResult[] {
  const index = indexCluster(state.inventory.snapshot(), placementIndexOptions(state));
  const out: PlacementResult[] = [];
  for (let i = 0; i < d.replicas; i++) {
    const r = place(index, d, replicaId(d.name, i), { detail: "grouped" });
    if (r.status === "placed") applyPlacement(index, d.name, r.shards);
    out.push(r);
  }
  return out;
}
