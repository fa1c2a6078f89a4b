/**
 * Model revisions a node's desired state names apart from its shards
 * (issue #25 item 5), sent as the optional `models` of the desired state:
 *
 * - `pinned`: a deployment with `pinned: true` uses it, so the agent never
 *   evicts it from its cache, on any node;
 * - `pull`: `llmgw models pull` or a rollout's pre-pull asks this node to
 *   fetch it into its cache now, holding no GPU.
 *
 * An older agent drops the field (unknown fields are ignored); an older
 * control plane sends none.
 *
 * @module
 */
import { z } from "zod";
import { COMMIT_PATTERN } from "../models/hub_protocol.ts";
import type { Assert, Same } from "./same_type.ts";

/** One model revision the node should keep or fetch. */
export interface DesiredModel {
  /** The hub id. */
  model: string;
  /** The commit (40 hex) its revision resolved to. */
  commit: string;
  /** Keep it from eviction. */
  pinned: boolean;
  /** Fetch it into the cache now. */
  pull: boolean;
}

/** The most model revisions one desired state names. */
export const MAX_DESIRED_MODELS = 256;

/** The schema of {@link DesiredModel}. */
export const DesiredModelSchema = z.object({
  model: z.string().min(1).max(1024),
  commit: z.string().regex(COMMIT_PATTERN, "must be a commit of 40 hex digits"),
  pinned: z.boolean(),
  pull: z.boolean(),
});

// `deno check` fails here when the interface and the schema drift apart.
type _DesiredModelMatchesSchema = Assert<Same<z.output<typeof DesiredModelSchema>, DesiredModel>>;
