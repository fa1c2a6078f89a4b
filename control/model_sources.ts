/**
 * The control plane's side of "once per fleet" (issue #25 item 3): for
 * every model revision that placed replicas need, the peer plan
 * (models/peer_plan.ts) over the nodes running them that are alive, turned
 * into each node's `model_sources` (protocol/model_sources.ts) for its
 * desired state. A node that stops heartbeating (unreachable, lost) is no
 * source at the next pass, so the nodes that fetched from it are given the
 * hosts before it; it is still planned for, as a leaf that serves nobody, so
 * the desired state it reads when it comes back (written while it was
 * silent) points it at peers rather than at the origin alone.
 *
 * - A node **holds** a revision when a shard of it there reports `ready`
 *   (its files were fetched and verified before the engine started), or its
 *   model cache reports the revision complete (control/model_caches.ts): a
 *   live node that holds it serves it even when it runs no shard of it.
 * - The chain keeps its order from pass to pass (models/peer_plan.ts
 *   `peerOrder`); a node new to it is placed by the bytes it reports fetched,
 *   so a node already fetching alone from the origin keeps doing so.
 * - A node **can serve** when its local API is https: the peer route needs
 *   the cluster's TLS (agent/peer_server.ts).
 * - A model given as a local or shared path is used in place on each host:
 *   no plan.
 *
 * @module
 */
import { isLocalModel } from "../deployment/model_revision.ts";
import type { DesiredLaunch } from "../engines/types.ts";
import { peerOrder, type PlanHost, planPeerSources } from "../models/peer_plan.ts";
import type { ModelSources } from "../protocol/model_sources.ts";
import type { ControlState } from "./state.ts";

/** Whether `node`'s model cache, as it last reported it, holds the revision complete. */
function holds(state: ControlState, node: string, r: { model: string; commit?: string }): boolean {
  if (r.commit === undefined) return false;
  return state.modelCaches.get(node)?.revisions.some((c) =>
    c.repo === r.model && c.commit === r.commit && c.state === "complete"
  ) ?? false;
}

/** Bytes of the revision `node`'s model cache last reported fetched (0 when none or unknown). */
function bytesDone(
  state: ControlState,
  node: string,
  r: { model: string; commit?: string },
): number {
  if (r.commit === undefined) return 0;
  return state.modelCaches.get(node)?.revisions.find((c) =>
    c.repo === r.model && c.commit === r.commit
  )?.bytes_done ?? 0;
}

/** Node states whose agents are not heartbeating: never a source (planned for as a leaf). */
const SILENT = new Set(["unreachable", "lost"]);

/** Each node's model sources, and the order each revision's plan chained its hosts in. */
export interface PlannedSources {
  /** Node → its sources, for the revisions it shares with other nodes. */
  byNode: Map<string, ModelSources[]>;
  /** `model@commit` → the plan's order (models/peer_plan.ts `peerOrder`), for the next pass. */
  orders: Map<string, string[]>;
}

/**
 * Each node's model sources, for the revisions it shares with other nodes,
 * from every placed shard's launch. `previousOrders` is the last pass's
 * `orders`: a revision's chain keeps its order from pass to pass.
 */
export function modelSourcesByNode(
  state: ControlState,
  launches: Iterable<DesiredLaunch>,
  previousOrders: ReadonlyMap<string, readonly string[]> = new Map(),
): PlannedSources {
  // model revision → node → whether a shard of it there is ready
  const needs = new Map<string, { model: string; commit?: string; nodes: Map<string, boolean> }>();
  const silent = new Set<string>();
  for (const launch of launches) {
    if (isLocalModel(launch.model)) continue;
    const node = launch.node.id;
    const liveness = state.inventory.stateOf(node);
    if (liveness === undefined) continue;
    if (SILENT.has(liveness)) silent.add(node);
    const key = `${launch.model}@${launch.model_commit ?? ""}`;
    let entry = needs.get(key);
    if (entry === undefined) {
      entry = { model: launch.model, commit: launch.model_commit, nodes: new Map() };
      needs.set(key, entry);
    }
    const ready = state.reports.get(node)?.get(launch.shard_id)?.state === "ready";
    entry.nodes.set(node, (entry.nodes.get(node) ?? false) || ready || holds(state, node, entry));
  }
  // Live nodes whose caches hold a needed revision serve it too, shard or not (a pull, an
  // earlier replica): roots of chains.
  for (const entry of needs.values()) {
    for (const node of state.modelCaches.keys()) {
      if (entry.nodes.has(node) || !holds(state, node, entry)) continue;
      const liveness = state.inventory.stateOf(node);
      if (liveness !== undefined && !SILENT.has(liveness)) entry.nodes.set(node, true);
    }
  }
  const out = new Map<string, ModelSources[]>();
  const orders = new Map<string, string[]>();
  for (const [key, { model, commit, nodes }] of needs) {
    if (nodes.size < 2) continue;
    const urls = new Map<string, string>();
    const hosts: PlanHost[] = [...nodes].map(([node, holds]) => {
      const url = state.nodes.get(node)?.registration.agent_url ?? null;
      if (url !== null && url.startsWith("https:")) urls.set(node, url);
      return {
        node,
        holds,
        canServe: urls.has(node) && !silent.has(node),
        bytesDone: bytesDone(state, node, { model, commit }),
      };
    });
    const previousOrder = previousOrders.get(key);
    orders.set(key, peerOrder(hosts, previousOrder));
    for (const [node, sources] of planPeerSources(hosts, { previousOrder })) {
      // An agent without TLS has no node certificate to ask peers with.
      if (sources.peers.length === 0 || !urls.has(node)) continue;
      const list = out.get(node) ?? [];
      list.push({
        model,
        ...(commit === undefined ? {} : { commit }),
        peers: sources.peers.map((p) => ({ node_id: p, url: urls.get(p)! })),
        origin: sources.origin,
      });
      out.set(node, list);
    }
  }
  for (const list of out.values()) {
    list.sort((a, b) => `${a.model}@${a.commit}` < `${b.model}@${b.commit}` ? -1 : 1);
  }
  return { byNode: out, orders };
}
