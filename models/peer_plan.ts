/**
 * Which hosts fetch a model revision from its origin (the hub or a mirror)
 * and which from which peers (issue #25 item 3, docs/models.md "Sources").
 * The control plane runs it per model revision over the hosts that need it
 * and are alive, and sends each host its part; a source that dies drops out
 * of the input, so the next plan hangs its followers on the hosts before it.
 *
 * The plan is chains: the roots are hosts that already hold the revision and
 * can serve it, else the first `originFetchers` hosts, which fetch from the
 * origin; every other host follows one chain, fetching from the host before
 * it. Hosts that need the revision keep the order of the previous plan
 * ({@link peerOrder}): a plan that moved its leader on every pass would
 * send the new leader to the origin for what the old one already held.
 * Hosts new to the plan come after, furthest along first (bytes fetched,
 * then natural order), so a host already fetching alone leads rather than
 * being told to wait behind a newcomer.
 * A peer serves a range as soon as its chunk is in (pipelined), so on equal
 * links a chain of N hosts takes about one host's time plus one
 * pipeline step per hop (docs/benchmarks.md "Model distribution"), where a
 * tree with fan-out k splits each parent's upload k ways. When no host can
 * serve (a cluster without TLS has no peer route), each fetches from the
 * origin. Each host lists
 * its ancestors nearest first (a dead parent's range is asked of the one
 * before), then the origin, last, for when every peer fails. Pure.
 *
 * @module
 */
import { compareNatural } from "../text/natural_order.ts";

/** One host that runs a replica of the revision. */
export interface PlanHost {
  /** Its node id. */
  node: string;
  /** It holds every file of the revision, verified. */
  holds: boolean;
  /** It serves the peer route (over the cluster's TLS); a host that cannot is only ever a leaf. */
  canServe: boolean;
  /** Bytes of the revision it has fetched so far (0 or absent: none, or unknown). */
  bytesDone?: number;
}

/** Where one host fetches the revision from. */
export interface HostSources {
  /** Peers to ask, in order (nearest ancestor first). */
  peers: string[];
  /** Whether it fetches from the origin: first when `peers` is empty, else after them. */
  origin: boolean;
}

/** Settings of {@link planPeerSources}. */
export interface PeerPlanOptions {
  /** Hosts fetching from the origin when none holds the revision (default 1). */
  originFetchers?: number;
  /** Ancestors listed per host (default 3). */
  maxPeers?: number;
  /** The previous plan's order ({@link peerOrder}); absent: none (a new revision, a new leader). */
  previousOrder?: readonly string[];
}

/**
 * The order in which hosts that need the revision are chained: hosts that
 * can serve before those that cannot (a leaf ends a chain rather than
 * breaking one); within each, those of the previous plan first, in its
 * order, then the others by bytes fetched (most first; reports are seconds
 * old, so bytes only place newcomers), then natural order. Hosts that hold
 * the revision are left out. It is the order the plan uses: keep it for the
 * next plan's `previousOrder`, so a host that could not serve for a while
 * (silent) comes back behind the chain, not at its head.
 */
export function peerOrder(
  hosts: readonly PlanHost[],
  previousOrder: readonly string[] = [],
): string[] {
  const rank = new Map(previousOrder.map((node, i) => [node, i]));
  return [...new Map(hosts.map((h) => [h.node, h])).values()]
    .filter((h) => !h.holds)
    .sort((a, b) =>
      Number(b.canServe) - Number(a.canServe) ||
      (rank.get(a.node) ?? Infinity) - (rank.get(b.node) ?? Infinity) ||
      (b.bytesDone ?? 0) - (a.bytesDone ?? 0) ||
      compareNatural(a.node, b.node)
    )
    .map((h) => h.node);
}

/**
 * Each host's sources, by node id. A host that holds the revision gets no
 * peers and no origin: it fetches nothing.
 */
export function planPeerSources(
  hosts: readonly PlanHost[],
  options: PeerPlanOptions = {},
): Map<string, HostSources> {
  const originFetchers = Math.max(1, options.originFetchers ?? 1);
  const maxPeers = Math.max(1, options.maxPeers ?? 3);
  const sorted = [...new Map(hosts.map((h) => [h.node, h])).values()]
    .sort((a, b) => compareNatural(a.node, b.node));
  const plan = new Map<string, HostSources>();
  for (const h of sorted) if (h.holds) plan.set(h.node, { peers: [], origin: false });
  const byNode = new Map(sorted.map((h) => [h.node, h]));
  const ordered = peerOrder(sorted, options.previousOrder).map((node) => byNode.get(node)!);
  if (ordered.length === 0) return plan;
  const holders = sorted.filter((h) => h.holds && h.canServe).map((h) => h.node);
  const chains: string[][] = holders.map((node) => [node]);
  let rest = ordered;
  if (chains.length === 0) {
    // Nobody holds it: a few fetch from the origin, each the root of a chain.
    const roots = ordered.slice(0, originFetchers);
    rest = ordered.slice(roots.length);
    for (const root of roots) {
      plan.set(root.node, { peers: [], origin: true });
      if (root.canServe) chains.push([root.node]);
    }
  }
  if (chains.length === 0) {
    // Nobody can serve (a cluster without TLS): every host fetches from the origin.
    for (const h of rest) plan.set(h.node, { peers: [], origin: true });
    return plan;
  }
  // Round robin over the chains; within a chain, each follows the one before.
  rest.forEach((h, i) => {
    const chain = chains[i % chains.length];
    const peers = chain.slice(-maxPeers).reverse();
    plan.set(h.node, { peers, origin: true });
    // A host that cannot serve is a leaf: nobody is hung after it.
    if (h.canServe) chain.push(h.node);
  });
  return plan;
}
