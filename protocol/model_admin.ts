/**
 * The admin API's model routes (issue #25 item 5), beside
 * protocol/admin_protocol.ts: `GET /v1/models` (every model revision, from
 * deployments and from what agents report of their caches),
 * `GET /v1/models/{org}/{name}` (one model: its revisions, facts, hosts,
 * deployments) and `POST /v1/models/pull` (`llmgw models pull`).
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
   * pull it, not yet reporting it.
   */
  state: "complete" | "downloading" | "partial" | "requested";
  /** Bytes on disk. */
  bytes_done: number;
  /** Bytes of the revision as this host reports it; null when not yet known. */
  bytes: number | null;
  /** When a shard last used it there (ms since epoch); null when never recorded. */
  last_used: number | null;
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

const ModelFactsSchema = z.custom<ModelFacts>(
  (v) => typeof v === "object" && v !== null && "weight_bytes" in v,
  "must be model facts",
).describe("The model's facts (models/model_facts.ts)");

const ModelHostSchema = z.object({
  node: z.string(),
  state: z.enum(["complete", "downloading", "partial", "requested"]),
  bytes_done: z.number(),
  bytes: z.number().nullable(),
  last_used: z.number().nullable(),
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

// `deno check` fails here when an interface and its schema drift apart.
type _ModelListMatches = Assert<Same<z.output<typeof ModelListSchema>, ModelList>>;
type _ModelDetailMatches = Assert<Same<z.output<typeof ModelDetailSchema>, ModelDetail>>;
type _PullBodyMatches = Assert<Same<z.output<typeof PullBodySchema>, PullBody>>;
type _PullAnswerMatches = Assert<Same<z.output<typeof PullAnswerSchema>, PullAnswer>>;
