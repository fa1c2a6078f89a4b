/**
 * Where an agent fetches each model revision it needs (issue #25 item 3):
 * the control plane's peer plan (models/peer_plan.ts) for this node, sent in
 * the desired state as `model_sources`. Optional on the wire: an older
 * agent ignores the field (unknown fields are dropped), an agent that gets
 * none fetches from the origin as before.
 *
 * @module
 */
import { z } from "zod";
import type { Assert, Same } from "./same_type.ts";

/** One peer to ask: its node id and its local API URL (where the peer route is). */
export interface ModelPeer {
  /** The peer's node id. */
  node_id: string;
  /** Its local API URL, as it registered it (https: the peer route needs the cluster's TLS). */
  url: string;
}

/** This node's sources of one model revision. */
export interface ModelSources {
  /** The hub id, as the launches name it (`launch.model`). */
  model: string;
  /** The commit it resolved to, when the control plane knows it. */
  commit?: string;
  /** Peers to ask, in order; the first is this node's parent in its chain. */
  peers: ModelPeer[];
  /** Whether to fetch from the origin (the hub or a mirror): first when `peers` is empty, else last. */
  origin: boolean;
}

/** The most model revisions one desired state lists. */
export const MAX_MODEL_SOURCES = 256;

/** The schema of {@link ModelSources}. */
export const ModelSourcesSchema = z.object({
  model: z.string().min(1).max(1024),
  commit: z.string().regex(/^[0-9a-f]{40}$/, "must be a 40-hex commit").optional(),
  peers: z.array(z.object({
    node_id: z.string().min(1).max(256),
    url: z.string().url().max(2048),
  })).max(16),
  origin: z.boolean(),
});

// `deno check` fails here when the interface and the schema drift apart.
type _ModelSourcesMatchesSchema = Assert<
  Same<z.output<typeof ModelSourcesSchema>, ModelSources>
>;
