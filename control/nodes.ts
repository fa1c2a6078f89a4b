/**
 * Nodes: registration and credentials, heartbeats and shard reports, and the
 * operator's intent, labels and fabric overrides. Node facts live in one
 * book, the inventory; the stored record adds what the operator decided.
 *
 * @module
 */
import { recordModelCache } from "./model_caches.ts";
import { recordEngineCacheEvictions } from "./engine_cache_events.ts";
import { checkGpus, type InventoryNode, NodeReportError } from "../inventory/store.ts";
import type {
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
} from "../protocol/agent_protocol.ts";
import type { DesiredStates } from "./desired.ts";
import { ForbiddenError, InvalidInputError, NotFoundError } from "./errors.ts";
import { removeNode } from "./node_removal.ts";
import { learnPorts } from "./ports.ts";
import { replicaOfShard } from "../protocol/ids.ts";
import type { ReplicaBook } from "./replicas.ts";
import { shardEvents } from "./shard_events.ts";
import { type ControlState, overrideFabrics } from "./state.ts";
import type { NodeIntent, StoredNode } from "./store/store.ts";
import { hashToken, newToken, tokenMatches } from "../http/tokens.ts";

/** The verbs of an operator's intent, for events. */
const INTENT_EVENT: Record<NodeIntent, { kind: string; verb: string }> = {
  none: { kind: "node_uncordoned", verb: "uncordon" },
  cordoned: { kind: "node_cordoned", verb: "cordoned" },
  draining: { kind: "node_draining", verb: "draining" },
};

/** The node service. */
export class NodeService {
  readonly #state: ControlState;
  readonly #desired: DesiredStates;
  readonly #book: ReplicaBook;

  /** Creates the service; ports learned from heartbeats are stored through `book`. */
  constructor(state: ControlState, desired: DesiredStates, book: ReplicaBook) {
    this.#state = state;
    this.#desired = desired;
    this.#book = book;
  }

  /** Every node with its state and allocations. */
  list(): InventoryNode[] {
    return this.#state.inventory.listNodes();
  }

  /** One node. */
  get(id: string): InventoryNode {
    const node = this.#state.inventory.getNode(id);
    if (node === undefined) throw new NotFoundError(`no node ${id}`);
    return node;
  }

  /**
   * Registers a node. A node id is bound to the credential issued at its
   * first registration: registering it again needs that credential, so one
   * agent cannot take over another's identity, and no registration clears an
   * operator's cordon or drain.
   */
  register(req: RegisterRequest, nodeToken: string | null): Promise<RegisterResponse> {
    const state = this.#state;
    return state.locked(async () => {
      const existing = state.nodes.get(req.node_id);
      if (
        existing !== undefined &&
        (nodeToken === null || !(await tokenMatches(nodeToken, existing.token_hash)))
      ) {
        throw new ForbiddenError(
          "node_taken",
          `node ${req.node_id} is already registered; registering it again needs its node credential`,
        );
      }
      // Refused before anything is written: no half-registered node.
      try {
        checkGpus(req.node_id, req.gpus, "register");
      } catch (e) {
        if (e instanceof NodeReportError) {
          throw new InvalidInputError("Cannot register", [{ path: ["gpus"], message: e.message }]);
        }
        throw e;
      }
      const token = newToken("llmgw_node");
      const node: StoredNode = {
        id: req.node_id,
        registration: req,
        token_hash: await hashToken(token),
        intent: existing?.intent ?? "none",
        label_overrides: existing?.label_overrides ?? {},
        fabric_overrides: existing?.fabric_overrides ?? {},
        generation: existing?.generation ?? 0,
        updated_at: state.now(),
        last_seen_at: state.now(),
      };
      await state.store.putNode(node);
      if (existing !== undefined) state.byTokenHash.delete(existing.token_hash);
      state.byTokenHash.set(node.token_hash, node.id);
      state.nodes.set(node.id, node);
      const result = state.inventory.upsertNode(state.registration(node), state.now());
      if (result.created) {
        await state.event(
          "node_registered",
          `node/${node.id}`,
          `registered (${req.gpus.length} GPUs)`,
        );
      } else if (result.transition) {
        await transitionEvent(state, result.transition.from, result.transition.to, node.id);
      }
      await this.#desired.compute(node.id, true);
      state.kick();
      return {
        node_id: node.id,
        node_token: token,
        heartbeat_interval_ms: state.inventory.thresholds.heartbeat_interval_ms,
      };
    });
  }

  /**
   * The node a credential belongs to, or null. Looked up by the token's
   * hash: the lookup learns nothing an attacker could use about the secret.
   */
  async nodeForToken(token: string): Promise<string | null> {
    return this.nodeForDigest(await hashToken(token));
  }

  /** The node whose credential has this SHA-256 (hex), or null: for callers that hashed already. */
  nodeForDigest(digest: string): string | null {
    return this.#state.byTokenHash.get(digest) ?? null;
  }

  /** True when `token` is the node's credential. */
  async authenticate(nodeId: string, token: string): Promise<boolean> {
    const n = this.#state.nodes.get(nodeId);
    return n !== undefined && await tokenMatches(token, n.token_hash);
  }

  /** Records a heartbeat: liveness, shard states, GPU health. */
  heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const state = this.#state;
    return state.locked(async () => {
      const node = state.nodes.get(req.node_id);
      if (node === undefined) {
        throw new NotFoundError(`node ${req.node_id} is not registered`, "unknown_node");
      }
      const update = state.inventory.heartbeat(req.node_id, state.now(), req.gpus);
      if (update.transition) {
        await transitionEvent(state, update.transition.from, update.transition.to, req.node_id);
      }
      state.awaitingFirstReport.delete(req.node_id);
      const before = state.reports.get(req.node_id);
      // Each new failure becomes an event with its log tail, so `llmgw events`
      // says why an engine died or never loaded, and each return to ready one
      // that closes it (shard_events.ts).
      for (const e of shardEvents(req.node_id, before, req.shards, state.startedAt)) {
        await state.event(e.kind, `replica/${replicaOfShard(e.shard)}`, e.message);
      }
      state.reports.set(req.node_id, new Map(req.shards.map((s) => [s.id, s])));
      if (req.model_cache !== undefined) {
        await recordModelCache(state, req.node_id, req.model_cache);
        await recordEngineCacheEvictions(state, req.node_id, req.model_cache);
      }
      // The ports the agent allocated; other ranks learn rank 0's at once.
      const learned = learnPorts(state, req.shards);
      for (const r of learned) await this.#book.savePorts(r);
      if (learned.length > 0) await this.#desired.publishDirty();
      // A shard that failed for good (multi-node) or reached ready: worth a pass now.
      if (
        req.shards.some((s) =>
          s.state === "failed" || (s.state === "ready" && before?.get(s.id)?.state !== "ready")
        )
      ) {
        state.kick();
      }
      return { generation: node.generation };
    });
  }

  /** Cordons, drains or uncordons a node; the intent is stored (survives restarts). */
  setIntent(nodeId: string, intent: NodeIntent): Promise<InventoryNode> {
    const state = this.#state;
    return state.locked(async () => {
      const node = this.#stored(nodeId);
      if (intent === "cordoned") state.inventory.cordon(nodeId);
      else if (intent === "draining") state.inventory.drain(nodeId);
      else state.inventory.uncordon(nodeId);
      node.intent = intent;
      node.updated_at = state.now();
      await state.store.putNode(node);
      const { kind, verb } = INTENT_EVENT[intent];
      await state.event(kind, `node/${nodeId}`, `operator: ${verb}`);
      state.kick();
      return this.get(nodeId);
    });
  }

  /**
   * Removes a node that holds no replica and is lost, cordoned or draining
   * (control/node_removal.ts); its desired state goes with it.
   */
  async remove(nodeId: string): Promise<InventoryNode> {
    const node = await removeNode(this.#state, nodeId);
    this.#desired.forget(nodeId);
    return node;
  }

  /**
   * Sets (string) or removes (null) operator label overrides on a node. They
   * apply over the agent's own labels, survive re-registration and restarts,
   * and node selectors see them at the next placement.
   */
  setLabels(
    nodeId: string,
    labels: Record<string, string | null>,
  ): Promise<Record<string, string>> {
    const state = this.#state;
    return state.locked(async () => {
      const node = this.#stored(nodeId);
      for (const [k, v] of Object.entries(labels)) {
        if (v === null) delete node.label_overrides[k];
        else node.label_overrides[k] = v;
      }
      await this.#saveFacts(node);
      await state.event("node_labels", `node/${nodeId}`, `labels: ${JSON.stringify(labels)}`);
      return { ...node.label_overrides };
    });
  }

  /**
   * Replaces a node's fabric overrides: each reported fabric renamed (string)
   * or excluded from placement (null). Fabric names are the operator's; the
   * agent's configuration reports, the operator decides.
   */
  setFabricOverrides(
    nodeId: string,
    overrides: Record<string, string | null>,
  ): Promise<Record<string, string | null>> {
    const state = this.#state;
    return state.locked(async () => {
      const node = this.#stored(nodeId);
      const result = overrideFabrics(node.registration.fabrics, overrides).map((f) => f.fabric);
      const twice = result.find((f, i) => result.indexOf(f) !== i);
      if (twice !== undefined) {
        throw new InvalidInputError("Cannot set fabric overrides", [{
          path: ["fabric_overrides"],
          message: `two fabrics of node ${nodeId} would both be named ${twice}`,
        }]);
      }
      node.fabric_overrides = { ...overrides };
      await this.#saveFacts(node);
      await state.event(
        "node_fabrics",
        `node/${nodeId}`,
        `fabric overrides: ${JSON.stringify(overrides)}`,
      );
      return { ...node.fabric_overrides };
    });
  }

  #stored(nodeId: string): StoredNode {
    const node = this.#state.nodes.get(nodeId);
    if (node === undefined) throw new NotFoundError(`no node ${nodeId}`);
    return node;
  }

  /** Stores an operator change to a node's facts and puts it in the inventory at once. */
  async #saveFacts(node: StoredNode): Promise<void> {
    const state = this.#state;
    node.updated_at = state.now();
    await state.store.putNode(node);
    const seen = state.inventory.getNode(node.id)?.last_seen_ms ?? state.now();
    state.inventory.upsertNode(state.registration(node), seen);
    state.kick();
  }
}

/** The event of a node's liveness transition. */
export async function transitionEvent(
  state: ControlState,
  from: string,
  to: string,
  nodeId: string,
): Promise<void> {
  await state.event(`node_${to}`, `node/${nodeId}`, `${from} → ${to}`);
}
