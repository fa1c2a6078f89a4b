/**
 * The sources the control plane assigned this agent (the desired state's
 * `model_sources`, issue #25 item 3) as the model cache's ByteSources: for a
 * model revision, its peers in the order given, then the origin when the
 * assignment says so; the origin alone when nothing is assigned (a revision
 * no other host needs, an older control plane). Peers are asked with this
 * agent's node certificate ({@link nodeCertificateFetch}). The model cache
 * asks for the sources again before every chunk (model_cache/live_sources.ts),
 * so a re-plan reaches a download under way.
 *
 * @module
 */
import type { ByteSource } from "../models/byte_source.ts";
import { PeerByteSource, type PeerByteSourceOptions } from "../models/peer_byte_source.ts";
import type { ModelSources } from "../protocol/model_sources.ts";
import { RenewableFetch } from "../tls/trust.ts";
import type { AgentTls } from "./agent_tls.ts";

/** A fetch for the peer route: trusts the cluster CA, presents the node's certificate. */
export type PeerFetch = PeerByteSourceOptions["fetch"];

/**
 * A fetch presenting the agent's node certificate (and the new one after
 * each renewal) and trusting only the cluster CA.
 */
export function nodeCertificateFetch(tls: AgentTls): { fetch: PeerFetch; close(): void } {
  const client = new RenewableFetch(tls.caPem, tls.serving);
  tls.onCertificate((c) => client.update(tls.caPem, c));
  return { fetch: client.fetch, close: () => client.close() };
}

/** The assignment last received, as sources. */
export class AssignedSources {
  readonly #fetch: PeerFetch;
  readonly #maxWaitMs?: number;
  #assigned: readonly ModelSources[] = [];
  readonly #peers = new Map<string, PeerByteSource>();

  /** Sources asking peers through `fetch`. */
  constructor(fetch: PeerFetch, maxWaitMs?: number) {
    this.#fetch = fetch;
    this.#maxWaitMs = maxWaitMs;
  }

  /** Takes a desired state's `model_sources` (absent: none). */
  update(assigned: readonly ModelSources[] | undefined): void {
    this.#assigned = assigned ?? [];
    const used = new Set(
      this.#assigned.flatMap((a) => a.peers.map((p) => `${p.node_id} ${p.url}`)),
    );
    for (const key of this.#peers.keys()) if (!used.has(key)) this.#peers.delete(key);
  }

  /** The sources of `model` at `commit`, in order, `origin` among them as assigned. */
  sourcesFor(model: string, commit: string, origin: ByteSource): ByteSource[] {
    const a = this.#assigned.find((s) =>
      s.model === model && (s.commit === undefined || s.commit === commit)
    );
    if (a === undefined || a.peers.length === 0) return [origin];
    const peers = a.peers.map((p) => {
      const key = `${p.node_id} ${p.url}`;
      let source = this.#peers.get(key);
      if (source === undefined) {
        source = new PeerByteSource({
          nodeId: p.node_id,
          url: p.url,
          fetch: this.#fetch,
          maxWaitMs: this.#maxWaitMs,
        });
        this.#peers.set(key, source);
      }
      return source;
    });
    return a.origin ? [...peers, origin] : peers;
  }
}
