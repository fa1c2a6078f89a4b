/**
 * The agent ↔ control plane protocol (design §10): HTTP + JSON, every body
 * validated with these zod schemas on both sides. protocol/ is the only
 * thing the agent and the control plane share (design §3.1).
 *
 * Endpoints (all under the control plane's URL, `Authorization: Bearer`):
 * - `POST /v1/agent/register` (join token) → {@link RegisterResponse}; the
 *   node credential it returns authenticates every later call.
 * - `POST /v1/agent/heartbeat` (node credential) → {@link HeartbeatResponse}.
 * - `GET /v1/agent/desired?generation=N&wait_ms=M` (node credential): the
 *   node's desired shards; answers at once when the generation differs from
 *   N, else holds the request (long poll) until it changes or `wait_ms`.
 *   The answer is {@link DesiredStateSchema}: each shard's launch is checked
 *   whole (protocol/shard_launch.ts), and the agent refuses a desired state
 *   with any wrong launch, naming the shard and the field.
 *
 * The other roles' contracts: gateway ↔ control in protocol/gateway_protocol.ts,
 * control → agent local API in protocol/local_api_protocol.ts.
 *
 * @module
 */
import { z } from "zod";
import { zodIssues } from "../validation/issues.ts";
import {
  ComputeCapabilitySchema,
  FabricPortSchema,
  MAX_CSR_CHARS,
  MAX_INTERFACE_CHARS,
  MAX_MGMT_ADDR_CHARS,
  NodeIdSchema as NodeId,
} from "./fields.ts";
import type { Assert, Same } from "./same_type.ts";
import type { DesiredLaunch, MetricNames, ShardLaunch } from "../engines/types.ts";
import { REPORT_BOUNDS } from "./report_bounds.ts";
import { DesiredLaunchSchema } from "./shard_launch.ts";
import { MAX_MODEL_SOURCES, type ModelSources, ModelSourcesSchema } from "./model_sources.ts";
import { type ColdStartReceipt, ColdStartReceiptSchema } from "./cold_start_receipt.ts";
import { WireFormatError, type WireIssue } from "./wire_error.ts";
import { type ShardDownload, ShardDownloadSchema } from "./shard_download.ts";
import { ModelCacheReportSchema } from "./model_cache_report.ts";
import { type DesiredModel, DesiredModelSchema, MAX_DESIRED_MODELS } from "./desired_models.ts";

/** The protocol version; a control plane refuses agents of another. */
export const AGENT_PROTOCOL_VERSION = 1;

/** A GPU as discovery reports it (discovery/types.ts `Gpu`). */
export const GpuReportSchema = z.object({
  index: z.number().int().min(0).max(1023),
  uuid: z.string().max(REPORT_BOUNDS.gpuUuid).nullable(),
  name: z.string().max(REPORT_BOUNDS.gpuName).nullable(),
  class: z.string().max(REPORT_BOUNDS.gpuClass).nullable(),
  memory_total_mb: z.number().int().nullable(),
  memory_used_mb: z.number().int().nullable(),
  compute_capability: ComputeCapabilitySchema.nullable(),
  numa_node: z.number().int().nullable(),
  pci_bus_id: z.string().max(REPORT_BOUNDS.pciBusId).nullable(),
  driver_version: z.string().max(REPORT_BOUNDS.driverVersion).nullable(),
  cuda_version: z.string().max(REPORT_BOUNDS.cudaVersion).nullable(),
  nvlink_peers: z.array(z.number().int().min(0)).max(REPORT_BOUNDS.nvlinkPeers),
  health: z.object({
    ecc_errors: z.number().int().nullable(),
    temperature_c: z.number().nullable(),
    problems: z.array(z.string().max(REPORT_BOUNDS.gpuProblem)).max(REPORT_BOUNDS.gpuProblems),
  }),
});

/** A node's GPUs: each index at most once (the inventory refuses a repeated one). */
const GpuReportsSchema = z.array(GpuReportSchema).max(1024).superRefine((gpus, ctx) => {
  const seen = new Set<number>();
  gpus.forEach((g, i) => {
    if (seen.has(g.index)) {
      ctx.addIssue({
        code: "custom",
        path: [i, "index"],
        message: `GPU index ${g.index} appears twice`,
      });
    }
    seen.add(g.index);
  });
});

/** A fabric attachment (discovery/types.ts `FabricAttachment`). */
export const FabricReportSchema = z.object({
  fabric: z.string().min(1).max(64),
  hcas: z.array(z.string().min(1).max(64)).max(REPORT_BOUNDS.hcas),
  ports: z.array(FabricPortSchema).max(REPORT_BOUNDS.fabricPorts),
  rate_gbps: z.number().nullable(),
});

/** What an agent sends to register (design §4, §10). */
export const RegisterRequestSchema = z.object({
  protocol: z.literal(AGENT_PROTOCOL_VERSION),
  node_id: NodeId,
  hostname: z.string().min(1).max(253),
  mgmt_addr: z.string().min(1).max(MAX_MGMT_ADDR_CHARS),
  mgmt_interface: z.string().max(MAX_INTERFACE_CHARS).nullable(),
  agent_url: z.string().url().nullable().describe("The agent's local API (logs, status)."),
  agent_token: z.string().min(16).max(256).optional()
    .describe("The token the control plane presents to the agent's local API to fetch shard logs."),
  proxy_url: z.string().url().nullable().optional()
    .describe("The agent's engine proxy: the one way to this node's engines."),
  proxy_token: z.string().min(16).max(256).optional()
    .describe("The credential gateways present to the agent's engine proxy."),
  labels: z.record(z.string().max(253), z.string().max(253)),
  gpus: GpuReportsSchema,
  fabrics: z.array(FabricReportSchema).max(64),
  agent_version: z.string().max(64),
  engine_versions: z.record(z.string().max(64), z.string().max(64)),
  csr: z.string().max(MAX_CSR_CHARS).optional()
    .describe("A PEM certificate request for the agent's serving certificate (TLS)."),
});

/**
 * The answer to a registration, as sent. The control plane always sends
 * `node_id` and `heartbeat_interval_ms`; an agent reading an answer without
 * them keeps the id it asked for and the default interval, so both are
 * optional here.
 */
export const RegisterAnswerSchema = z.object({
  node_id: NodeId.optional().describe("The node's id as registered"),
  node_token: z.string().min(1).max(4096).describe(
    "The node's credential; shown only in this answer",
  ),
  heartbeat_interval_ms: z.number().int().positive().optional().describe("How often to heartbeat"),
  certificate: z.string().min(1).max(16_384).optional().describe(
    "The agent's certificate, signed from its CSR",
  ),
  ca_certificate: z.string().min(1).max(16_384).optional().describe(
    "The cluster CA the certificate chains to",
  ),
});

/** The answer to a registration, with what an answer may leave out filled in. */
export interface RegisterResponse {
  /** The node's id as registered. */
  node_id: string;
  /** A credential for this node's later calls; shown once, stored hashed by the control plane. */
  node_token: string;
  /** How often to heartbeat (design §4). */
  heartbeat_interval_ms: number;
  /** The agent's certificate (PEM), signed from its CSR, when the control plane runs TLS. */
  certificate?: string;
  /** The cluster CA (PEM) the certificate chains to. */
  ca_certificate?: string;
}

// What the control plane answers is a full answer: the schema only leaves out what readers fill.
type _RegisterResponseMatchesSchema = Assert<
  Same<Required<z.output<typeof RegisterAnswerSchema>>, Required<RegisterResponse>>
>;

/** A renewal of the agent's certificate: `POST /v1/agent/certificate`. */
export const CertificateRequestSchema = z.object({
  csr: z.string().min(1).max(MAX_CSR_CHARS).describe("A PEM certificate request"),
}).strict();

/** A signed certificate and the CA it chains to. */
export const CertificateAnswerSchema = z.object({
  certificate: z.string().min(1).max(16_384),
  ca_certificate: z.string().min(1).max(16_384),
});

/** The answer to `POST /v1/agent/certificate`. */
export type CertificateAnswer = z.infer<typeof CertificateAnswerSchema>;

/**
 * From this many failures in a row (a shard report's `crash_loop.failures`)
 * a shard is shown crash-looping: its restart did not help.
 */
export const CRASH_LOOP_FROM = 2;

const MetricNameList = z.array(z.string().min(1).max(REPORT_BOUNDS.metricName)).max(
  REPORT_BOUNDS.metricNames,
);

/** Metric names an engine reports its load under, candidates in order of preference. */
export const LoadMetricNamesSchema = z.object({
  running: MetricNameList,
  waiting: MetricNameList,
  kv_cache_usage: MetricNameList,
});

/** Metric names an engine reports its load under (one shape for plugins, agents and gateways). */
export type LoadMetricNames = MetricNames;

type _LoadMetricNamesMatchSchema = Assert<
  Same<z.output<typeof LoadMetricNamesSchema>, LoadMetricNames>
>;

/** A shard as the agent reports it ({@link ShardReport}). */

/**
 * The `last_failure.kind` of a shard whose model fetch ran out of disk: not
 * the replica's fault, so the control plane puts it back to pending with the
 * reason rather than counting it as a crash or a refusal (control/replica_failures.ts).
 */
export const INSUFFICIENT_DISK_FAILURE = "insufficient_disk";

export const ShardReportSchema = z.object({
  id: z.string().min(1).max(REPORT_BOUNDS.shardId),
  state: z.enum([
    "pending",
    "downloading",
    "starting",
    "loading",
    "ready",
    "stopping",
    "exited",
    "failed",
    "backoff",
  ]),
  since: z.number(),
  pid: z.number().int().nullable(),
  /** The HTTP port the agent allocated; 0 before it has one. */
  port: z.number().int().min(0).max(65535),
  /** Rank 0's rendezvous port of a multi-node replica, when the agent allocated one. */
  rendezvous_port: z.number().int().min(1).max(65535).nullable().optional(),
  serves_http: z.boolean(),
  progress: z.object({
    percent: z.number().nullable(),
    done: z.number().nullable(),
    total: z.number().nullable(),
  }).nullable(),
  restarts: z.number().int().min(0),
  /**
   * Failures in a row since the shard last stayed ready, and after how many
   * the agent stops restarting it and reports it failed for good (design
   * §9.1); null when it has not failed since. Absent from older agents.
   */
  crash_loop: z.object({
    failures: z.number().int().min(1),
    limit: z.number().int().min(1),
  }).nullable().optional(),
  adopted: z.boolean(),
  last_failure: z.object({
    at: z.number(),
    reason: z.string().max(REPORT_BOUNDS.reason),
    exit_code: z.number().int().nullable(),
    signal: z.string().max(REPORT_BOUNDS.signal).nullable(),
    log_tail: z.array(z.string().max(REPORT_BOUNDS.logLine)).max(REPORT_BOUNDS.logTailLines),
    /**
     * True when retrying cannot change the outcome (the engine or its plugin
     * refused the shard's arguments): the control plane stops rebuilding the
     * replica after a few placements. Absent from older agents: false.
     */
    permanent: z.boolean().optional(),
    /**
     * What kind of failure, when the control plane answers it other than by
     * its `permanent` flag: `insufficient_disk` (the model cache ran out of
     * room fetching the model) puts the replica back to pending for
     * placement to weigh the node's reported room. A string, not an enum, so
     * a newer agent's kind never breaks a heartbeat. Absent from older agents.
     */
    kind: z.string().max(REPORT_BOUNDS.failureKind).optional(),
  }).nullable(),
  spec_hash: z.string().max(REPORT_BOUNDS.specHash),
  /**
   * The last thing worth telling about the shard that is not a failure, e.g.
   * a port of the agent's range found held by another process (named) and
   * skipped. Absent from older agents.
   */
  notice: z.object({ at: z.number(), message: z.string().max(REPORT_BOUNDS.notice) }).nullable()
    .optional(),
  /**
   * The engine's load metric names for its version, from its plugin, so
   * gateways can read its load (design §12). Absent from older agents.
   */
  load_metrics: LoadMetricNamesSchema.nullable().optional(),
  /**
   * The shard's engine plugin. The supervisor always names it and the
   * agent's local API shows it; heartbeats leave it out (the control plane
   * knows it from the placement), so it is absent from every heartbeat.
   */
  engine: z.string().min(1).max(64).optional(),
  /**
   * The current run's cold-start receipt (protocol/cold_start_receipt.ts);
   * null before a spawn and for an adopted engine. Absent from older agents.
   */
  cold_start: ColdStartReceiptSchema.nullable().optional(),
  /**
   * The model download before the engine starts (docs/models.md): bytes,
   * rate, ETA, sources, the last error; null when none is under way or
   * retrying. Absent from older agents; older control planes drop it.
   */
  download: ShardDownloadSchema.nullable().optional(),
});

/** What an agent sends every heartbeat interval. */
export const HeartbeatRequestSchema = z.object({
  node_id: NodeId,
  /** The desired-state generation the agent is running. */
  generation: z.number().int().min(0),
  shards: z.array(ShardReportSchema).max(1024),
  /** Fresh GPU health, when rediscovered. */
  gpus: GpuReportsSchema.optional(),
  /**
   * The agent's model cache (protocol/model_cache_report.ts). Absent from
   * older agents and agents without a cache: their nodes are not filtered
   * for disk.
   */
  model_cache: ModelCacheReportSchema.optional(),
});

/** The answer to a heartbeat. */
export interface HeartbeatResponse {
  /** The node's current desired-state generation: fetch it when it differs. */
  generation: number;
  /**
   * SHA-256 hashes (hex) of the live metrics tokens: the agent's `/metrics`
   * takes exactly these, so a revoked token stops working within one
   * heartbeat (design §11.2).
   */
  metrics_token_hashes?: string[];
}

/** The most metrics tokens a heartbeat answer names. */
export const MAX_METRICS_TOKENS = 1000;

/** The answer to a heartbeat, as the agent checks it; unknown fields are ignored. */
export const HeartbeatResponseSchema = z.object({
  generation: z.number().int().min(0),
  metrics_token_hashes: z.array(
    z.string().regex(/^[0-9a-f]{64}$/, "must be a SHA-256 digest in lower-case hex"),
  ).max(MAX_METRICS_TOKENS).optional(),
});

type _HeartbeatResponseMatchesSchema = Assert<
  Same<z.output<typeof HeartbeatResponseSchema>, HeartbeatResponse>
>;

/**
 * One shard the node should run, as the control plane sends it and the
 * agent's supervisor runs it (supervisor/types.ts takes it as it is). Once
 * its agent allocated its ports it is a `DesiredShard<ShardLaunch>`, the
 * same shard with every port filled in.
 */
export interface DesiredShard<L extends DesiredLaunch | ShardLaunch = DesiredLaunch> {
  /** Shard id. */
  id: string;
  /** Engine plugin name. */
  engine: string;
  /** The launch, ports the agent allocates left null until it fills them; its `shard_id` is `id`. */
  launch: L;
}

/** The full list of shards a node should run, level-triggered (design §10). */
export interface DesiredState {
  /** Increases with every change for this node; fences a node back from `lost`. */
  generation: number;
  /** Every shard the node should run; anything else must stop. */
  shards: DesiredShard[];
  /**
   * Where to fetch each model revision the shards need (protocol/model_sources.ts);
   * absent from older control planes and when no revision is shared.
   */
  model_sources?: ModelSources[];
  /**
   * Model revisions to keep (pinned) or fetch now (pulled) besides the
   * shards' (protocol/desired_models.ts); absent from older control planes.
   */
  models?: DesiredModel[];
}

/** The most shards one node's desired state lists. */
export const MAX_DESIRED_SHARDS = 4096;

/** One shard of a desired state: its launch is checked whole ({@link DesiredLaunchSchema}). */
export const DesiredShardSchema = z.object({
  id: z.string().min(1).max(256),
  engine: z.string().min(1).max(64),
  launch: DesiredLaunchSchema,
}).superRefine((s, ctx) => {
  // The supervisor keys a shard by `id` and the plugin names it by
  // `launch.shard_id`: two names for one shard would confuse pid files and logs.
  if (s.launch.shard_id !== s.id) {
    ctx.addIssue({
      code: "custom",
      path: ["launch", "shard_id"],
      message: `must equal the shard's id ${JSON.stringify(s.id)}`,
    });
  }
});

/** The answer to `GET /v1/agent/desired` (design §10). Unknown fields are ignored. */
export const DesiredStateSchema = z.object({
  generation: z.number().int().min(0),
  shards: z.array(DesiredShardSchema).max(MAX_DESIRED_SHARDS),
  model_sources: z.array(ModelSourcesSchema).max(MAX_MODEL_SOURCES).optional(),
  models: z.array(DesiredModelSchema).max(MAX_DESIRED_MODELS).optional(),
});

// `deno check` fails here when the interfaces and the schema drift apart.
type _DesiredStateMatchesSchema = Assert<Same<z.output<typeof DesiredStateSchema>, DesiredState>>;

/**
 * Parses a desired state. A problem inside a shard names the shard's id
 * beside the path (`shards[2].launch.port (shard "r1-s0"): …`), so the log
 * says which shard the control plane got wrong.
 *
 * @throws {WireFormatError} Naming each wrong field's path.
 */
export function parseDesiredState(value: unknown): DesiredState {
  const parsed = DesiredStateSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const shards = (value as { shards?: unknown } | null)?.shards;
  const issues = zodIssues(parsed.error).map((issue): WireIssue => {
    const [top, index] = issue.path;
    if (top !== "shards" || typeof index !== "number" || !Array.isArray(shards)) return issue;
    const id = (shards[index] as { id?: unknown } | null)?.id;
    return typeof id === "string" && id.length > 0
      ? { ...issue, about: `shard ${JSON.stringify(id.slice(0, 256))}` }
      : issue;
  });
  throw new WireFormatError("the desired state", issues);
}

/** The parsed registration. */
export type RegisterRequest = z.infer<typeof RegisterRequestSchema>;
/** The parsed heartbeat. */
export type HeartbeatRequest = z.infer<typeof HeartbeatRequestSchema>;
/**
 * One shard as its supervisor reports it: in a heartbeat (clipped to the
 * wire's bounds by agent/reports.ts, without `engine`), in the agent's local
 * status (with it), and as the control plane keeps a node's last report.
 */
export interface ShardReport {
  /** Shard id. */
  id: string;
  /** Its state (design §9.3). */
  state:
    | "pending"
    | "downloading"
    | "starting"
    | "loading"
    | "ready"
    | "stopping"
    | "exited"
    | "failed"
    | "backoff";
  /** When it entered the state (ms since epoch). */
  since: number;
  /** The process group leader, while there is one. */
  pid: number | null;
  /** The HTTP port the agent allocated; 0 before it has one. */
  port: number;
  /** Rank 0's rendezvous port of a multi-node replica, when allocated. Absent from older agents. */
  rendezvous_port?: number | null;
  /** Whether it serves the OpenAI API (rank 0). */
  serves_http: boolean;
  /** Loading progress from its log, when seen. */
  progress: { percent: number | null; done: number | null; total: number | null } | null;
  /** Restarts after crashes since it last stayed ready. */
  restarts: number;
  /** Failures in a row and the limit the agent gives up at; null when none. Absent from older agents. */
  crash_loop?: { failures: number; limit: number } | null;
  /** Adopted from a previous agent rather than started by this one. */
  adopted: boolean;
  /** The last failure, kept after restarts. */
  last_failure: {
    /** When (ms since epoch). */
    at: number;
    /** In words. */
    reason: string;
    /** Exit code when it exited. */
    exit_code: number | null;
    /** Signal when one ended it. */
    signal: string | null;
    /** The last lines of its output. */
    log_tail: string[];
    /** True when retrying cannot change it. Absent from older agents: false. */
    permanent?: boolean;
    /** What kind of failure, e.g. `insufficient_disk`. Absent from older agents. */
    kind?: string;
  } | null;
  /** Hash of its launch. */
  spec_hash: string;
  /** The last notice that is not a failure. Absent from older agents. */
  notice?: { at: number; message: string } | null;
  /** The engine's load metric names. Absent from older agents. */
  load_metrics?: LoadMetricNames | null;
  /** The engine plugin: set by the supervisor, left out of heartbeats. */
  engine?: string;
  /**
   * The current run's cold-start receipt (issue #25 item 7); null before a
   * spawn and for an adopted engine. Absent from older agents.
   */
  cold_start?: ColdStartReceipt | null;
  /** The model download before the engine starts; null when none. Absent from older agents. */
  download?: ShardDownload | null;
}

// `deno check` fails here when the interface and the schema drift apart.
type _ShardReportMatchesSchema = Assert<Same<z.output<typeof ShardReportSchema>, ShardReport>>;
