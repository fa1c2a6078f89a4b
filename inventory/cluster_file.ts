/**
 * The cluster file of `llmgw plan` (and of tests and benchmarks): nodes with
 * their inventory as `llmgw agent inventory --json` prints it, state, labels,
 * existing allocations and, optionally, the model cache as the node's agent
 * reports it in its heartbeat (protocol/model_cache_report.ts). Validated
 * with zod; errors name the field path.
 *
 * @module
 */
import { z } from "zod";
import type { FabricAttachment } from "../discovery/types.ts";
import { formatIssues, type InputIssue, zodIssues } from "../validation/issues.ts";
import { type ClusterNode, NODE_STATES } from "./types.ts";
import { errorMessage } from "../text/error_message.ts";
import {
  type ModelCacheReport,
  ModelCacheReportSchema,
  revisionName,
} from "../protocol/model_cache_report.ts";

const nullableInt = z.number().int().nullable();

/** A GPU as the agent reports it (discovery/types.ts `Gpu`). */
export const GpuSchema = z.object({
  index: z.number().int().min(0),
  uuid: z.string().nullable().default(null),
  name: z.string().nullable().default(null),
  class: z.string().nullable(),
  memory_total_mb: nullableInt.default(null),
  memory_used_mb: nullableInt.default(null),
  compute_capability: z.string().regex(/^\d+\.\d+$/, "must be like 9.0").nullable().default(null),
  numa_node: nullableInt.default(null),
  pci_bus_id: z.string().nullable().default(null),
  driver_version: z.string().nullable().default(null),
  cuda_version: z.string().nullable().default(null),
  nvlink_peers: z.array(z.number().int().min(0)).default([]),
  health: z.object({
    ecc_errors: nullableInt.default(null),
    temperature_c: z.number().nullable().default(null),
    problems: z.array(z.string()).default([]),
  }).default({ ecc_errors: null, temperature_c: null, problems: [] }),
});

const FabricPortSchema = z.object({
  hca: z.string().min(1),
  port: z.number().int().min(1),
  link_layer: z.enum(["infiniband", "roce"]).nullable().default(null),
  rate_gbps: z.number().nullable().default(null),
  roce_v2_gid_index: nullableInt.default(null),
});

/** A fabric attachment; `ports` defaults to port 1 of each adapter. */
export const FabricSchema = z.object({
  fabric: z.string().min(1),
  hcas: z.array(z.string().min(1)).min(1),
  rate_gbps: z.number().nullable().default(null),
  ports: z.array(FabricPortSchema).optional(),
});

/** An allocation: GPUs held by one shard of one replica. */
export const AllocationSchema = z.object({
  replica_id: z.string().min(1),
  shard_id: z.string().min(1),
  deployment: z.string().nullable().optional(),
  gpu_indices: z.array(z.number().int().min(0)).min(1),
});

/** One node of the cluster file. */
export const NodeSchema = z.object({
  id: z.string().min(1),
  hostname: z.string().optional(),
  mgmt_addr: z.string().default(""),
  mgmt_interface: z.string().regex(
    /^[A-Za-z0-9_.:@-]{1,15}$/,
    "must be an interface name such as eth0",
  )
    .nullable().default(null),
  state: z.enum(NODE_STATES as [string, ...string[]]).default("ready"),
  labels: z.record(z.string(), z.string()).default({}),
  gpus: z.array(GpuSchema).default([]),
  fabrics: z.array(FabricSchema).default([]),
  allocations: z.array(AllocationSchema).default([]),
  engine_versions: z.record(z.string(), z.string()).default({}),
  // The heartbeat's `model_cache`; what a hand-written file has no use for may be left out.
  model_cache: ModelCacheReportSchema.partial({ omitted: true, evicted: true }).optional(),
});

/** The cluster file. */
export const ClusterFileSchema = z.object({ nodes: z.array(NodeSchema) });

/** Raised for a cluster file that cannot be used; the message lists each bad field. */
export class ClusterFileError extends Error {
  /** Each problem with its path. */
  readonly issues: InputIssue[];
  /** Creates the error. */
  constructor(where: string, issues: InputIssue[]) {
    super(
      `Cannot use cluster file ${where}:\n${formatIssues(issues)}`,
    );
    this.name = "ClusterFileError";
    this.issues = issues;
  }
}

/** A cluster file's nodes, and the model caches of those that report one. */
export interface ParsedCluster {
  /** The nodes, as placement sees them. */
  nodes: ClusterNode[];
  /** Node id → its model cache as its agent would report it; a node without one is absent. */
  caches: Map<string, ModelCacheReport>;
}

/**
 * Parses and checks a cluster file: the schema, then consistency (unique node
 * ids and GPU indices, allocations naming GPUs that exist, no GPU allocated
 * twice).
 *
 * @throws {ClusterFileError} Naming every bad field.
 */
export function parseClusterFile(text: string, where: string): ClusterNode[] {
  return parseCluster(text, where).nodes;
}

/**
 * {@link parseClusterFile} with the nodes' model caches (`model_cache`), each
 * revision listed once per node.
 *
 * @throws {ClusterFileError} Naming every bad field.
 */
export function parseCluster(text: string, where: string): ParsedCluster {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ClusterFileError(where, [{
      path: [],
      message: `not valid JSON: ${errorMessage(e)}`,
    }]);
  }
  const parsed = ClusterFileSchema.safeParse(raw);
  if (!parsed.success) throw new ClusterFileError(where, zodIssues(parsed.error));
  const issues: InputIssue[] = [];
  const ids = new Set<string>();
  const caches = new Map<string, ModelCacheReport>();
  const nodes = parsed.data.nodes.map((n, i): ClusterNode => {
    if (n.model_cache !== undefined) {
      const { omitted = 0, evicted = [], ...cache } = n.model_cache;
      caches.set(n.id, { ...cache, omitted, evicted });
      const listed = new Set<string>();
      cache.revisions.forEach((r, j) => {
        const name = revisionName(r.repo, r.commit);
        if (listed.has(name)) {
          issues.push({
            path: ["nodes", i, "model_cache", "revisions", j],
            message: `revision ${name} appears twice`,
          });
        }
        listed.add(name);
      });
    }
    if (ids.has(n.id)) {
      issues.push({ path: ["nodes", i, "id"], message: `node id ${n.id} appears twice` });
    }
    ids.add(n.id);
    const indices = new Set<number>();
    n.gpus.forEach((g, j) => {
      if (indices.has(g.index)) {
        issues.push({
          path: ["nodes", i, "gpus", j, "index"],
          message: `GPU index ${g.index} appears twice`,
        });
      }
      indices.add(g.index);
    });
    const fabricNames = new Set<string>();
    n.fabrics.forEach((f, j) => {
      if (fabricNames.has(f.fabric)) {
        issues.push({
          path: ["nodes", i, "fabrics", j, "fabric"],
          message: `fabric ${f.fabric} appears twice`,
        });
      }
      fabricNames.add(f.fabric);
    });
    const taken = new Map<number, string>();
    n.allocations.forEach((a, j) => {
      for (const gi of a.gpu_indices) {
        const at = ["nodes", i, "allocations", j, "gpu_indices"];
        if (!indices.has(gi)) {
          issues.push({ path: at, message: `GPU ${gi} does not exist on node ${n.id}` });
        }
        const other = taken.get(gi);
        if (other !== undefined) {
          issues.push({ path: at, message: `GPU ${gi} is already allocated to shard ${other}` });
        }
        taken.set(gi, a.shard_id);
      }
    });
    const fabrics: FabricAttachment[] = n.fabrics.map((f) => ({
      fabric: f.fabric,
      hcas: f.hcas,
      rate_gbps: f.rate_gbps,
      ports: f.ports ??
        f.hcas.map((hca) => ({
          hca,
          port: 1,
          link_layer: null,
          rate_gbps: f.rate_gbps,
          roce_v2_gid_index: null,
        })),
    }));
    return {
      id: n.id,
      hostname: n.hostname ?? n.id,
      mgmt_addr: n.mgmt_addr,
      mgmt_interface: n.mgmt_interface,
      state: n.state as ClusterNode["state"],
      labels: n.labels,
      gpus: n.gpus,
      fabrics,
      allocations: n.allocations,
      engine_versions: n.engine_versions,
    };
  });
  if (issues.length > 0) throw new ClusterFileError(where, issues);
  return { nodes, caches };
}
