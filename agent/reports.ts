/**
 * What the agent tells the control plane, built from what discovery and the
 * supervisor know (design §4, §10). Pure: the mapping from internal types to
 * the protocol's wire shapes, clipped to the protocol's bounds so that one
 * odd value (a huge log line, a port that is not a number) can never make
 * a whole heartbeat invalid.
 *
 * @module
 */
import type { GpuReportSchema, RegisterRequest, ShardReport } from "../protocol/agent_protocol.ts";
import { AGENT_PROTOCOL_VERSION, type LoadMetricNames } from "../protocol/agent_protocol.ts";
import { REPORT_BOUNDS as B } from "../protocol/report_bounds.ts";
import type { FabricAttachment, Gpu, Inventory } from "../discovery/types.ts";
import type { z } from "zod";
import { createHash } from "node:crypto";

/** A GPU as the protocol carries it. */
export type GpuReport = z.infer<typeof GpuReportSchema>;
/** A fabric attachment as the protocol carries it. */
export type FabricReport = RegisterRequest["fabrics"][number];

function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max - 1) + "…";
}

function clipOrNull(s: string | null | undefined, max: number): string | null {
  return typeof s === "string" ? clip(s, max) : null;
}

function finiteOrNull(n: unknown): number | null {
  return typeof n === "number" && Number.isFinite(n) ? n : null;
}

function intOrNull(n: unknown): number | null {
  return typeof n === "number" && Number.isInteger(n) ? n : null;
}

/** A shard's failures in a row as the protocol carries them; null unless both counts are sane. */
function crashLoopReport(c: ShardReport["crash_loop"]): ShardReport["crash_loop"] {
  if (c === null || c === undefined) return null;
  const ok = (n: number) => Number.isInteger(n) && n >= 1;
  return ok(c.failures) && ok(c.limit) ? { failures: c.failures, limit: c.limit } : null;
}

/** Load metric names cut to the protocol's bounds. */
function metricNamesReport(m: LoadMetricNames): LoadMetricNames {
  const list = (names: string[]) => names.slice(0, B.metricNames).map((n) => clip(n, B.metricName));
  return {
    running: list(m.running),
    waiting: list(m.waiting),
    kv_cache_usage: list(m.kv_cache_usage),
  };
}

/** A supervisor's shard report as a heartbeat carries it: clipped to the wire's bounds, its engine left out. */
export function shardReport(s: ShardReport): ShardReport {
  const port = Number.isInteger(s.port) && s.port >= 0 && s.port <= 65535 ? s.port : 0;
  const failure = s.last_failure;
  return {
    id: clip(s.id, B.shardId),
    state: s.state,
    since: finiteOrNull(s.since) ?? 0,
    pid: intOrNull(s.pid),
    rendezvous_port: typeof s.rendezvous_port === "number" && Number.isInteger(s.rendezvous_port) &&
        s.rendezvous_port >= 1 && s.rendezvous_port <= 65535
      ? s.rendezvous_port
      : null,
    port,
    serves_http: s.serves_http === true,
    progress: s.progress === null ? null : {
      percent: finiteOrNull(s.progress.percent),
      done: finiteOrNull(s.progress.done),
      total: finiteOrNull(s.progress.total),
    },
    restarts: Number.isInteger(s.restarts) && s.restarts >= 0 ? s.restarts : 0,
    crash_loop: crashLoopReport(s.crash_loop),
    adopted: s.adopted === true,
    last_failure: failure === null ? null : {
      at: finiteOrNull(failure.at) ?? 0,
      reason: clip(failure.reason, B.reason),
      exit_code: intOrNull(failure.exit_code),
      signal: clipOrNull(failure.signal, B.signal),
      log_tail: failure.log_tail.slice(-B.logTailLines).map((l) => clip(l, B.logLine)),
      permanent: failure.permanent === true,
      ...(failure.kind === undefined ? {} : { kind: clip(failure.kind, B.failureKind) }),
    },
    spec_hash: clip(s.spec_hash, B.specHash),
    notice: s.notice === null || s.notice === undefined
      ? null
      : { at: finiteOrNull(s.notice.at) ?? 0, message: clip(s.notice.message, B.notice) },
    load_metrics: s.load_metrics === null || s.load_metrics === undefined
      ? null
      : metricNamesReport(s.load_metrics),
    cold_start: coldStartReport(s.cold_start),
    download: downloadReport(s.download),
  };
}

/**
 * A cold-start receipt with its download's sources cut to the wire's bounds
 * (its phases are bounded by construction: one per phase of a closed list).
 */
function coldStartReport(r: ShardReport["cold_start"]): ShardReport["cold_start"] {
  if (r === null || r === undefined) return null;
  const sources = r.download?.sources;
  if (r.download === null || sources === undefined) return r;
  return {
    ...r,
    download: {
      ...r.download,
      sources: sources.filter((x) => x.name !== "").slice(0, B.downloadSources)
        .map((x) => ({ ...x, name: clip(x.name, B.downloadSource) })),
    },
  };
}

/** A shard's model download cut to the wire's bounds; null when absent or its counts are not sane. */
function downloadReport(d: ShardReport["download"]): ShardReport["download"] {
  if (d === null || d === undefined) return null;
  const count = (n: number) => Number.isSafeInteger(n) && n >= 0;
  if (!count(d.bytes_done) || !count(d.bytes_total) || !count(d.failures)) return null;
  const rate = finiteOrNull(d.rate_bytes_per_second);
  const eta = finiteOrNull(d.eta_seconds);
  return {
    model: clip(d.model, B.downloadModel),
    commit: d.commit === null ? null : clip(d.commit, B.downloadCommit),
    bytes_done: d.bytes_done,
    bytes_total: d.bytes_total,
    rate_bytes_per_second: rate === null || rate < 0 ? 0 : rate,
    eta_seconds: eta === null || eta < 0 ? null : eta,
    sources: d.sources.filter((x) => x !== "").slice(0, B.downloadSources).map((x) =>
      clip(x, B.downloadSource)
    ),
    last_error: clipOrNull(d.last_error, B.reason),
    failures: d.failures,
  };
}

/** A discovered GPU as the protocol carries it. */
export function gpuReport(g: Gpu): GpuReport {
  const cc = g.compute_capability !== null && /^\d+\.\d+$/.test(g.compute_capability)
    ? g.compute_capability
    : null;
  return {
    index: g.index,
    uuid: clipOrNull(g.uuid, B.gpuUuid),
    name: clipOrNull(g.name, B.gpuName),
    class: clipOrNull(g.class, B.gpuClass),
    memory_total_mb: intOrNull(g.memory_total_mb),
    memory_used_mb: intOrNull(g.memory_used_mb),
    compute_capability: cc,
    numa_node: intOrNull(g.numa_node),
    pci_bus_id: clipOrNull(g.pci_bus_id, B.pciBusId),
    driver_version: clipOrNull(g.driver_version, B.driverVersion),
    cuda_version: clipOrNull(g.cuda_version, B.cudaVersion),
    nvlink_peers: g.nvlink_peers.slice(0, B.nvlinkPeers),
    health: {
      ecc_errors: intOrNull(g.health.ecc_errors),
      temperature_c: finiteOrNull(g.health.temperature_c),
      problems: g.health.problems.slice(0, B.gpuProblems).map((p) => clip(p, B.gpuProblem)),
    },
  };
}

/** A fabric attachment as the protocol carries it. */
export function fabricReport(f: FabricAttachment): FabricReport {
  return {
    fabric: f.fabric,
    hcas: f.hcas.slice(0, B.hcas),
    ports: f.ports.slice(0, B.fabricPorts).map((p) => ({
      hca: p.hca,
      port: p.port,
      link_layer: p.link_layer,
      rate_gbps: finiteOrNull(p.rate_gbps),
      roce_v2_gid_index: intOrNull(p.roce_v2_gid_index),
    })),
    rate_gbps: finiteOrNull(f.rate_gbps),
  };
}

/** Who this node is, besides its hardware. */
export interface NodeIdentity {
  /** The node id (default: the hostname). */
  nodeId: string;
  /** The host name. */
  hostname: string;
  /** The management address other nodes and the control plane reach it on. */
  mgmtAddr: string;
  /** The management interface (NCCL's bootstrap interface, design §5.3). */
  mgmtInterface: string | null;
  /** The local API's URL, when it listens. */
  agentUrl: string | null;
  /** Operator labels (node selectors, design §6.1). */
  labels: Record<string, string>;
  /** This agent's version. */
  agentVersion: string;
}

/** The registration request for a node with this inventory (design §4, §10). */
export function registerRequest(
  who: NodeIdentity,
  inventory: Pick<Inventory, "gpus" | "fabrics">,
  engineVersions: Record<string, string>,
): RegisterRequest {
  return {
    protocol: AGENT_PROTOCOL_VERSION,
    node_id: who.nodeId,
    hostname: clip(who.hostname, 253),
    mgmt_addr: who.mgmtAddr,
    mgmt_interface: who.mgmtInterface,
    agent_url: who.agentUrl,
    labels: { ...who.labels },
    gpus: inventory.gpus.slice(0, 1024).map(gpuReport),
    fabrics: inventory.fabrics.slice(0, 64).map(fabricReport),
    agent_version: clip(who.agentVersion, 64),
    engine_versions: Object.fromEntries(
      Object.entries(engineVersions).map(([k, v]) => [clip(k, 64), clip(v, 64)]),
    ),
  };
}

/**
 * The GPUs to report after a rediscovery (design §5.1). When nvidia-smi
 * worked, its fresh list. When it stopped working on a node where it worked
 * before, the GPUs do not vanish: they are the last good list, each marked
 * with a problem, so none is placed on a node whose driver is not answering.
 */
export function gpusAfterRediscovery(lastGood: readonly Gpu[], fresh: Inventory): Gpu[] {
  if (fresh.source === "nvidia-smi" || lastGood.length === 0) return fresh.gpus;
  const why = clip(
    `GPU discovery failed (${fresh.source}): ${fresh.problems[0] ?? "no detail"}`,
    1024,
  );
  return lastGood.map((g) => ({
    ...g,
    health: { ...g.health, problems: [...g.health.problems, why] },
  }));
}

/**
 * A digest of what a registration says about the node, without what changes
 * by itself (GPU memory in use, temperature, health: heartbeats carry
 * those). Equal digests mean there is nothing new to register.
 */
export function registrationFingerprint(req: RegisterRequest): string {
  const stable = {
    ...req,
    gpus: req.gpus.map((g) => ({ ...g, memory_used_mb: null, health: null })),
  };
  return createHash("sha256").update(JSON.stringify(stable)).digest("hex").slice(0, 32);
}
