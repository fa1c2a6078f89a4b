/**
 * The control plane: one state (state.ts) and the services around it —
 * nodes, deployments, the reconciler, desired states, views, API keys, agent
 * logs and events. HTTP lives in api.ts and api/; persistence behind the
 * ControlStore interface.
 *
 * @module
 */
import type { ModelFactsSource } from "../models/facts_source.ts";
import type { CommitSource } from "../models/commit_source.ts";
import { noPorts } from "../engines/port_block.ts";
import { parsePlacementId, parseShardId } from "../protocol/ids.ts";
import { type Leadership, singleLeadership } from "../protocol/leadership.ts";
import { EngineRegistry } from "../engines/registry.ts";
import type { LivenessThresholds } from "../inventory/node_state.ts";
import type { InventoryNode } from "../inventory/store.ts";
import { AgentLogs, type Fetch } from "./agent_logs.ts";
import { AccessTokenService } from "./access_tokens.ts";
import type { ClusterTls } from "./cluster_tls.ts";
import { NodeCertificates } from "./node_certificates.ts";
import { ApiKeyService } from "./api_keys.ts";
import { type Clock, systemClock } from "../time/clock.ts";
import { DeploymentService, type EngineCatalog } from "./deployments.ts";
import { DesiredStates } from "./desired.ts";
import { errorMessage } from "./errors.ts";
import { EventLog } from "./events.ts";
import { recordLastSeen, restoreLastSeen } from "./last_seen.ts";
import { deploymentFacts } from "./model_facts_book.ts";
import { NodeService } from "./nodes.ts";
import { type PlacementCounters, Reconciler } from "./reconciler.ts";
import { ReplicaBook } from "./replicas.ts";
import { ControlState } from "./state.ts";
import { restorePulls } from "./model_pulls.ts";
import type { ControlStore, StoredReplica } from "./store/store.ts";
import { Wake } from "./wake.ts";
import type { EndpointSpec } from "../protocol/gateway_protocol.ts";
import { endpointsSettled, readyEndpoints, type ReplicaView, replicaViews } from "./views.ts";

/** Settings of a control plane. */
export interface ControlPlaneOptions {
  /** Where state lives. */
  store: ControlStore;
  /** Node liveness thresholds. */
  thresholds?: Partial<LivenessThresholds>;
  /** How often the reconciler runs without being asked. Default 1,000 ms. */
  reconcileMs?: number;
  /** The engines deployments may use, and their checks. Default: the built-in engines. */
  engines?: EngineCatalog;
  /** The clock. Default: the system clock. */
  clock?: Clock;
  /** How agents' local APIs are reached. Default: `fetch`. */
  fetch?: Fetch;
  /** The cluster's TLS (the CA, issuing certificates); absent: plain HTTP. */
  tls?: ClusterTls;
  /**
   * A shared store's leadership term (issue #15): every node's generation
   * starts at `epoch × GENERATION_STRIDE` at least, so a desired state handed
   * out in an earlier term never looks newer than one from this term. Absent
   * or 0: a store of its own.
   */
  epoch?: number;
  /**
   * Opens the books to read, not to act: nothing is written (a follower's
   * view of a shared store). A restored placement that no longer fits is
   * left for the leader to rebuild.
   */
  readOnly?: boolean;
  /** Whether the control plane may act now (see {@link ControlState.leading}). */
  leading?: () => boolean;
  /** Who leads, for `GET /v1/leader` (HA control's view); default: this one, alone. */
  leadership?: () => Leadership;
  /** See {@link ControlState.retireGraceMs}. Default 5 s. */
  retireGraceMs?: number;
  /** Where models' facts come from (models/facts_source.ts); default: local and shared paths. */
  modelFacts?: ModelFactsSource;
  /** Where model revisions resolve to commits (models/commit_source.ts); absent: none resolve. */
  commits?: CommitSource;
}

/**
 * Generations per leadership term. A node's desired state changes far
 * fewer than a million times in one term; numbers stay exact past 9 × 10⁹ terms.
 */
export const GENERATION_STRIDE = 1_000_000;

/** The control plane. */
export class ControlPlane {
  /** The books. */
  readonly state: ControlState;
  /** Nodes: registration, heartbeats, operator intent. */
  readonly nodes: NodeService;
  /** Deployments: apply, scale, delete, dry run. */
  readonly deployments: DeploymentService;
  /** Each node's desired state and its long polls. */
  readonly desired: DesiredStates;
  /** The reconcile passes. */
  readonly reconciler: Reconciler;
  /** Gateway API keys. */
  readonly apiKeys: ApiKeyService;
  /** Access tokens: admin, gateway, metrics, join. */
  readonly tokens: AccessTokenService;
  /** Shard logs from agents. */
  readonly agentLogs: AgentLogs;
  /** The cluster's TLS, or null on plain HTTP. */
  readonly tls: ClusterTls | null;
  /** The certificates signed for nodes, watched for missing renewals. */
  readonly nodeCertificates: NodeCertificates;
  /** Events. */
  readonly events: EventLog;
  /** Who leads, for `GET /v1/leader`: a store of its own leads alone; HA control says otherwise. */
  readonly leadership: () => Leadership;
  /** The replica book: every replica transition (control/replicas.ts). */
  readonly book: ReplicaBook;
  /** False for a read-only view (a follower's): it never writes. */
  readonly #writes: boolean;

  private constructor(options: ControlPlaneOptions) {
    this.#writes = options.readOnly !== true;
    // One wake: services kick it through the state, the reconciler answers it.
    const wake = new Wake();
    this.state = new ControlState({
      store: options.store,
      clock: options.clock ?? systemClock,
      thresholds: options.thresholds,
      retireGraceMs: options.retireGraceMs,
      leading: options.leading,
      wake,
      modelFacts: options.modelFacts,
      commits: options.commits,
    });
    this.leadership = options.leadership ??
      (() => singleLeadership("this control plane"));
    this.book = new ReplicaBook(this.state);
    this.desired = new DesiredStates(this.state);
    this.nodes = new NodeService(this.state, this.desired, this.book);
    this.deployments = new DeploymentService(
      this.state,
      this.book,
      options.engines ?? EngineRegistry.builtin(),
    );
    this.reconciler = new Reconciler(
      { state: this.state, book: this.book, desired: this.desired, wake },
      options.reconcileMs ?? 1_000,
    );
    this.apiKeys = new ApiKeyService(this.state);
    this.tokens = new AccessTokenService(this.state);
    this.tls = options.tls ?? null;
    this.nodeCertificates = new NodeCertificates(this.state);
    this.agentLogs = new AgentLogs(this.state, options.fetch);
    this.events = new EventLog(this.state);
  }

  /**
   * Opens a control plane on a store: nodes, deployments and placements come
   * back as they were, so agents that reconnect see the same desired state
   * and no engine restarts.
   */
  static async open(options: ControlPlaneOptions): Promise<ControlPlane> {
    const cp = new ControlPlane(options);
    const state = cp.state;
    const floor = (options.epoch ?? 0) * GENERATION_STRIDE;
    const now = state.now();
    for (const d of await state.store.listDeployments()) state.deployments.set(d.name, d);
    // Memory and heads are checked against facts once learned; a slow hub does not hold up the open.
    state.modelFacts.learnMissing(deploymentFacts(state.deployments.values()), () => state.kick());
    for (const k of await state.store.listApiKeys()) state.apiKeys.set(k.id, k);
    for (const t of await state.store.listTokens()) state.tokens.set(t.id, t);
    for (const n of await state.store.listNodes()) {
      // In memory only: the next change stores floor + 1, and a later term starts higher still.
      n.generation = Math.max(n.generation, floor);
      state.nodes.set(n.id, n);
      state.byTokenHash.set(n.token_hash, n.id);
      // Every known node gets the full unreachable/lost window from now.
      state.inventory.upsertNode(state.registration(n), now);
      // ...but shows when it was really last heard from.
      restoreLastSeen(state, n.id);
      if (n.intent === "cordoned") state.inventory.cordon(n.id);
      if (n.intent === "draining") state.inventory.drain(n.id);
    }
    for (const r of await state.store.listReplicas()) {
      // A failed replica's next placement must not reuse its last shard ids.
      const lastAttempt = parseShardId(r.failure?.shard_id ?? "")?.attempt;
      if (lastAttempt !== undefined) cp.book.restoreAttempt(r.id, lastAttempt);
      if (r.phase === "placed" && r.placement !== null) {
        const attempt = r.placement.attempt ?? parsePlacementId(r.placement.replica_id)?.attempt;
        cp.book.restoreAttempt(r.id, attempt ?? 1);
        for (const s of r.placement.shards) state.awaitingFirstReport.add(s.node);
        restorePorts(r);
      }
      // The node or its GPUs gone: the book rebuilds the replica whole.
      await cp.book.restore(r, options.readOnly === true, errorMessage);
    }
    // Before the desired states: the pulls not done are asked of their nodes again.
    await restorePulls(state);
    for (const n of state.nodes.values()) await cp.desired.compute(n.id, false);
    return cp;
  }

  /**
   * Removes a node that holds no replica and is lost, cordoned or draining
   * (control/node_removal.ts), with everything kept about it.
   */
  async removeNode(nodeId: string): Promise<InventoryNode> {
    const node = await this.nodes.remove(nodeId);
    this.nodeCertificates.forget(nodeId);
    return node;
  }

  /** Starts the reconcile loop. */
  start(): void {
    this.reconciler.start();
  }

  /** Stops the loop and wakes every long poll; resolves once a running pass has finished. */
  async stop(): Promise<void> {
    this.desired.wakeAll();
    await this.reconciler.stop();
    // Every last-seen time newer than the stored one, so a restart shows it exactly.
    if (this.#writes && this.state.leading()) {
      await this.state.locked(() => recordLastSeen(this.state, 0)).catch((e) =>
        this.state.warn("last-seen times not written", errorMessage(e))
      );
    }
    await this.state.flushEvents();
  }

  /** One reconcile pass now. */
  reconcile(): Promise<void> {
    return this.reconciler.reconcile();
  }

  /** Node facts, liveness and allocations. */
  get inventory(): ControlState["inventory"] {
    return this.state.inventory;
  }

  /** Placement outcomes since start. */
  get counters(): PlacementCounters {
    return this.reconciler.counters;
  }

  /** Replicas with their state from the agents' reports. */
  replicas(): ReplicaView[] {
    return replicaViews(this.state);
  }

  /** Rank-0 endpoints of ready replicas: where gateways may send traffic. */
  readyEndpoints(): EndpointSpec[] {
    return readyEndpoints(this.state);
  }

  /** Whether the ready set is known yet after a restart. */
  endpointsSettled(now?: number): boolean {
    return endpointsSettled(this.state, now);
  }
}

/**
 * A placement stored before agents allocated ports has none recorded: its
 * agents report them with their next heartbeat.
 */
function restorePorts(r: StoredReplica): void {
  const placement = r.placement!;
  if (placement.ports === undefined) placement.ports = noPorts();
}
