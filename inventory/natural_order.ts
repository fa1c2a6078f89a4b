/**
 * The inventory's one order for ids (design §4): natural, so `n2` comes before
 * `n10` in every list the store hands out.
 *
 * @module
 */
import type { Allocation } from "./types.ts";

const collator = new Intl.Collator("en", { numeric: true });

/** Natural order (`n2` before `n10`), ties broken by code units so the order is total. */
export function compareNatural(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** Allocations by replica, then shard, both in natural order. */
export function compareAllocations(a: Allocation, b: Allocation): number {
  return compareNatural(a.replica_id, b.replica_id) || compareNatural(a.shard_id, b.shard_id);
}
