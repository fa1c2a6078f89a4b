/**
 * The admin API's contract (design §11): its parameters, request bodies and
 * answers, declared once. The control plane's edge validates requests with
 * them and its OpenAPI document is generated from them; `llmgw` parses every
 * answer with them. control/admin_answers.ts checks at compile time that the
 * control plane's own types are what these schemas describe.
 *
 * Fields added after the first release default when absent (an event's
 * `uid`, a replica's `revision`, a log's positions), so a newer `llmgw`
 * still reads an older control plane's answers. Answers are looked at as a
 * whole; deep objects other modules define (an
 * explanation, a deployment's spec) are described by the fields the CLI
 * reads and otherwise left open, so a newer control plane's extra fields
 * pass through.
 *
 * @module
 */
import { z } from "zod";
import { ApplyResultKindSchema, SpecChangeSchema } from "./apply_answer.ts";
import { ShardReportSchema } from "./agent_protocol.ts";
import { ColdStartReceiptSchema } from "./cold_start_receipt.ts";
import { ShardDownloadSchema } from "./shard_download.ts";
import { NodeIdSchema } from "./fields.ts";
import type { Explanation } from "../placement/types.ts";
import { LABEL_KEY_PATTERN, NAME_PATTERN } from "../deployment/schema.ts";

// ---- parameters ----

/** A node id. */
export const NodeId = NodeIdSchema;
/** A deployment name. */
export const DeploymentName = z.string().regex(NAME_PATTERN, "must be a deployment name");
/** `:id` of a node. */
export const NodeParams = z.object({ id: NodeId });
/** `:name` of a deployment. */
export const DeploymentParams = z.object({ name: DeploymentName });
/** `:id` of a replica. */
export const ReplicaParams = z.object({ id: z.string().min(1).max(256) });
/** `:id` of an API key. */
export const ApiKeyParams = z.object({
  id: z.string().regex(/^key-[a-f0-9]{8}$/, "must be an API key id"),
});
/** `:id` of an access token. */
export const TokenParams = z.object({
  id: z.string().regex(/^[0-9a-f]{8,32}$/, "must be a token id (hex)"),
});
/** What access tokens may do. */
export const TokenKindSchema = z.enum(["admin", "gateway", "metrics", "join"]);

// ---- queries ----

/** The desired-state long poll. */
export const DesiredQuery = z.object({
  node_id: NodeId.optional().describe("The node; default: the credential's node"),
  generation: z.coerce.number().int().min(0).default(0).describe(
    "The generation the agent runs; the answer waits while it is current",
  ),
  wait_ms: z.coerce.number().int().min(0).max(60_000).default(0).describe(
    "How long to wait for a change",
  ),
});
/** An apply: `dry_run=true` validates and compares, storing nothing. */
export const ApplyQuery = z.object({
  dry_run: z.enum(["true", "false"]).optional().describe(
    "true: validate as an apply does and answer what it would do (the changes against the " +
      "live spec, the replicas a new revision would replace); nothing is stored",
  ),
});
/** Events. */
export const EventsQuery = z.object({
  after: z.coerce.number().int().min(0).optional().describe("Only events after this id"),
  subject: z.string().max(256).optional().describe("Only this subject, e.g. replica/qwen-r0"),
  incarnation: z.string().max(64).regex(/^[A-Za-z0-9-]+$/, "must be current, all or a uid")
    .optional().describe(
      "With subject: current (the default: the subject as it exists now, not an earlier " +
        "deployment or replica of the same name), all, or one incarnation's uid",
    ),
  limit: z.coerce.number().int().min(1).max(1000).default(100).describe("At most this many"),
});
/** A shard's logs. */
export const LogsQuery = z.object({
  shard: z.coerce.number().int().min(0).max(1023).default(0).describe("The shard's rank"),
  lines: z.coerce.number().int().min(1).max(10_000).default(100).describe("Lines from the end"),
});

/** Tokens of one kind. */
export const TokensQuery = z.object({
  kind: TokenKindSchema.optional().describe("Only tokens of this kind"),
});

// ---- bodies ----

/** A new access token. */
export const TokenBody = z.object({
  kind: TokenKindSchema.describe("What the token may do"),
  description: z.string().max(256).optional().describe("A note for people"),
  ttl_seconds: z.number().int().min(1).max(10 * 365 * 86_400).nullable().optional().describe(
    "Lifetime in seconds; null never expires; absent: a day for join tokens, never for others",
  ),
}).strict();

/** A new API key. */
export const ApiKeyBody = z.object({
  name: z.string().min(1).max(128).describe("The operator's name for the key"),
  models: z.array(z.string().min(1).max(256)).max(1000).nullable().optional().describe(
    "Served model names it may use; null or absent for all",
  ),
}).strict();
const FabricName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, "must be a fabric name");
/** Fabric overrides. */
export const FabricOverridesBody = z.object({
  fabric_overrides: z.record(FabricName, FabricName.nullable()).describe(
    "Reported fabric → new name, or null to exclude it from placement",
  ),
}).strict();
/** Label overrides. */
export const LabelsBody = z.object({
  labels: z.record(
    z.string().regex(LABEL_KEY_PATTERN, "must be a label key"),
    z.string().max(253).nullable(),
  ).describe("Label → value, or null to remove the override"),
}).strict();
/** `rollout undo`. */
export const UndoBody = z.object({
  to_revision: z.number().int().min(1).max(2 ** 31).optional().describe(
    "The revision whose spec comes back; default the newest earlier one that runs something else",
  ),
}).strict();
/** A replica count. */
export const ScaleBody = z.object({
  replicas: z.number().int().min(0).max(10_000).describe("The new replica count"),
}).strict();

// ---- answers ----

const Open = z.looseObject({});

const ExplanationHead = z.looseObject({
  summary: z.string(),
  profiles: z.array(z.looseObject({ profile: z.string(), summary: z.string() })),
});

/**
 * A placement explanation (placement/types.ts `Explanation`): its summary
 * and each profile's are checked; the per-node and per-group detail below
 * them is placement's own and read as placement wrote it.
 */
export const ExplanationSchema = z.custom<Explanation>(
  (v) => ExplanationHead.safeParse(v).success,
  "must be a placement explanation: a summary and the profiles tried",
).meta({
  // What the OpenAPI document shows of it: the checked head.
  ...z.toJSONSchema(ExplanationHead, { target: "draft-2020-12" }),
  $schema: undefined,
});

/** A GPU of a node as listed (inventory/types.ts `GpuInfo`): the fields `llmgw` reads. */
export const NodeGpuSchema = z.looseObject({
  index: z.number().int(),
  class: z.string().nullable(),
  name: z.string().nullable().optional(),
  memory_total_mb: z.number().nullable().optional(),
  memory_used_mb: z.number().nullable().optional(),
  health: z.looseObject({ problems: z.array(z.string()) }),
});

/** A node as listed: inventory facts, liveness, intent and allocations (inventory `InventoryNode`). */
export const NodeSchema = z.looseObject({
  id: z.string(),
  hostname: z.string(),
  mgmt_addr: z.string(),
  state: z.string().describe("ready, unreachable, lost, cordoned or draining"),
  intent: z.string().describe("none, cordoned or draining"),
  agent_version: z.string(),
  engine_versions: z.record(z.string(), z.string()),
  last_seen_ms: z.number(),
  labels: z.record(z.string(), z.string()),
  gpus: z.array(NodeGpuSchema),
  fabrics: z.array(z.looseObject({
    fabric: z.string(),
    hcas: z.array(z.string()),
    rate_gbps: z.number().nullable(),
  })),
  allocations: z.array(z.looseObject({
    replica_id: z.string(),
    shard_id: z.string(),
    gpu_indices: z.array(z.number().int()),
  })),
});

/** A node as listed. */
export type NodeListing = z.infer<typeof NodeSchema>;
/** The node list. */
export const NodeListSchema = z.object({ nodes: z.array(NodeSchema) });
/** Label overrides after a change. */
export const LabelsAnswer = z.object({
  node: z.string(),
  label_overrides: z.record(z.string(), z.string()),
});
/** Fabric overrides after a change. */
export const FabricsAnswer = z.object({
  node: z.string(),
  fabric_overrides: z.record(z.string(), z.string().nullable()),
});

/** A rollout step: an old replica replaced by a new one. */
export const RolloutStepSchema = z.object({
  replaced: z.string().describe("The old replica"),
  by: z.string().describe("The new replica; the old id when rebuilt in place"),
  mode: z.enum(["surge", "in_place"]).describe(
    "surge: the new one started first; in_place: the old one taken down first",
  ),
  started_at: z.number(),
});
/** A rollout in progress, as stored. */
export const RolloutRecordSchema = z.object({
  target: z.number().int().describe("The revision being rolled out"),
  fallback: z.number().int().nullable().describe(
    "The revision it goes back to if it fails; null for an automatic revert",
  ),
  started_at: z.number(),
  progress_at: z.number().describe("Its last progress: the deadline counts from it"),
  steps: z.number().int().describe("Steps done"),
  step: RolloutStepSchema.nullable(),
});
/** One revision of a deployment. */
export const RevisionSchema = z.object({
  revision: z.number().int(),
  spec: z.looseObject({ model: z.string() }).describe(
    "The deployment as applied in this revision",
  ),
  applied_at: z.number(),
  cause: z.enum(["apply", "undo", "revert"]).describe(
    "An apply; an undo to an older revision's spec; an automatic revert after a failed rollout",
  ),
  from_revision: z.number().int().nullable().describe("For undo and revert: the spec's revision"),
  outcome: z.enum(["rolling_out", "complete", "failed", "superseded"]),
  reason: z.string().nullable().describe("Why it failed"),
  model_commit: z.string().nullable().optional().describe(
    "The commit its model revision resolved to; null when unknown or a local path",
  ),
});
/** A deployment's spec as answers carry it: the fields `llmgw` reads (deployment/schema.ts). */
export const DeploymentSpecSchema = z.looseObject({
  name: z.string(),
  model: z.string(),
  revision: z.string().optional().describe("The hub revision; absent for a local path model"),
  pinned: z.boolean().optional(),
  served_model_name: z.string(),
  replicas: z.number().int(),
  routing: z.string().optional(),
  profiles: z.array(z.looseObject({
    name: z.string(),
    engine: z.string(),
    gpu_class: z.string().optional(),
    tensor_parallel: z.number().int().optional(),
  })),
}).describe("The deployment as applied, defaults filled in");

/** A stored deployment. */
export const StoredDeploymentSchema = z.object({
  name: z.string(),
  spec: DeploymentSpecSchema,
  created_at: z.number(),
  updated_at: z.number(),
  revision: z.number().int().optional().describe("Its current revision"),
  history: z.array(RevisionSchema).optional().describe("Recent revisions, oldest first"),
  rollout: RolloutRecordSchema.nullable().optional().describe("The rollout under way, or null"),
  uid: z.string().optional().describe("This incarnation's identity"),
  model_commit: z.string().nullable().optional().describe(
    "The commit the current revision's model revision resolved to (issue #25 item 1); null: " +
      "a local path model, or not resolved yet",
  ),
});

/** A deployment as answers carry it. */
export type DeploymentListing = z.infer<typeof StoredDeploymentSchema>;
/** One revision as listed. */
export type RevisionListing = z.infer<typeof RevisionSchema>;

/** A deployment's revisions. */
export const RevisionListSchema = z.object({
  deployment: z.string(),
  revision: z.number().int().describe("The current revision"),
  revisions: z.array(RevisionSchema),
});
/** A deployment's rollout status. */
export const RolloutStatusSchema = z.object({
  deployment: z.string(),
  revision: z.number().int().describe("The current revision, which a rollout moves replicas to"),
  state: z.enum(["progressing", "complete"]),
  desired: z.number().int(),
  ready: z.number().int().describe("Replicas ready, any revision"),
  updated: z.number().int().describe("Replicas on the current revision"),
  replicas_by_revision: z.array(z.object({
    revision: z.number().int(),
    replicas: z.number().int(),
    ready: z.number().int(),
  })),
  rollout: RolloutRecordSchema.extend({
    deadline_at: z.number().nullable().describe(
      "When it fails without further progress; null for a revert, which never fails",
    ),
  }).nullable(),
  prepull: z.object({
    model: z.string(),
    commit: z.string(),
    nodes: z.array(z.string()),
    held: z.array(z.string()),
    failed: z.array(z.string()).default([]).describe(
      "Nodes whose pull failed for good, not waited for; absent from older control planes",
    ),
    cancelled: z.array(z.string()).default([]).describe(
      "Nodes whose pull an operator cancelled, not waited for; absent from older control planes",
    ),
    until: z.number(),
  }).nullable().optional().describe(
    "The model revision the rollout fetches onto its nodes before its first step; absent from older control planes",
  ),
  replicas: z.array(z.object({
    id: z.string(),
    index: z.number().int(),
    revision: z.number().int(),
    state: z.enum(["pending", "downloading", "starting", "loading", "ready", "failed"]),
  })),
});
/** A deployment's rollout status as answered. */
export type RolloutStatusAnswer = z.infer<typeof RolloutStatusSchema>;

/** An undo's answer. */
export const UndoAnswer = z.object({
  deployment: z.string(),
  revision: z.number().int().describe("The new revision"),
  from_revision: z.number().int().describe("The revision whose spec it copies"),
});
/** The deployment list. */
export const DeploymentListSchema = z.object({ deployments: z.array(StoredDeploymentSchema) });
const Issue = z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() });
/** An apply's answer. */
export const ApplyAnswer = z.object({
  deployment: DeploymentSpecSchema,
  warnings: z.array(Issue),
  created: z.boolean(),
  result: ApplyResultKindSchema,
  revision: z.number().int().describe(
    "Its revision after the apply: a new one when the workload changed (anything but the " +
      "replica count, routing and rollout settings)",
  ),
  changes: z.array(SpecChangeSchema).describe(
    "Each field that differs from the live spec, both with defaults applied; key order " +
      "never counts",
  ),
  rolling: z.array(z.string()).describe(
    "Replicas the new revision replaces, one at a time (result updated); empty otherwise",
  ),
  dry_run: z.boolean().describe("True when nothing was stored: what an apply would do"),
});
/** An apply's answer as `llmgw apply` reads it. */
export type ApplyListing = z.infer<typeof ApplyAnswer>;

/** A deletion's answer. */
export const DeletedAnswer = z.object({ deleted: z.string() });
/** A scale's answer. */
export const ScaleAnswer = z.object({
  deployment: z.string(),
  replicas: z.number().int(),
  /** What cannot run at this count, as apply warns (more replicas than the fleet's GPUs hold). */
  warnings: z.array(Issue),
});
/** A dry run's answer. */
export const PlanAnswer = z.object({
  replicas: z.array(z.looseObject({
    status: z.enum(["placed", "unschedulable"]),
    replica_id: z.string(),
    explanation: Open,
  })),
});

/** A replica failure that retrying cannot change (control/store `ReplicaFailure`). */
export const ReplicaFailureSchema = z.object({
  reason: z.string(),
  shard_id: z.string(),
  node: z.string(),
  log_tail: z.array(z.string()),
  at: z.number(),
  attempts: z.number().int(),
  nodes: z.array(z.string()).optional(),
});

/** A replica's state as shown: from its phase and its shards' reports. */
export const ReplicaStateSchema = z.enum([
  "pending",
  "downloading",
  "starting",
  "loading",
  "ready",
  "failed",
]);

/** A shard of a replica as shown (control/views.ts `ShardView`). */
export const ShardViewSchema = z.object({
  shard_id: z.string(),
  rank: z.number().int(),
  node: z.string(),
  gpu_indices: z.array(z.number().int()),
  port: z.number().int(),
  state: z.union([ShardReportSchema.shape.state, z.literal("unknown")]).describe(
    "What its agent last reported; unknown before the first report",
  ),
  progress: ShardReportSchema.shape.progress,
  last_failure: ShardReportSchema.shape.last_failure,
  restarts: z.number().int().default(0).describe(
    "Restarts after crashes since it last stayed ready",
  ),
  crash_loop: z.object({ failures: z.number().int(), limit: z.number().int() }).nullable()
    .default(null).describe(
      "Set while it crash-loops: failures in a row, and where the agent gives up",
    ),
  cold_start: ColdStartReceiptSchema.nullable().default(null).describe(
    "How its engine's current run started, phase by phase; null when not reported",
  ),
  download: ShardDownloadSchema.nullable().default(null).describe(
    "Its model's download while it is downloading: bytes, rate, ETA, sources, the last error",
  ),
});

/** A replica's view (control/views.ts `ReplicaView`). */
export const ReplicaViewSchema = z.object({
  id: z.string(),
  deployment: z.string(),
  state: ReplicaStateSchema,
  profile: z.string().nullable(),
  shards: z.array(ShardViewSchema),
  explanation: ExplanationSchema.nullable(),
  failure: ReplicaFailureSchema.nullable().default(null),
  revision: z.number().int().default(1).describe("The deployment revision it is built from"),
  ready_at: z.number().nullable().default(null).describe(
    "When its shards first all reported ready",
  ),
  retiring_at: z.number().nullable().default(null).describe(
    "When it left the gateways' endpoints ahead of being replaced; null while it serves",
  ),
});
/** A shard of a replica as listed. */
export type ShardListing = z.infer<typeof ShardViewSchema>;
/** A replica as listed. */
export type ReplicaListing = z.infer<typeof ReplicaViewSchema>;

/** The replica list. */
export const ReplicaListSchema = z.object({ replicas: z.array(ReplicaViewSchema) });
/** A shard's logs. */
export const ShardLogsAnswer = z.object({
  shard_id: z.string(),
  node: z.string(),
  state: z.string(),
  lines: z.array(z.string()),
  log_id: z.string().nullable().default(null).describe(
    "The log's identity on its agent: another id means the log began again",
  ),
  first: z.number().int().nullable().default(null).describe(
    "The position in the log of the first line; null from an agent that does not say",
  ),
  probe_lines_hidden: z.number().int().nullable().default(null).describe(
    "Access lines of llmgw's own probes (GET /health, /v1/models, /metrics answered 2xx) left " +
      "out of the lines, counted since the log began; the file on the node keeps them. Null " +
      "from an agent that does not say",
  ),
});

/** An event as listed (control/store `EventRecord`). */
export const EventSchema = z.object({
  id: z.number().int(),
  at: z.number(),
  kind: z.string(),
  subject: z.string(),
  message: z.string(),
  uid: z.string().default("").describe(
    "The incarnation of its subject it is about; empty when none",
  ),
});

/** An event as listed. */
export type EventListing = z.infer<typeof EventSchema>;

/** Events. */
export const EventListSchema = z.object({ events: z.array(EventSchema) });

/** `GET /v1/replicas/:id/explanation` (control/live_explanation.ts). */
export const LiveExplanationAnswer = z.object({
  replica: ReplicaViewSchema,
  live: ExplanationSchema.nullable().describe(
    "Where the replica would be placed now on the live inventory, its own GPUs counted free; " +
      "null when its deployment is gone",
  ),
  detail: z.enum(["full", "grouped"]).describe(
    "full: every rejected node is named; grouped: rejections are counted by reason",
  ),
  nodes: z.number().int().describe("Nodes in the live inventory"),
});

/** A replica's live explanation. */
export type LiveExplanation = z.infer<typeof LiveExplanationAnswer>;

const ApiKeyListing = z.object({
  id: z.string(),
  name: z.string(),
  models: z.array(z.string()).nullable(),
  created_at: z.number(),
});
/** The API key list. */
export const ApiKeyListSchema = z.object({ api_keys: z.array(ApiKeyListing) });
/** A new key, shown once. */
export const NewApiKeyAnswer = z.object({
  id: z.string(),
  name: z.string(),
  key: z.string().describe("The key; shown only in this answer"),
  models: z.array(z.string()).nullable(),
});

const TokenListing = z.object({
  id: z.string(),
  kind: TokenKindSchema,
  description: z.string(),
  created_at: z.number(),
  expires_at: z.number().nullable().describe("ms since epoch; null: never"),
});
/** An access token as listed. */
export type TokenListing = z.infer<typeof TokenListing>;

/** The token list. */
export const TokenListSchema = z.object({ tokens: z.array(TokenListing) });
/** A new token, shown once. */
export const NewTokenAnswer = TokenListing.extend({
  token: z.string().describe(
    "The token; shown only in this answer. A join token carries the CA's key hash when TLS is on",
  ),
});
/** A revoked token. */
export const RevokedTokenAnswer = z.object({ revoked: TokenListing });

/** The cluster CA. */
export const CaAnswer = z.object({ ca_certificate: z.string().describe("PEM") });
/** Liveness. */
export const HealthAnswer = z.object({ status: z.literal("ok") });
/** The OpenAPI document itself. */
export const OpenApiAnswer = Open;
/** Prometheus text. */
export const MetricsAnswer = z.string();
