/**
 * The control plane's core (plan §4, §7, §10, §11): the inventory, the
 * deployments and their replicas, the reconciler that places replicas and
 * publishes each node's desired state, and the agent protocol's server side.
 * HTTP lives in api.ts; persistence behind the ControlStore interface.
 *
 * Every mutation runs under one lock, so the async store writes of one
 * operation never interleave with another's.
 *
 * @module
 */
import { DeploymentError, parseDeployment } from "../deployment/load.ts";
import type { Deployment } from "../deployment/schema.ts";
import { classFacts, type DeploymentIssue } from "../deployment/validate.ts";
import { shardLaunches } from "../engines/launch.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { LivenessThresholds } from "../inventory/node_state.ts";
import {
  checkGpus,
  InventoryStore,
  type NodeRegistration,
  NodeReportError,
} from "../inventory/store.ts";
import { applyPlacement, indexCluster, place } from "../placement/mod.ts";
import type { Explanation, Placed, PlacementResult } from "../placement/types.ts";
import type {
  DesiredShardWire,
  DesiredState,
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
  ShardReport,
} from "../protocol/agent_protocol.ts";
import { ApiError } from "./api_error.ts";
import type {
  ApiKeyRecord,
  ControlStore,
  EventRecord,
  NodeIntent,
  StoredDeployment,
  StoredNode,
  StoredReplica,
} from "./store.ts";
import { hashToken, newToken, tokenMatches } from "./tokens.ts";

/** Settings of a control plane. */
export interface ControlPlaneOptions {
  /** Where state lives (plan §11). */
  store: ControlStore;
  /** Node liveness thresholds (plan §4). */
  thresholds?: Partial<LivenessThresholds>;
  /** How often the reconciler runs without being asked. Default 1,000 ms. */
  reconcileMs?: number;
  /** Engines that exist (for deployment validation). Default: vllm, sglang. */
  knownEngines?: ReadonlySet<string>;
}

/** A shard of a replica as the API shows it. */
export interface ShardView {
  /** Shard id. */
  shard_id: string;
  /** Rank. */
  rank: number;
  /** Node. */
  node: string;
  /** GPUs. */
  gpu_indices: number[];
  /** Port it serves on. */
  port: number;
  /** What its agent last reported; `unknown` before the first report. */
  state: ShardReport["state"] | "unknown";
  /** Loading progress, when reported. */
  progress: ShardReport["progress"];
  /** The last failure, when reported. */
  last_failure: ShardReport["last_failure"];
}

/** A replica as the API shows it. */
export interface ReplicaView {
  /** Replica id. */
  id: string;
  /** Deployment. */
  deployment: string;
  /** pending, starting, loading, ready or failed, from the shards' reports. */
  state: "pending" | "starting" | "loading" | "ready" | "failed";
  /** The profile used, when placed. */
  profile: string | null;
  /** Shards, when placed. */
  shards: ShardView[];
  /** Why it is where it is, or why it is pending (plan §1.2). */
  explanation: Explanation | null;
}

/** An endpoint the gateway may send traffic to: rank 0 of a ready replica (plan §1.1.5). */
export interface ReadyEndpoint {
  /** Served model name. */
  model: string;
  /** Replica id. */
  replica_id: string;
  /** `http://addr:port`. */
  url: string;
}

/** Log lines of a failure kept in its event. */
const FAILURE_TAIL_LINES = 20;

/** An event's text for a shard failure: the reason, then the end of its log. */
export function shardFailureMessage(
  shardId: string,
  node: string,
  f: NonNullable<ShardReport["last_failure"]>,
): string {
  const tail = f.log_tail.slice(-FAILURE_TAIL_LINES).map((l) => l.slice(0, 500));
  return `shard ${shardId} on ${node} failed: ${f.reason}` +
    (tail.length > 0 ? `\nlast ${tail.length} log lines:\n${tail.join("\n")}` : "");
}

/** The control plane. */
export class ControlPlane {
  /** Placement outcomes since start, for /metrics. */
  readonly counters = { placements: 0, unschedulable: 0 };
  readonly inventory: InventoryStore;
  readonly #store: ControlStore;
  readonly #knownEngines: ReadonlySet<string> | undefined;
  readonly #reconcileMs: number;
  #deployments = new Map<string, StoredDeployment>();
  #replicas = new Map<string, StoredReplica>();
  #nodes = new Map<string, StoredNode>();
  readonly #apiKeys = new Map<string, ApiKeyRecord>();
  /** Node credential hash → node id: agents' long polls name no node (protocol). */
  readonly #byTokenHash = new Map<string, string>();
  readonly #reports = new Map<string, Map<string, ShardReport>>();
  readonly #desired = new Map<string, { key: string; shards: DesiredShardWire[] }>();
  readonly #waiters = new Map<string, Set<() => void>>();
  #lock: Promise<unknown> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running = false;
  readonly startedAt = Date.now();
  /** Nodes that held placed shards when the store was opened and have not reported since. */
  readonly #awaitingFirstReport = new Set<string>();

  private constructor(options: ControlPlaneOptions) {
    this.#store = options.store;
    this.#knownEngines = options.knownEngines;
    this.#reconcileMs = options.reconcileMs ?? 1_000;
    this.inventory = new InventoryStore({ thresholds: options.thresholds });
  }

  /**
   * Opens a control plane on a store: nodes, deployments and placements come
   * back as they were, so agents that reconnect see the same desired state
   * and no engine restarts (plan §11).
   */
  static async open(options: ControlPlaneOptions): Promise<ControlPlane> {
    const cp = new ControlPlane(options);
    const now = Date.now();
    for (const d of await cp.#store.listDeployments()) cp.#deployments.set(d.name, d);
    for (const k of await cp.#store.listApiKeys()) cp.#apiKeys.set(k.id, k);
    for (const n of await cp.#store.listNodes()) {
      cp.#nodes.set(n.id, n);
      cp.#byTokenHash.set(n.token_hash, n.id);
      // Every known node gets the full unreachable/lost window from now.
      cp.inventory.upsertNode(cp.#registration(n), now);
      if (n.intent === "cordoned") cp.inventory.cordon(n.id);
      if (n.intent === "draining") cp.inventory.drain(n.id);
    }
    for (const r of await cp.#store.listReplicas()) {
      cp.#replicas.set(r.id, r);
      if (r.phase !== "placed" || r.placement === null) continue;
      cp.#attempts.set(r.id, Number(r.placement.replica_id.split(".").pop()) || 1);
      for (const s of r.placement.shards) cp.#awaitingFirstReport.add(s.node);
      try {
        for (const s of r.placement.shards) {
          cp.inventory.allocate({
            node: s.node,
            replica_id: r.id,
            shard_id: s.shard_id,
            deployment: r.deployment,
            gpu_indices: s.gpu_indices,
          });
        }
      } catch (e) {
        // The node or its GPUs are gone: rebuild the replica whole.
        cp.inventory.releaseReplica(r.id);
        await cp.#rebuild(
          r,
          `restored placement is no longer valid: ${e instanceof Error ? e.message : e}`,
        );
      }
    }
    for (const n of cp.#nodes.values()) cp.#computeDesired(n.id, false);
    return cp;
  }

  /** Starts the reconcile loop. */
  start(): void {
    this.#running = true;
    const loop = async () => {
      if (!this.#running) return;
      await this.reconcile().catch((e) => this.#log("reconcile failed", String(e)));
      if (this.#running) this.#timer = setTimeout(loop, this.#reconcileMs);
    };
    this.#timer = setTimeout(loop, 0);
  }

  /** Stops the loop and wakes every long poll. */
  stop(): void {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    for (const set of this.#waiters.values()) for (const wake of set) wake();
  }

  #log(msg: string, detail: string): void {
    console.error(JSON.stringify({ level: "warn", component: "control", msg, detail }));
  }

  /** Runs `fn` alone: no other mutation interleaves with it. */
  #locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  /** The replica a shard id belongs to, if it is placed now. */
  #replicaOfShard(shardId: string): string | null {
    for (const r of this.#replicas.values()) {
      if (r.placement?.shards.some((s) => s.shard_id === shardId)) return r.id;
    }
    return null;
  }

  async #event(kind: string, subject: string, message: string): Promise<void> {
    await this.#store.addEvent({ at: Date.now(), kind, subject, message });
  }

  #registration(n: StoredNode): NodeRegistration {
    const r = n.registration;
    return {
      id: n.id,
      hostname: r.hostname,
      mgmt_addr: r.mgmt_addr,
      mgmt_interface: r.mgmt_interface,
      ...(r.http_port_base === undefined ? {} : { http_port_base: r.http_port_base }),
      labels: { ...r.labels, ...n.label_overrides },
      fabrics: overrideFabrics(r.fabrics, n.fabric_overrides ?? {}),
      gpus: r.gpus,
      agent_version: r.agent_version,
      engine_versions: r.engine_versions,
    };
  }

  // ---- agent protocol (plan §10) ----

  /**
   * Registers a node. A node id is bound to the credential issued at its
   * first registration: registering it again needs that credential, so one
   * agent cannot take over another's identity, and no registration clears an
   * operator's cordon or drain (plan §1.3).
   */
  register(req: RegisterRequest, nodeToken: string | null): Promise<RegisterResponse> {
    return this.#locked(async () => {
      const existing = this.#nodes.get(req.node_id);
      if (
        existing !== undefined &&
        (nodeToken === null || !(await tokenMatches(nodeToken, existing.token_hash)))
      ) {
        throw new ApiError(
          403,
          "node_taken",
          `node ${req.node_id} is already registered; registering it again needs its node credential`,
        );
      }
      // Refused before anything is written: no half-registered node.
      try {
        checkGpus(req.node_id, req.gpus, "register");
      } catch (e) {
        if (e instanceof NodeReportError) {
          throw new ApiError(400, "invalid_request", e.message, "gpus");
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
        updated_at: Date.now(),
      };
      await this.#store.putNode(node);
      if (existing !== undefined) this.#byTokenHash.delete(existing.token_hash);
      this.#byTokenHash.set(node.token_hash, node.id);
      this.#nodes.set(node.id, node);
      const result = this.inventory.upsertNode(this.#registration(node), Date.now());
      if (result.created) {
        await this.#event(
          "node_registered",
          `node/${node.id}`,
          `registered (${req.gpus.length} GPUs)`,
        );
      } else if (result.transition) {
        await this.#onTransition(result.transition.from, result.transition.to, node.id);
      }
      this.#computeDesired(node.id, true);
      this.#kick();
      return {
        node_id: node.id,
        node_token: token,
        heartbeat_interval_ms: this.inventory.thresholds.heartbeat_interval_ms,
      };
    });
  }

  /**
   * The node a credential belongs to, or null. Looked up by the token's
   * hash: the lookup learns nothing an attacker could use about the secret.
   */
  async nodeForToken(token: string): Promise<string | null> {
    const id = this.#byTokenHash.get(await hashToken(token));
    return id === undefined ? null : id;
  }

  /** True when `token` is the node's credential. */
  async authenticateNode(nodeId: string, token: string): Promise<boolean> {
    const n = this.#nodes.get(nodeId);
    return n !== undefined && await tokenMatches(token, n.token_hash);
  }

  /** Records a heartbeat: liveness, shard states, GPU health. */
  heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    return this.#locked(async () => {
      if (!this.#nodes.has(req.node_id)) {
        throw new ApiError(404, "unknown_node", `node ${req.node_id} is not registered`);
      }
      const update = this.inventory.heartbeat(req.node_id, Date.now(), req.gpus);
      if (update.transition) {
        await this.#onTransition(update.transition.from, update.transition.to, req.node_id);
      }
      this.#awaitingFirstReport.delete(req.node_id);
      const reports = new Map(req.shards.map((s) => [s.id, s]));
      const before = this.#reports.get(req.node_id);
      // Each new failure becomes an event with its log tail, so `llmgw events`
      // says why an engine died or never loaded. One from before this
      // control plane started was recorded by its predecessor.
      for (const s of req.shards) {
        const f = s.last_failure;
        if (f === null || before?.get(s.id)?.last_failure?.at === f.at) continue;
        if (before === undefined && f.at < this.startedAt) continue;
        await this.#event(
          "shard_failed",
          `replica/${this.#replicaOfShard(s.id) ?? s.id}`,
          shardFailureMessage(s.id, req.node_id, f),
        );
      }
      this.#reports.set(req.node_id, reports);
      // A shard that failed for good (multi-node) or reached ready: worth a pass now.
      if (
        req.shards.some((s) =>
          s.state === "failed" || (s.state === "ready" && before?.get(s.id)?.state !== "ready")
        )
      ) {
        this.#kick();
      }
      return { generation: this.#nodes.get(req.node_id)!.generation };
    });
  }

  /**
   * The node's desired state: at once when its generation differs from
   * `generation`, else when it changes or after `waitMs` (long poll: changes
   * reach agents within a second, plan §10).
   */
  async desired(
    nodeId: string,
    generation: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<DesiredState> {
    if (!this.#nodes.has(nodeId)) {
      throw new ApiError(404, "unknown_node", `node ${nodeId} is not registered`);
    }
    if (this.#nodes.get(nodeId)!.generation === generation && waitMs > 0) {
      await new Promise<void>((resolve) => {
        let set = this.#waiters.get(nodeId);
        if (set === undefined) this.#waiters.set(nodeId, set = new Set());
        const wake = () => {
          clearTimeout(timer);
          set!.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        set.add(wake);
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
    const node = this.#nodes.get(nodeId);
    if (node === undefined) {
      throw new ApiError(404, "unknown_node", `node ${nodeId} is not registered`);
    }
    return {
      generation: node.generation,
      shards: structuredClone(this.#desired.get(nodeId)?.shards ?? []),
    };
  }

  // ---- admin (plan §11, §13) ----

  /** Cordons, drains or uncordons a node; the intent is stored (survives restarts). */
  setIntent(nodeId: string, intent: NodeIntent): Promise<void> {
    return this.#locked(async () => {
      const node = this.#nodes.get(nodeId);
      if (node === undefined) throw new ApiError(404, "not_found", `no node ${nodeId}`);
      if (intent === "cordoned") this.inventory.cordon(nodeId);
      else if (intent === "draining") this.inventory.drain(nodeId);
      else this.inventory.uncordon(nodeId);
      node.intent = intent;
      node.updated_at = Date.now();
      await this.#store.putNode(node);
      await this.#event(
        `node_${intent === "none" ? "uncordoned" : intent}`,
        `node/${nodeId}`,
        `operator: ${intent === "none" ? "uncordon" : intent}`,
      );
      this.#kick();
    });
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
    return this.#locked(async () => {
      const node = this.#nodes.get(nodeId);
      if (node === undefined) throw new ApiError(404, "not_found", `no node ${nodeId}`);
      for (const [k, v] of Object.entries(labels)) {
        if (v === null) delete node.label_overrides[k];
        else node.label_overrides[k] = v;
      }
      node.updated_at = Date.now();
      await this.#store.putNode(node);
      const state = this.inventory.getNode(nodeId);
      this.inventory.upsertNode(this.#registration(node), state?.last_seen_ms ?? Date.now());
      await this.#event("node_labels", `node/${nodeId}`, `labels: ${JSON.stringify(labels)}`);
      this.#kick();
      return { ...node.label_overrides };
    });
  }

  /**
   * Replaces a node's fabric overrides: each reported fabric renamed (string)
   * or excluded from placement (null). Fabric names are the operator's
   * (plan §1.3, §5.2); the agent's configuration reports, the operator decides.
   */
  setFabricOverrides(
    nodeId: string,
    overrides: Record<string, string | null>,
  ): Promise<Record<string, string | null>> {
    return this.#locked(async () => {
      const node = this.#nodes.get(nodeId);
      if (node === undefined) throw new ApiError(404, "not_found", `no node ${nodeId}`);
      const result = overrideFabrics(node.registration.fabrics, overrides).map((f) => f.fabric);
      const twice = result.find((f, i) => result.indexOf(f) !== i);
      if (twice !== undefined) {
        throw new ApiError(
          400,
          "invalid_request",
          `two fabrics of node ${nodeId} would both be named ${twice}`,
          "fabric_overrides",
        );
      }
      node.fabric_overrides = { ...overrides };
      node.updated_at = Date.now();
      await this.#store.putNode(node);
      const state = this.inventory.getNode(nodeId);
      this.inventory.upsertNode(this.#registration(node), state?.last_seen_ms ?? Date.now());
      await this.#event(
        "node_fabrics",
        `node/${nodeId}`,
        `fabric overrides: ${JSON.stringify(overrides)}`,
      );
      this.#kick();
      return { ...node.fabric_overrides };
    });
  }

  /**
   * Creates or replaces a deployment from a decoded document (plan §6),
   * validated like a file. Replicas follow on the next reconcile.
   */
  applyDeployment(
    raw: unknown,
  ): Promise<{ deployment: Deployment; warnings: DeploymentIssue[]; created: boolean }> {
    return this.#locked(async () => {
      const loaded = this.#parseDeployment(raw);
      const d = loaded.deployment;
      const clash = [...this.#deployments.values()].find((x) =>
        x.name !== d.name && x.spec.served_model_name === d.served_model_name
      );
      if (clash !== undefined) {
        throw new ApiError(
          409,
          "conflict",
          `served_model_name ${d.served_model_name} is already served by deployment ${clash.name}`,
          "served_model_name",
        );
      }
      const existing = this.#deployments.get(d.name);
      const now = Date.now();
      const stored: StoredDeployment = {
        name: d.name,
        spec: d,
        created_at: existing?.created_at ?? now,
        updated_at: now,
      };
      await this.#store.putDeployment(stored);
      this.#deployments.set(d.name, stored);
      if (existing !== undefined && JSON.stringify(existing.spec) !== JSON.stringify(d)) {
        // Changed profiles or model: replicas are rebuilt on the new spec.
        for (const r of this.#replicas.values()) {
          if (r.deployment === d.name && !sameExceptReplicas(existing.spec, d)) {
            await this.#rebuild(r, "deployment changed");
          }
        }
      }
      await this.#event(
        existing ? "deployment_updated" : "deployment_created",
        `deployment/${d.name}`,
        `${d.replicas} replicas of ${d.model}`,
      );
      this.#kick();
      return { deployment: d, warnings: loaded.warnings, created: existing === undefined };
    });
  }

  /** Changes a deployment's replica count. */
  scale(name: string, replicas: number): Promise<void> {
    return this.#locked(async () => {
      const d = this.#deployments.get(name);
      if (d === undefined) throw new ApiError(404, "not_found", `no deployment ${name}`);
      d.spec.replicas = replicas;
      d.updated_at = Date.now();
      await this.#store.putDeployment(d);
      await this.#event("deployment_scaled", `deployment/${name}`, `${replicas} replicas`);
      this.#kick();
    });
  }

  /** Deletes a deployment; its replicas stop and their GPUs are freed. */
  deleteDeployment(name: string): Promise<void> {
    return this.#locked(async () => {
      if (!this.#deployments.has(name)) {
        throw new ApiError(404, "not_found", `no deployment ${name}`);
      }
      this.#deployments.delete(name);
      await this.#store.deleteDeployment(name);
      await this.#event("deployment_deleted", `deployment/${name}`, "deleted");
      this.#kick();
    });
  }

  /** Deployments, by name. */
  deployments(): StoredDeployment[] {
    return structuredClone([...this.#deployments.values()]);
  }

  /** Replicas with their state from the agents' reports. */
  replicas(): ReplicaView[] {
    return [...this.#replicas.values()].map((r) => this.#view(r));
  }

  /** Recent events. */
  events(q: { after?: number; subject?: string; limit?: number } = {}): Promise<EventRecord[]> {
    return this.#store.listEvents(q);
  }

  /** Validates a deployment document against the live cluster (plan §6.2); 400 with field paths. */
  #parseDeployment(raw: unknown) {
    try {
      return parseDeployment(raw, "request body", {
        knownEngines: this.#knownEngines,
        classes: classFacts(this.inventory.snapshot()),
      });
    } catch (e) {
      if (e instanceof DeploymentError) {
        throw ApiError.fromIssues("Cannot use deployment", e.issues);
      }
      throw e;
    }
  }

  /**
   * A placement dry run against the live inventory (plan §7): where each
   * replica of `raw` would go now, with explanations; nothing changes.
   */
  dryRun(raw: unknown): PlacementResult[] {
    const loaded = this.#parseDeployment(raw);
    const d = loaded.deployment;
    const index = indexCluster(this.inventory.snapshot());
    const out: PlacementResult[] = [];
    for (let i = 0; i < d.replicas; i++) {
      const r = place(index, d, `${d.name}-r${i}`, { detail: true });
      if (r.status === "placed") applyPlacement(index, d.name, r.shards);
      out.push(r);
    }
    return out;
  }

  /**
   * A shard's recent log lines, fetched from its agent's local API (plan §9.4):
   * what `llmgw logs REPLICA` shows.
   */
  async shardLogs(
    replicaId: string,
    rank: number,
    lines: number,
  ): Promise<{ shard_id: string; node: string; state: string; lines: string[] }> {
    const r = this.#replicas.get(replicaId);
    if (r === undefined) throw new ApiError(404, "not_found", `no replica ${replicaId}`);
    const shard = r.placement?.shards.find((s) => s.rank === rank);
    if (shard === undefined) {
      throw new ApiError(
        404,
        "not_found",
        `replica ${replicaId} has no shard of rank ${rank} placed`,
      );
    }
    const reg = this.#nodes.get(shard.node)?.registration;
    if (reg?.agent_url === null || reg?.agent_url === undefined || reg.agent_token === undefined) {
      throw new ApiError(
        502,
        "agent_unavailable",
        `node ${shard.node}'s agent serves no local API the control plane can use`,
      );
    }
    let res: Response;
    try {
      const url = new URL(
        `v1/shards/${encodeURIComponent(shard.shard_id)}/logs?lines=${lines}`,
        reg.agent_url.replace(/\/?$/, "/"),
      );
      res = await fetch(url, {
        headers: { authorization: `Bearer ${reg.agent_token}` },
        signal: AbortSignal.timeout(10_000),
      });
    } catch (e) {
      throw new ApiError(
        502,
        "agent_unreachable",
        `cannot reach node ${shard.node}'s agent: ${e instanceof Error ? e.message : e}`,
      );
    }
    const body = await res.json().catch(() => null) as {
      state?: string;
      lines?: unknown[];
      error?: { message?: string };
    } | null;
    if (!res.ok || body === null || !Array.isArray(body.lines)) {
      throw new ApiError(
        502,
        "agent_error",
        `node ${shard.node}'s agent answered ${res.status}: ${body?.error?.message ?? "no log"}`,
      );
    }
    return {
      shard_id: shard.shard_id,
      node: shard.node,
      state: body.state ?? "unknown",
      lines: body.lines.map(String),
    };
  }

  /**
   * Creates a gateway API key (plan §12) with access to `models` (served
   * names; null for all). The key is returned once; only its hash is stored.
   */
  createApiKey(
    name: string,
    models: string[] | null,
  ): Promise<{ id: string; name: string; key: string; models: string[] | null }> {
    return this.#locked(async () => {
      const key = newToken("sk-llmgw");
      const id = `key-${crypto.randomUUID().slice(0, 8)}`;
      this.#apiKeys.set(id, {
        id,
        name,
        hash: await hashToken(key),
        models,
        created_at: Date.now(),
      });
      await this.#store.putApiKey(this.#apiKeys.get(id)!);
      await this.#event(
        "apikey_created",
        `apikey/${id}`,
        `${name}: ${models === null ? "all models" : models.join(", ")}`,
      );
      return { id, name, key, models };
    });
  }

  /** The API keys, without their hashes. */
  apiKeys(): { id: string; name: string; models: string[] | null; created_at: number }[] {
    return [...this.#apiKeys.values()].map(({ id, name, models, created_at }) => ({
      id,
      name,
      models,
      created_at,
    }));
  }

  /** The API keys with their hashes, for gateways (admin token only). */
  apiKeyHashes(): { id: string; hash: string; models: string[] | null }[] {
    return [...this.#apiKeys.values()].map(({ id, hash, models }) => ({ id, hash, models }));
  }

  /** Deletes an API key. */
  deleteApiKey(id: string): Promise<void> {
    return this.#locked(async () => {
      if (!this.#apiKeys.delete(id)) throw new ApiError(404, "not_found", `no API key ${id}`);
      await this.#store.deleteApiKey(id);
      await this.#event("apikey_deleted", `apikey/${id}`, "deleted");
    });
  }

  /** Rank-0 endpoints of ready replicas: where the gateway may send traffic (plan §12). */
  /**
   * Whether the ready set is known. After a restart, replicas' states come
   * back only with their nodes' first heartbeats; until every node holding a
   * placed shard has reported (or the unreachable threshold has passed), the
   * ready set would look empty and gateways would drop all traffic to
   * engines that never stopped serving (plan §11).
   */
  endpointsSettled(now = Date.now()): boolean {
    return this.#awaitingFirstReport.size === 0 ||
      now - this.startedAt >= this.inventory.thresholds.unreachable_after_ms;
  }

  readyEndpoints(): ReadyEndpoint[] {
    const out: ReadyEndpoint[] = [];
    for (const r of this.#replicas.values()) {
      const view = this.#view(r);
      if (view.state !== "ready" || r.placement === null) continue;
      const leader = view.shards.find((s) => s.rank === 0)!;
      const node = this.#nodes.get(leader.node);
      const d = this.#deployments.get(r.deployment);
      if (node === undefined || d === undefined) continue;
      out.push({
        model: d.spec.served_model_name,
        replica_id: r.id,
        url: `http://${node.registration.mgmt_addr}:${leader.port}`,
      });
    }
    return out;
  }

  #view(r: StoredReplica): ReplicaView {
    const deployment = this.#deployments.get(r.deployment)?.spec;
    const launches = r.placement !== null && deployment !== undefined
      ? this.#launchesOf(r.placement, deployment)
      : null;
    const shards: ShardView[] = (r.placement?.shards ?? []).map((s, i) => {
      const report = this.#reports.get(s.node)?.get(s.shard_id);
      return {
        shard_id: s.shard_id,
        rank: s.rank,
        node: s.node,
        gpu_indices: s.gpu_indices,
        port: launches?.[i]?.port ?? 0,
        state: report?.state ?? "unknown",
        progress: report?.progress ?? null,
        last_failure: report?.last_failure ?? null,
      };
    });
    let state: ReplicaView["state"] = "pending";
    if (r.phase === "placed") {
      const states = shards.map((s) => s.state);
      if (states.length > 0 && states.every((s) => s === "ready")) state = "ready";
      else if (states.some((s) => s === "failed")) state = "failed";
      else if (states.some((s) => s === "loading")) state = "loading";
      else state = "starting";
    }
    return {
      id: r.id,
      deployment: r.deployment,
      state,
      profile: r.placement?.profile ?? null,
      shards,
      explanation: r.explanation,
    };
  }

  // ---- the reconciler (plan §11) ----

  #kickTimer: ReturnType<typeof setTimeout> | null = null;

  /** Asks for a reconcile soon (debounced): changes reach agents within a second. */
  #kick(): void {
    if (!this.#running || this.#kickTimer !== null) return;
    this.#kickTimer = setTimeout(() => {
      this.#kickTimer = null;
      this.reconcile().catch((e) => this.#log("reconcile failed", String(e)));
    }, 20);
  }

  async #onTransition(from: string, to: string, nodeId: string): Promise<void> {
    await this.#event(`node_${to}`, `node/${nodeId}`, `${from} → ${to}`);
  }

  async #rebuild(r: StoredReplica, reason: string): Promise<void> {
    for (const s of r.placement?.shards ?? []) this.#dirty.add(s.node);
    this.inventory.releaseReplica(r.id);
    r.phase = "pending";
    r.placement = null;
    r.updated_at = Date.now();
    await this.#store.putReplica(r);
    await this.#event("replica_rebuilding", `replica/${r.id}`, reason);
  }

  /** One pass: liveness, failures, replica counts, placements, desired states. */
  reconcile(): Promise<void> {
    return this.#locked(async () => {
      const now = Date.now();
      for (const t of this.inventory.refresh(now)) await this.#onTransition(t.from, t.to, t.node);
      const dirty = this.#dirty;
      const touch = (r: StoredReplica) => {
        for (const s of r.placement?.shards ?? []) dirty.add(s.node);
      };
      // Replicas that must be rebuilt whole (plan §5.4): a shard on a lost or
      // draining node, or a shard reported failed for good.
      for (const r of [...this.#replicas.values()]) {
        if (r.phase !== "placed" || r.placement === null) continue;
        for (const s of r.placement.shards) {
          const state = this.inventory.stateOf(s.node);
          const report = this.#reports.get(s.node)?.get(s.shard_id);
          if (state === undefined || state === "lost") {
            await this.#rebuild(r, `node ${s.node} is ${state ?? "gone"}`);
            break;
          }
          if (state === "draining") {
            await this.#rebuild(r, `node ${s.node} is draining`);
            break;
          }
          if (report?.state === "failed") {
            await this.#rebuild(
              r,
              `shard ${s.shard_id} failed: ${report.last_failure?.reason ?? "unknown"}`,
            );
            break;
          }
        }
      }
      // Replica counts follow the deployments.
      for (const r of [...this.#replicas.values()]) {
        const d = this.#deployments.get(r.deployment);
        if (d === undefined || r.index >= d.spec.replicas) {
          touch(r);
          this.inventory.releaseReplica(r.id);
          this.#replicas.delete(r.id);
          await this.#store.deleteReplica(r.id);
          await this.#event(
            "replica_removed",
            `replica/${r.id}`,
            d === undefined ? "deployment deleted" : "scaled down",
          );
        }
      }
      for (const d of this.#deployments.values()) {
        for (let i = 0; i < d.spec.replicas; i++) {
          const id = `${d.name}-r${i}`;
          if (this.#replicas.has(id)) continue;
          const r: StoredReplica = {
            id,
            deployment: d.name,
            index: i,
            phase: "pending",
            placement: null,
            explanation: null,
            created_at: now,
            updated_at: now,
          };
          this.#replicas.set(id, r);
          await this.#store.putReplica(r);
        }
      }
      // Pending replicas are placed on the live inventory, one after another.
      const pending = [...this.#replicas.values()].filter((r) => r.phase === "pending");
      if (pending.length > 0) {
        const index = indexCluster(this.inventory.snapshot());
        for (const r of pending) {
          const d = this.#deployments.get(r.deployment)!.spec;
          const attempt = (this.#attempts.get(r.id) ?? 0) + 1;
          const result = place(index, d, `${r.id}.${attempt}`);
          if (result.status === "placed") {
            applyPlacement(index, d.name, result.shards);
            for (const s of result.shards) {
              this.inventory.allocate({
                node: s.node,
                replica_id: r.id,
                shard_id: s.shard_id,
                deployment: d.name,
                gpu_indices: s.gpu_indices,
              });
            }
            this.#attempts.set(r.id, attempt);
            r.phase = "placed";
            r.placement = result;
            touch(r);
            r.explanation = result.explanation;
            r.updated_at = now;
            await this.#store.putReplica(r);
            this.counters.placements++;
            await this.#event("replica_placed", `replica/${r.id}`, result.explanation.summary);
          } else if (r.explanation?.summary !== result.explanation.summary) {
            r.explanation = result.explanation;
            r.updated_at = now;
            await this.#store.putReplica(r);
            this.counters.unschedulable++;
            await this.#event(
              "replica_unschedulable",
              `replica/${r.id}`,
              result.explanation.summary,
            );
          }
        }
      }
      // A draining node whose replicas have all moved off is drained: say so once.
      for (const n of this.#nodes.values()) {
        if (n.intent !== "draining") {
          this.#drained.delete(n.id);
          continue;
        }
        const held = this.inventory.getNode(n.id)?.allocations.length ?? 0;
        if (held === 0 && !this.#drained.has(n.id)) {
          this.#drained.add(n.id);
          await this.#event(
            "node_drained",
            `node/${n.id}`,
            "all replicas moved off; the node can be serviced",
          );
        }
      }
      // Only nodes whose shards changed get a new desired state.
      for (const id of dirty) if (this.#nodes.has(id)) this.#computeDesired(id, true);
      dirty.clear();
    });
  }

  readonly #attempts = new Map<string, number>();
  /** Draining nodes already announced as drained. */
  readonly #drained = new Set<string>();
  /** Nodes whose desired state may have changed since the last pass. */
  readonly #dirty = new Set<string>();

  #launchesOf(placed: Placed, d: Deployment) {
    const byId = new Map<string, ClusterNode>();
    for (const s of placed.shards) {
      const n = this.inventory.peekNode(s.node);
      if (n !== undefined) byId.set(n.id, n);
    }
    try {
      return shardLaunches(placed, d, byId);
    } catch {
      return null;
    }
  }

  /** Recomputes a node's desired shards; bumps and stores its generation when they changed. */
  #computeDesired(nodeId: string, persist: boolean): void {
    const shards: DesiredShardWire[] = [];
    for (const r of this.#replicas.values()) {
      if (r.phase !== "placed" || r.placement === null) continue;
      if (!r.placement.shards.some((s) => s.node === nodeId)) continue;
      const d = this.#deployments.get(r.deployment)?.spec;
      if (d === undefined) continue;
      const launches = this.#launchesOf(r.placement, d) ?? [];
      for (const launch of launches) {
        if (launch.node.id === nodeId) {
          shards.push({ id: launch.shard_id, engine: r.placement.engine, launch });
        }
      }
    }
    shards.sort((a, b) => a.id.localeCompare(b.id));
    const key = JSON.stringify(shards);
    const previous = this.#desired.get(nodeId);
    this.#desired.set(nodeId, { key, shards });
    if (previous === undefined || previous.key === key) return;
    const node = this.#nodes.get(nodeId)!;
    node.generation++;
    node.updated_at = Date.now();
    if (persist) this.#store.putNode(node).catch((e) => this.#log("store write failed", String(e)));
    for (const wake of this.#waiters.get(nodeId) ?? []) wake();
  }
}

/** True when two versions of a deployment differ only in their replica count. */
function sameExceptReplicas(a: Deployment, b: Deployment): boolean {
  return JSON.stringify({ ...a, replicas: 0 }) === JSON.stringify({ ...b, replicas: 0 });
}

/** A node's reported fabrics with the operator's overrides applied (renamed, or dropped for null). */
export function overrideFabrics<F extends { fabric: string }>(
  fabrics: readonly F[],
  overrides: Record<string, string | null>,
): F[] {
  const out: F[] = [];
  for (const f of fabrics) {
    const o = Object.hasOwn(overrides, f.fabric) ? overrides[f.fabric] : f.fabric;
    if (o !== null) out.push({ ...f, fabric: o });
  }
  return out;
}
