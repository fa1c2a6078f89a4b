/**
 * An in-memory {@link ControlStore}, for tests and `llmgw plan`-like tools:
 * the same contract as the SQL stores (tests/store_contract.ts), nothing on disk.
 *
 * @module
 */
import {
  type AccessTokenRecord,
  type ApiKeyRecord,
  type ControlStore,
  type EventQuery,
  type EventRecord,
  MAX_EVENTS,
  type NodeSeen,
  type StoredDeployment,
  type StoredNode,
  type StoredReplica,
  withReplicaRevision,
  withRevisionFields,
  withUid,
} from "./store.ts";
import { byKey } from "./tables.ts";
import type { ModelPull } from "../model_pull_record.ts";

/** The in-memory store. */
export class MemoryStore implements ControlStore {
  readonly #deployments = new Map<string, StoredDeployment>();
  readonly #replicas = new Map<string, StoredReplica>();
  readonly #nodes = new Map<string, StoredNode>();
  readonly #keys = new Map<string, ApiKeyRecord>();
  readonly #tokens = new Map<string, AccessTokenRecord>();
  readonly #pulls = new Map<string, ModelPull>();
  #events: EventRecord[] = [];
  #nextEvent = 1;

  /** Every deployment. */
  listDeployments(): Promise<StoredDeployment[]> {
    return Promise.resolve(
      structuredClone(
        [...this.#deployments.values()].sort(byKey((d) => d.name)).map(withRevisionFields)
          .map(withUid),
      ),
    );
  }
  /** Creates or replaces a deployment. */
  putDeployment(d: StoredDeployment): Promise<void> {
    this.#deployments.set(d.name, structuredClone(d));
    return Promise.resolve();
  }
  /** Deletes a deployment. */
  deleteDeployment(name: string): Promise<boolean> {
    return Promise.resolve(this.#deployments.delete(name));
  }
  /** Every replica. */
  listReplicas(): Promise<StoredReplica[]> {
    return Promise.resolve(
      structuredClone(
        [...this.#replicas.values()].sort(byKey((r) => r.id)).map(withReplicaRevision).map(
          withUid,
        ),
      ),
    );
  }
  /** Creates or replaces a replica. */
  putReplica(r: StoredReplica): Promise<void> {
    this.#replicas.set(r.id, structuredClone(r));
    return Promise.resolve();
  }
  /** Deletes a replica. */
  deleteReplica(id: string): Promise<boolean> {
    return Promise.resolve(this.#replicas.delete(id));
  }
  /** Every node. */
  listNodes(): Promise<StoredNode[]> {
    // As the SQL stores read it: a node never seen since the column came reads null.
    const nodes = [...this.#nodes.values()].map((n) => ({
      ...n,
      last_seen_at: n.last_seen_at ?? null,
    }));
    return Promise.resolve(structuredClone(nodes.sort(byKey((n) => n.id))));
  }
  /** Creates or replaces a node. */
  putNode(n: StoredNode): Promise<void> {
    this.#nodes.set(n.id, structuredClone(n));
    return Promise.resolve();
  }
  /** Deletes a node. */
  deleteNode(id: string): Promise<boolean> {
    return Promise.resolve(this.#nodes.delete(id));
  }
  /** Sets nodes' last-seen times; unknown ids are skipped. */
  recordNodesSeen(seen: readonly NodeSeen[]): Promise<void> {
    for (const { id, last_seen_at } of seen) {
      const n = this.#nodes.get(id);
      if (n !== undefined) n.last_seen_at = last_seen_at;
    }
    return Promise.resolve();
  }
  /** Appends an event. */
  addEvent(e: Omit<EventRecord, "id">): Promise<EventRecord> {
    const event = { id: this.#nextEvent++, ...structuredClone(e) };
    this.#events.push(event);
    if (this.#events.length > MAX_EVENTS) this.#events = this.#events.slice(-MAX_EVENTS);
    return Promise.resolve(structuredClone(event));
  }
  /** Events, oldest first. */
  listEvents(q: EventQuery = {}): Promise<EventRecord[]> {
    const matching = this.#events.filter((e) =>
      (q.after === undefined || e.id > q.after) &&
      (q.subject === undefined || e.subject === q.subject) &&
      (q.uid === undefined || e.uid === q.uid)
    );
    const limit = q.limit ?? 100;
    return Promise.resolve(structuredClone(limit <= 0 ? [] : matching.slice(-limit)));
  }
  /** Every API key. */
  listApiKeys(): Promise<ApiKeyRecord[]> {
    return Promise.resolve(structuredClone([...this.#keys.values()].sort(byKey((k) => k.id))));
  }
  /** Creates or replaces an API key. */
  putApiKey(k: ApiKeyRecord): Promise<void> {
    this.#keys.set(k.id, structuredClone(k));
    return Promise.resolve();
  }
  /** Deletes an API key. */
  deleteApiKey(id: string): Promise<boolean> {
    return Promise.resolve(this.#keys.delete(id));
  }
  /** Every access token. */
  listTokens(): Promise<AccessTokenRecord[]> {
    return Promise.resolve(structuredClone([...this.#tokens.values()].sort(byKey((t) => t.id))));
  }
  /** Creates or replaces an access token. */
  putToken(t: AccessTokenRecord): Promise<void> {
    this.#tokens.set(t.id, structuredClone(t));
    return Promise.resolve();
  }
  /** Deletes an access token. */
  deleteToken(id: string): Promise<boolean> {
    return Promise.resolve(this.#tokens.delete(id));
  }
  /** Every model pull. */
  listModelPulls(): Promise<ModelPull[]> {
    // As the SQL stores read it: a record without `finished_at` reads null.
    const pulls = [...this.#pulls.values()].map((p) => ({
      ...p,
      finished_at: p.finished_at ?? null,
    }));
    return Promise.resolve(structuredClone(pulls.sort(byKey((p) => p.id))));
  }
  /** Creates or replaces a model pull. */
  putModelPull(p: ModelPull): Promise<void> {
    this.#pulls.set(p.id, structuredClone(p));
    return Promise.resolve();
  }
  /** Deletes a model pull. */
  deleteModelPull(id: string): Promise<boolean> {
    return Promise.resolve(this.#pulls.delete(id));
  }
  /** Nothing to release. */
  close(): void {}
}
