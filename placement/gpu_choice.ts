/**
 * GPU choice inside a node (design §7): keep a tensor-parallel group inside one
 * NVLink domain where the topology is known, choosing the smallest domain
 * that fits so big domains stay whole; otherwise the lowest free indices.
 *
 * @module
 */
import type { Gpu } from "../discovery/types.ts";

/**
 * NVLink domains: the connected components of the NVLink graph among `gpus`
 * (links to GPUs outside the list are ignored). Each domain is sorted, and
 * the list is ordered by lowest index.
 */
export function nvlinkDomains(gpus: readonly Gpu[]): number[][] {
  const present = new Set(gpus.map((g) => g.index));
  const parent = new Map<number, number>();
  const find = (i: number): number => {
    let root = i;
    while (parent.get(root) !== root) root = parent.get(root)!;
    parent.set(i, root);
    return root;
  };
  for (const g of gpus) parent.set(g.index, g.index);
  for (const g of gpus) {
    for (const p of g.nvlink_peers) {
      if (!present.has(p)) continue;
      const a = find(g.index);
      const b = find(p);
      if (a !== b) parent.set(Math.max(a, b), Math.min(a, b));
    }
  }
  const domains = new Map<number, number[]>();
  for (const g of gpus) {
    const root = find(g.index);
    let d = domains.get(root);
    if (d === undefined) domains.set(root, d = []);
    d.push(g.index);
  }
  return [...domains.values()].map((d) => d.sort((a, b) => a - b)).sort((a, b) => a[0] - b[0]);
}

/**
 * Chooses `count` GPUs from `free` (ascending indices). When NVLink topology
 * is known (some GPU lists peers), the smallest domain whose free GPUs
 * suffice is used, its lowest free indices first; when none suffices, or
 * topology is unknown, the lowest free indices.
 *
 * @throws {RangeError} When fewer than `count` GPUs are free.
 */
export function chooseGpus(gpus: readonly Gpu[], free: readonly number[], count: number): number[] {
  if (free.length < count) {
    throw new RangeError(`Cannot choose ${count} GPUs: only ${free.length} free`);
  }
  if (!gpus.some((g) => g.nvlink_peers.length > 0)) return free.slice(0, count);
  const freeSet = new Set(free);
  let best: number[] | null = null;
  for (const domain of nvlinkDomains(gpus)) {
    const available = domain.filter((i) => freeSet.has(i));
    if (available.length >= count && (best === null || available.length < best.length)) {
      best = available;
    }
  }
  return (best ?? free).slice(0, count);
}
