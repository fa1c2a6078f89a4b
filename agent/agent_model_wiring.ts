/**
 * An agent's model side, wired to the rest of it (issue #25): the model cache
 * with its fetcher, pulls and heartbeat report (agent/agent_models.ts); the
 * peers the control plane assigns, asked with the node certificate
 * (agent/assigned_sources.ts, TLS only: without it the hub alone); and the
 * peer server through which the local API lends this host's cached bytes to
 * the cluster's other agents (agent/peer_server.ts), the chunks it is
 * writing streamed as they land (one WrittenChunks shared by both). An agent without
 * `--model-cache` has none of it.
 *
 * @module
 */
import type { DesiredState } from "../protocol/agent_protocol.ts";
import type { Logger } from "../log/log.ts";
import type { AgentTls } from "./agent_tls.ts";
import { type AgentModelOptions, type AgentModels, agentModels } from "./agent_models.ts";
import { AssignedSources, nodeCertificateFetch } from "./assigned_sources.ts";
import { CacheLayout } from "./model_cache/cache_layout.ts";
import { PeerServer } from "./peer_server.ts";
import { WrittenChunks } from "./model_cache/written_chunks.ts";

/** What {@link AgentModelWiring} is built from. */
export interface AgentModelWiringOptions {
  /** The agent's `models` option; undefined: no model cache, no peers. */
  models: AgentModelOptions | undefined;
  /** The agent's TLS; null (plain HTTP): no peers are asked. */
  tls: AgentTls | null;
  /** Where the cache's events go. */
  log: Logger;
  /** The agent's version, in the hub client's `User-Agent`. */
  version: string;
  /** The desired state last received: its `model_sources` name the peers. */
  received: () => DesiredState | null;
  /** The desired state the agent runs: what the cache must keep. */
  applied: () => DesiredState | null;
}

/** The model cache, the peer client and the peer server of an agent. */
export class AgentModelWiring {
  /** The model cache and its fetcher, pulls and report; null without `--model-cache`. */
  readonly models: AgentModels | null;
  /** The peer route the local API serves; undefined without a model cache. */
  readonly peer: PeerServer | undefined;
  readonly #peerFetch: ReturnType<typeof nodeCertificateFetch> | null;

  /** Builds the parts; nothing runs or listens until the agent starts them. */
  constructor(o: AgentModelWiringOptions) {
    const m = o.models;
    this.#peerFetch = m === undefined || o.tls === null ? null : nodeCertificateFetch(o.tls);
    const assigned = this.#peerFetch && new AssignedSources(this.#peerFetch.fetch);
    // One view shared by the cache that writes chunks and the server that streams them.
    const written = new WrittenChunks();
    this.models = m === undefined ? null : agentModels(
      assigned === null ? { ...m, written } : {
        ...m,
        written,
        sources: (model, commit, hub) => {
          // The state being reconciled: its shards' fetches start during the reconcile.
          // Asked again for every chunk, so a new plan reaches a download under way.
          assigned.update(o.received()?.model_sources);
          return assigned.sourcesFor(model, commit, hub);
        },
      },
      o.log,
      o.version,
      o.applied,
    );
    this.peer = m === undefined
      ? undefined
      : new PeerServer({ layout: new CacheLayout(m.cache.root), written });
  }

  /**
   * A desired state was applied: its pulls are asked for, and the fetcher
   * forgets the downloads of shards it no longer lists.
   */
  applied(state: DesiredState): void {
    this.models?.puller.sync(state.models ?? []);
    this.models?.fetcher.retain(state.shards.map((s) => s.id));
  }

  /** Stops the pulls and releases the peer client's TLS material. */
  close(): void {
    this.#peerFetch?.close();
    this.models?.puller.stop();
  }
}
