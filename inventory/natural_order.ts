/**
 * The inventory's order for allocations, in the one natural order for ids
 * (text/natural_order.ts, design §4): `n2` comes before `n10` in every list
 * the store hands out.
 *
 * @module
 */
import { compareNatural } from "../text/natural_order.ts";
import type { Allocation } from "./types.ts";

export { compareNatural };

/** Allocations by replica, then shard, both in natural order. */
export function compareAllocations(a: Allocation, b: Allocation): number {
  return compareNatural(a.replica_id, b.replica_id) || compareNatural(a.shard_id, b.shard_id);
}
