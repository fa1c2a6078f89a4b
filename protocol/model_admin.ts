/**
 * The admin API's model routes (issue #25 item 5), beside
 * protocol/admin_protocol.ts: `GET /v1/models` (every model revision, from
 * deployments and from what agents report of their caches),
 * `GET /v1/models/{org}/{name}` (one model: its revisions, facts, hosts,
 * deployments), `POST /v1/models/pull` (`llmgw models pull`) and
 * `GET /v1/models/pulls` (the pulls under way and lately finished) and
 * `POST /v1/models/pulls/cancel` (`llmgw models pulls`, `models cancel`).
 *
 * @module
 */
import { z } from "zod";
import type { ModelFacts } from "../models/model_facts.ts";
import { COMMIT_PATTERN, REPO_ID_PATTERN } from "../models/hub_protocol.ts";
import { NodeIdSchema } from "./fields.ts";
import type { Assert, Same } from "./same_type.ts";

/** One host's copy of a model revision. */
export interface ModelHostView {
  /** Node id. */
  node: string;
  /**
   * `complete`: verified and linked; `downloading`: being fetched now;
   * `partial`: some files, no download finished; `requested`: asked to
   * pull it, not yet reporting it; `failed`: its pull failed for good
   * there (see {@link ModelHostView.failure}).
   */
  state: ModelHostState;
  /** Bytes on disk. */
  bytes_done: number;
  /** Bytes of the revision as this host reports it; null when not yet known. */
  bytes: number | null;
  /** When a shard last used it there (ms since epoch); null when never recorded. */
  last_used: number | null;
  /** A `failed` host's failure, as its agent reported it; absent otherwise. */
  failure?: ModelHostFailure;
}

/** Where a host's copy of a model revision can stand, in the order lists count them. */
export const MODEL_HOST_STATES = [
  "complete",
  "downloading",
  "partial",
  "requested",
  "failed",
] as const;

/** Where one host's copy of a model revision stands (`llmgw get models`). */
export type ModelHostState = typeof MODEL_HOST_STATES[number];

/**
 * The kind of a pull's failure that names no cause: the agent's catch-all
 * (agent/pull_failure.ts), and what a failed part recorded before parts
 * carried a kind is shown as.
 */
export const FETCH_FAILED_KIND = "fetch_failed";

/** Why a host's pull of a revision failed for good (its agent's `pulls_failed`). */
export interface ModelHostFailure {
  /** What failed (agent/pull_failure.ts), e.g. `revision_not_found`, `gated`, `insufficient_disk`. */
  kind: string;
  /** The agent's words: the hub's or the disk's, never a token. */
  message: string;
  /** When the control plane marked it failed (ms since epoch). */
  at: number;
}

/** One model revision across the fleet. */
export interface ModelRevisionView {
  /** The hub id, or the local path of a deployment's model. */
  model: string;
  /** The commit; null while a deployment's revision is not resolved (and for a local path). */
  commit: string | null;
  /** The branch, tag or commit deployments name it by; null when only agents report it. */
  revision: string | null;
  /** Bytes: the largest a host reports, else the revision's files' (facts), else its weights'; null when unknown. */
  bytes: number | null;
  /** Deployments whose current revision serves it, by name. */
  deployments: string[];
  /** A deployment using it has `pinned: true`, or a host reports it pinned. */
  pinned: boolean;
  /** Hosts that hold it, fetch it, or were asked to pull it, by node id. */
  hosts: ModelHostView[];
  /** Its facts (config.json, safetensors index) when the control plane knows them. */
  facts: ModelFacts | null;
}

/** The answer to `GET /v1/models`. */
export interface ModelList {
  /** By model, then commit. */
  models: ModelRevisionView[];
}

/** The answer to `GET /v1/models/{org}/{name}`. */
export interface ModelDetail {
  /** The hub id. */
  model: string;
  /** Its revisions, as in the list. */
  revisions: ModelRevisionView[];
}

/** The body of `POST /v1/models/pull`. */
export interface PullBody {
  /** The deployment whose model revision to fetch. */
  deployment: string;
  /** The nodes to fetch it onto; absent: every ready node with a GPU class of its profiles. */
  nodes?: string[];
}

/** The answer to `POST /v1/models/pull`. */
export interface PullAnswer {
  /** The hub id. */
  model: string;
  /** The commit fetched. */
  commit: string;
  /** Nodes asked to fetch it now. */
  requested: string[];
  /** Nodes that already hold it: nothing to do. */
  held: string[];
  /** Nodes whose agents report no model cache (older agents, or none configured): not asked. */
  no_cache: string[];
}

/**
 * Where one node stands in a pull: asked and not holding it yet, holding
 * it, given up, or failed for good on its agent (unknown repo or revision,
 * gated, no room, wrong bytes from every source).
 */
export type PullNodeState = "requested" | "done" | "cancelled" | "failed";

/** One node of a pull. */
export interface PullNodeView {
  /** Node id. */
  node: string;
  /** Where it stands. */
  state: PullNodeState;
  /** When it was last asked (ms since epoch). */
  requested_at: number;
  /** When it reported the revision held, or was given up; null while requested. */
  finished_at: number | null;
  /** Why it was given up (`cancelled`) or failed (`failed`: the agent's words); null otherwise. */
  reason: string | null;
  /** A `failed` node's failure kind (agent/pull_failure.ts), e.g. `revision_not_found`. */
  kind?: string;
}

/** A model revision being pulled onto nodes, or pulled lately (`GET /v1/models/pulls`). */
export interface ModelPullView {
  /** `repo@commit`. */
  id: string;
  /** The hub id. */
  model: string;
  /** The commit. */
  commit: string;
  /**
   * `pulling` while a node is requested; then `done` when a node got it,
   * else `failed` when a node failed, else `cancelled`.
   */
  state: "pulling" | "done" | "failed" | "cancelled";
  /** Every node asked, in natural order. */
  nodes: PullNodeView[];
  /** When it was first asked for (ms since epoch). */
  created_at: number;
  /** When it last changed. */
  updated_at: number;
  /** When its last requested node finished; null while one is still requested. */
  finished_at: number | null;
}

/** The body of `POST /v1/models/pulls/cancel` (`llmgw models cancel`). */
export interface CancelPullBody {
  /**
   * The pull, `org/name@commit`: the commit in full or a prefix of at
   * least {@link PULL_COMMIT_PREFIX_MIN} hex digits that names one pull
   * of the model (as `llmgw models pulls` lists it).
   */
  pull: string;
  /** The nodes to stop asking; absent: every node still asked. */
  nodes?: string[];
}

/** The answer to `POST /v1/models/pulls/cancel`: the pull, and what this cancel did. */
export interface CancelPullAnswer extends ModelPullView {
  /** The nodes this cancel stopped asking. */
  cancelled: string[];
  /** Each node named that was not asked any more, and why: `n1 holds it already`. */
  unchanged: string[];
}

/** The fewest hex digits of a commit that name a pull (as `llmgw models pulls` shows it). */
export const PULL_COMMIT_PREFIX_MIN = 7;

/** The answer to `GET /v1/models/pulls`: the unfinished first, then the finished, newest first. */
export interface PullList {
  /** The pulls. */
  pulls: ModelPullView[];
}

const ModelFactsSchema = z.custom<ModelFacts>(
  (v) => typeof v === "object" && v !== null && "weight_bytes" in v,
  "must be model facts",
).describe("The model's facts (models/model_facts.ts)");

const ModelHostSchema = z.object({
  node: z.string(),
  state: z.enum(MODEL_HOST_STATES),
  bytes_done: z.number(),
  bytes: z.number().nullable(),
  last_used: z.number().nullable(),
  failure: z.object({ kind: z.string(), message: z.string(), at: z.number() }).optional()
    .describe("A failed host's failure: its kind and the agent's words"),
});

/** {@link ModelRevisionView} on the wire. */
export const ModelRevisionSchema = z.object({
  model: z.string(),
  commit: z.string().nullable(),
  revision: z.string().nullable(),
  bytes: z.number().nullable(),
  deployments: z.array(z.string()),
  pinned: z.boolean(),
  hosts: z.array(ModelHostSchema),
  facts: ModelFactsSchema.nullable(),
});

/** {@link ModelList} on the wire. */
export const ModelListSchema = z.object({ models: z.array(ModelRevisionSchema) });

/** {@link ModelDetail} on the wire. */
export const ModelDetailSchema = z.object({
  model: z.string(),
  revisions: z.array(ModelRevisionSchema),
});

/** The path of `GET /v1/models/{org}/{name}`: a hub id in two parts. */
export const ModelParams = z.object({
  org: z.string().min(1).max(256),
  name: z.string().min(1).max(256),
}).refine((p) => REPO_ID_PATTERN.test(`${p.org}/${p.name}`), {
  message: "must be a hub model id, org/name",
});

/** {@link PullBody} on the wire. */
export const PullBodySchema = z.object({
  deployment: z.string().min(1).max(253).describe("The deployment whose model revision to fetch"),
  nodes: z.array(NodeIdSchema).min(1).max(4096).optional().describe(
    "Nodes to fetch onto; default every ready node with a GPU class of its profiles",
  ),
}).strict();

/** {@link PullAnswer} on the wire. */
export const PullAnswerSchema = z.object({
  model: z.string(),
  commit: z.string().regex(COMMIT_PATTERN),
  requested: z.array(z.string()),
  held: z.array(z.string()),
  no_cache: z.array(z.string()).default([]).describe("Absent from older control planes: none"),
});

/** {@link ModelPullView} on the wire. */
export const ModelPullSchema = z.object({
  id: z.string(),
  model: z.string(),
  commit: z.string(),
  state: z.enum(["pulling", "done", "failed", "cancelled"]),
  nodes: z.array(z.object({
    node: z.string(),
    state: z.enum(["requested", "done", "cancelled", "failed"]),
    requested_at: z.number(),
    finished_at: z.number().nullable(),
    reason: z.string().nullable(),
    kind: z.string().optional(),
  })),
  created_at: z.number(),
  updated_at: z.number(),
  finished_at: z.number().nullable(),
});

/** {@link PullList} on the wire. */
export const PullListSchema = z.object({ pulls: z.array(ModelPullSchema) });

/** {@link CancelPullAnswer} on the wire. */
export const CancelPullAnswerSchema = ModelPullSchema.extend({
  cancelled: z.array(z.string()).default([]).describe("Absent from older control planes"),
  unchanged: z.array(z.string()).default([]).describe("Absent from older control planes"),
});

const PULL_COMMIT = new RegExp(`^[0-9a-f]{${PULL_COMMIT_PREFIX_MIN},40}$`);

/** {@link CancelPullBody} on the wire. */
export const CancelPullBodySchema = z.object({
  pull: z.string().max(600).refine(
    (id) => {
      const at = id.lastIndexOf("@");
      return at > 0 && REPO_ID_PATTERN.test(id.slice(0, at)) && PULL_COMMIT.test(id.slice(at + 1));
    },
    `must be a pull, org/name@commit: the commit in full or its first ${PULL_COMMIT_PREFIX_MIN} or more hex digits, as llmgw models pulls lists it`,
  ).describe(
    `The pull, org/name@commit (the commit in full or a unique prefix of ${PULL_COMMIT_PREFIX_MIN}+ hex digits)`,
  ),
  nodes: z.array(NodeIdSchema).min(1).max(4096).optional().describe(
    "Nodes to stop asking; default every node still asked",
  ),
}).strict();

// `deno check` fails here when an interface and its schema drift apart.
type _ModelListMatches = Assert<Same<z.output<typeof ModelListSchema>, ModelList>>;
type _ModelDetailMatches = Assert<Same<z.output<typeof ModelDetailSchema>, ModelDetail>>;
type _PullBodyMatches = Assert<Same<z.output<typeof PullBodySchema>, PullBody>>;
type _PullAnswerMatches = Assert<Same<z.output<typeof PullAnswerSchema>, PullAnswer>>;
type _PullListMatches = Assert<Same<z.output<typeof PullListSchema>, PullList>>;
type _ModelPullMatches = Assert<Same<z.output<typeof ModelPullSchema>, ModelPullView>>;
type _CancelPullAnswerMatches = Assert<
  Same<z.output<typeof CancelPullAnswerSchema>, CancelPullAnswer>
>;
type _CancelPullBodyMatches = Assert<Same<z.output<typeof CancelPullBodySchema>, CancelPullBody>>;
