/**
 * Each node's desired state: the shards it should run, with a generation
 * that grows with every change and long-poll waiters woken by a change, so
 * changes reach agents within a second.
 *
 * @module
 */
import type { Deployment } from "../deployment/schema.ts";
import { launchReady, shardLaunches } from "../engines/launch.ts";
import type { DesiredLaunch } from "../engines/types.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { DesiredShard, DesiredState } from "../protocol/agent_protocol.ts";
import type { ModelSources } from "../protocol/model_sources.ts";
import { modelSourcesByNode } from "./model_sources.ts";
import { desiredModels, pinnedModels } from "./model_pulls.ts";
import type { DesiredModel } from "../protocol/desired_models.ts";
import { NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
import type { StoredPlacement } from "./store/store.ts";
import { compareNatural } from "../text/natural_order.ts";

/**
 * The launches of a stored placement with the ports its agents reported, or
 * null when the inventory no longer holds one of its nodes or GPUs (the
 * reconciler then rebuilds the replica).
 */
export function placementLaunches(
  state: ControlState,
  placement: StoredPlacement,
  deployment: Deployment,
  modelCommit: string | null = null,
): DesiredLaunch[] | null {
  const byId = new Map<string, ClusterNode>();
  for (const s of placement.shards) {
    const n = state.inventory.peekNode(s.node);
    if (n !== undefined) byId.set(n.id, n);
  }
  try {
    return shardLaunches(placement, deployment, byId, placement.ports, modelCommit);
  } catch {
    return null;
  }
}

/** Desired states by node, with their long-poll waiters. */
export class DesiredStates {
  readonly #state: ControlState;
  readonly #desired = new Map<
    string,
    { key: string; shards: DesiredShard[]; sources: ModelSources[]; models: DesiredModel[] }
  >();
  /** The pinned revisions as last published: a change reaches every node. */
  #pins = "[]";
  /** Each node's model sources as last planned (control/model_sources.ts). */
  #sources = new Map<string, ModelSources[]>();
  /** Each revision's chain order as last planned: kept from pass to pass (models/peer_plan.ts). */
  #peerOrders = new Map<string, string[]>();
  readonly #waiters = new Map<string, Set<() => void>>();
  #closed = false;

  /** Creates the book. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /**
   * Recomputes a node's desired shards; when they changed, bumps its
   * generation, stores it (when `persist`) and wakes its long polls.
   */
  async compute(nodeId: string, persist: boolean): Promise<void> {
    const state = this.#state;
    const shards: DesiredShard[] = [];
    for (const r of state.replicas.values()) {
      if (r.phase !== "placed" || r.placement === null) continue;
      if (!r.placement.shards.some((s) => s.node === nodeId)) continue;
      const d = state.specOf(r);
      if (d === undefined) continue;
      for (const launch of placementLaunches(state, r.placement, d, state.commitOf(r)) ?? []) {
        // Other ranks wait for rank 0's ports: they must meet at its rendezvous.
        if (launch.node.id === nodeId && launchReady(launch)) {
          shards.push({ id: launch.shard_id, engine: r.placement.engine, launch });
        }
      }
    }
    shards.sort((a, b) => compareNatural(a.id, b.id));
    const sources = this.#sources.get(nodeId) ?? [];
    const models = desiredModels(state, nodeId);
    const key = JSON.stringify([shards, sources, models]);
    const previous = this.#desired.get(nodeId);
    this.#desired.set(nodeId, { key, shards, sources, models });
    if (previous === undefined || previous.key === key) return;
    const node = state.nodes.get(nodeId)!;
    node.generation++;
    node.updated_at = state.now();
    // Awaited under the caller's lock: a generation must never go backwards
    // after a restart, or fencing a returning node would fail.
    if (persist) await state.store.putNode(node);
    for (const wake of this.#waiters.get(nodeId) ?? []) wake();
  }

  /**
   * Recomputes the desired state of every node marked dirty, and of every
   * node whose model sources the new peer plan changed (a source died, a
   * host became ready), then clears the marks.
   */
  async publishDirty(): Promise<void> {
    const { byNode: planned, orders } = modelSourcesByNode(
      this.#state,
      this.#placedLaunches(),
      this.#peerOrders,
    );
    this.#peerOrders = orders;
    for (const id of new Set([...planned.keys(), ...this.#sources.keys()])) {
      if (JSON.stringify(planned.get(id)) !== JSON.stringify(this.#sources.get(id))) {
        this.#state.dirty.add(id);
      }
    }
    this.#sources = planned;
    // Every node keeps every pinned revision (control/model_pulls.ts).
    const pins = JSON.stringify(pinnedModels(this.#state));
    if (pins !== this.#pins) {
      for (const id of this.#state.nodes.keys()) {
        this.#state.dirty.add(id);
      }
    }
    this.#pins = pins;
    const ids = [...this.#state.dirty];
    this.#state.dirty.clear();
    for (const id of ids) {
      if (this.#state.nodes.has(id)) await this.compute(id, true);
    }
  }

  /**
   * The node's desired state: at once when its generation differs from
   * `generation`, else when it changes or after `waitMs` (a long poll).
   */
  async wait(
    nodeId: string,
    generation: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<DesiredState> {
    const known = this.#state.nodes.get(nodeId);
    if (known === undefined) {
      throw new NotFoundError(`node ${nodeId} is not registered`, "unknown_node");
    }
    if (known.generation === generation && waitMs > 0 && !signal?.aborted && !this.#closed) {
      await new Promise<void>((resolve) => {
        let set = this.#waiters.get(nodeId);
        if (set === undefined) this.#waiters.set(nodeId, set = new Set());
        const wake = () => {
          clearTimeout(timer);
          set!.delete(wake);
          signal?.removeEventListener("abort", wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        set.add(wake);
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
    const node = this.#state.nodes.get(nodeId);
    if (node === undefined) {
      throw new NotFoundError(`node ${nodeId} is not registered`, "unknown_node");
    }
    const desired = this.#desired.get(nodeId);
    return {
      generation: node.generation,
      shards: structuredClone(desired?.shards ?? []),
      ...(desired === undefined || desired.sources.length === 0
        ? {}
        : { model_sources: structuredClone(desired.sources) }),
      ...(desired === undefined || desired.models.length === 0
        ? {}
        : { models: structuredClone(desired.models) }),
    };
  }

  /** Every placed shard's launch, of every replica. */
  *#placedLaunches() {
    const state = this.#state;
    for (const r of state.replicas.values()) {
      if (r.phase !== "placed" || r.placement === null) continue;
      const d = state.specOf(r);
      if (d !== undefined) yield* placementLaunches(state, r.placement, d, state.commitOf(r)) ?? [];
    }
  }

  /** Forgets a removed node's desired state; its long polls wake (and find it gone). */
  forget(nodeId: string): void {
    this.#desired.delete(nodeId);
    for (const wake of [...(this.#waiters.get(nodeId) ?? [])]) wake();
    this.#waiters.delete(nodeId);
  }

  /** Wakes every long poll and answers later ones at once (on stop). */
  wakeAll(): void {
    this.#closed = true;
    for (const set of this.#waiters.values()) for (const wake of [...set]) wake();
  }
}
