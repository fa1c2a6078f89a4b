/**
 * The one order for ids and names (design §4): natural, so `n2` comes before
 * `n10` and `mlx5_2` before `mlx5_10` in every list llmgw hands out, whether
 * the inventory, placement, a store or discovery made it.
 *
 * @module
 */

const collator = new Intl.Collator("en", { numeric: true });

/**
 * Natural order (`n2` before `n10`), ties broken by code units so the order
 * is total: two different strings never compare equal, so a sort is the same
 * whatever order its input came in.
 */
export function compareNatural(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}
