/**
 * The bounds of what an agent reports (registration and heartbeats),
 * declared once: the schemas in protocol/agent_protocol.ts check them and
 * agent/reports.ts clips to them, so one odd value (a huge log line, a
 * hundred metric names) is cut to fit instead of making a whole heartbeat
 * invalid.
 *
 * @module
 */

/** The most characters or items of each bounded report field. */
export const REPORT_BOUNDS = {
  /** A shard id. */
  shardId: 256,
  /** A failure's reason. */
  reason: 4096,
  /** A failure's kind, e.g. insufficient_disk. */
  failureKind: 64,
  /** A signal's name, e.g. SIGKILL. */
  signal: 32,
  /** Lines of a failure's log tail. */
  logTailLines: 200,
  /** One log line. */
  logLine: 8192,
  /** A shard's spec hash. */
  specHash: 128,
  /** A shard's notice. */
  notice: 1024,
  /** Candidate names of one load metric. */
  metricNames: 8,
  /** One metric name. */
  metricName: 128,
  /** A GPU's uuid. */
  gpuUuid: 128,
  /** A GPU's product name. */
  gpuName: 256,
  /** A GPU's class. */
  gpuClass: 64,
  /** A GPU's PCI bus id. */
  pciBusId: 32,
  /** The driver's version. */
  driverVersion: 64,
  /** The CUDA version. */
  cudaVersion: 32,
  /** NVLink peers of one GPU. */
  nvlinkPeers: 1024,
  /** Health problems of one GPU. */
  gpuProblems: 64,
  /** One health problem. */
  gpuProblem: 1024,
  /** HCAs of one fabric attachment. */
  hcas: 64,
  /** Ports of one fabric attachment. */
  fabricPorts: 128,
  /** A downloading shard's model (hub id or local path). */
  downloadModel: 1024,
  /** The commit it downloads. */
  downloadCommit: 64,
  /** Sources serving one download at once. */
  downloadSources: 16,
  /** One source's name. */
  downloadSource: 256,
  /** Revisions of a model cache report (the most recently used; the rest counted). */
  cacheRevisions: 256,
  /** A cached revision's hub id. */
  cacheRepo: 1024,
  /** Evictions one heartbeat carries (older ones wait for the next). */
  cacheEvictions: 64,
  /** An engine cache directory's engine or key name. */
  engineCacheKey: 256,
  /** Pulls failed for good that one heartbeat names (the rest wait for the next). */
  pullFailures: 64,
} as const;
