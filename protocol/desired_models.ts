/**
 * Model revisions a node's desired state names apart from its shards
 * (issue #25 item 5), sent as the optional `models` of the desired state:
 *
 * - `pinned`: a deployment with `pinned: true` uses it, so the agent never
 *   evicts it from its cache, on any node;
 * - `pull`: `llmgw models pull` or a rollout's pre-pull asks this node to
 *   fetch it into its cache now, holding no GPU; `requested_at` names the
 *   request, so a failure the agent reports of an earlier one never fails a
 *   later one (issue #25 item 5, review 2 finding 8).
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
  /**
   * With `pull`: when the control plane asked the node (ms), an id of the
   * request that grows with each one (control/model_pulls.ts). The agent
   * tries afresh under a new one, even after a final failure, and names it
   * in the failure it reports (`pulls_failed`). Absent from an older
   * control plane.
   */
  requested_at?: number;
}

/** The most model revisions one desired state names. */
export const MAX_DESIRED_MODELS = 256;

/** The schema of {@link DesiredModel}. */
export const DesiredModelSchema = z.object({
  model: z.string().min(1).max(1024),
  commit: z.string().regex(COMMIT_PATTERN, "must be a commit of 40 hex digits"),
  pinned: z.boolean(),
  pull: z.boolean(),
  requested_at: z.number().optional(),
});

// `deno check` fails here when the interface and the schema drift apart.
type _DesiredModelMatchesSchema = Assert<Same<z.output<typeof DesiredModelSchema>, DesiredModel>>;
