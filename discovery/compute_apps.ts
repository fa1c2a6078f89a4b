/**
 * `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv`:
 * who holds memory on which GPU (design §5.1).
 *
 * @module
 */
import { parseCsvTable, smiNumber, smiValue } from "./nvidia_smi_csv.ts";
import type { Gpu } from "./types.ts";

/** The fields llmgw asks for. */
export const COMPUTE_APPS_FIELDS: readonly string[] = ["gpu_uuid", "pid", "used_memory"];

/** One process holding GPU memory. */
export interface ComputeApp {
  /** UUID of the GPU the process uses. */
  gpu_uuid: string;
  /** `null` when nvidia-smi cannot see it (another PID namespace prints `[N/A]`). */
  pid: number | null;
  /** Memory it holds in MiB; `null` when unknown. */
  used_memory_mb: number | null;
}

const APP_FIELD_ALIASES: Record<string, string> = {
  used_gpu_memory: "used_memory",
  uuid: "gpu_uuid",
};

/** Parsed compute apps and rows that could not be read. */
export interface ComputeAppsResult {
  /** The processes found. */
  apps: ComputeApp[];
  /** Problems found while reading, in words; never fatal. */
  problems: string[];
}

/**
 * Parses the compute-apps CSV. An empty table (header only) or nvidia-smi's
 * "No running processes found" means no apps.
 *
 * @throws {NvidiaSmiParseError} When the output has no header row.
 */
export function parseComputeApps(text: string): ComputeAppsResult {
  const kept = text.split(/\r?\n/).filter((l) => !/^\s*No running .*processes found/i.test(l));
  if (kept.every((l) => l.trim() === "")) return { apps: [], problems: [] };
  const table = parseCsvTable(kept.join("\n"), "nvidia-smi --query-compute-apps output");
  const problems = [...table.problems];
  // nvidia-smi prints some fields under other names than the query used
  // (`used_memory` comes back as `used_gpu_memory [MiB]`).
  const at = new Map(table.columns.map((c, i) => [APP_FIELD_ALIASES[c.field] ?? c.field, i]));
  const uuidAt = at.get("gpu_uuid");
  if (uuidAt === undefined) {
    problems.push("nvidia-smi --query-compute-apps output has no gpu_uuid column");
    return { apps: [], problems };
  }
  const apps: ComputeApp[] = [];
  for (const row of table.rows) {
    const uuid = smiValue(row.cells[uuidAt]);
    if (uuid.kind !== "value") {
      problems.push(`nvidia-smi --query-compute-apps line ${row.line}: GPU UUID is ${uuid.text}`);
      continue;
    }
    const numberOf = (field: string): number | null => {
      const i = at.get(field);
      if (i === undefined) return null;
      const v = smiValue(row.cells[i]);
      return v.kind === "value" ? smiNumber(v.text, table.columns[i].unit) : null;
    };
    apps.push({
      gpu_uuid: uuid.text,
      pid: numberOf("pid"),
      used_memory_mb: numberOf("used_memory"),
    });
  }
  return { apps, problems };
}

/** What counts as ours when judging who holds GPU memory. */
export interface OwnershipOptions {
  /** Pids of processes llmgw runs (engine process groups); their memory is expected. */
  ownPids?: ReadonlySet<number>;
  /**
   * Memory in use that no listed process explains (processes in another
   * container are invisible to nvidia-smi) above which a GPU is not free.
   * Default 1024 MiB: a display server's few hundred MiB stays below it.
   */
  unattributedMemoryLimitMiB?: number;
}

/**
 * Adds health problems for memory held by processes that are not llmgw's
 * (design §5.1): a card someone else is using is not free in any useful sense.
 * Returns node-level problems (apps on GPUs that nvidia-smi did not list).
 */
export function applyComputeApps(
  /** The GPUs, sorted by index. */
  gpus: Gpu[],
  /** The processes found. */
  apps: ComputeApp[],
  options: OwnershipOptions = {},
): string[] {
  const own = options.ownPids ?? new Set<number>();
  const limit = options.unattributedMemoryLimitMiB ?? 1024;
  const byUuid = new Map(gpus.filter((g) => g.uuid !== null).map((g) => [g.uuid!, g]));
  const listed = new Set<Gpu>();
  const problems: string[] = [];
  for (const app of apps) {
    const gpu = byUuid.get(app.gpu_uuid);
    if (gpu === undefined) {
      problems.push(
        `a process holds memory on GPU ${app.gpu_uuid}, which --query-gpu did not list`,
      );
      continue;
    }
    listed.add(gpu);
    if (app.pid !== null && own.has(app.pid)) continue;
    const who = app.pid === null ? "a process nvidia-smi cannot identify" : `pid ${app.pid}`;
    const mem = app.used_memory_mb === null ? "memory" : `${app.used_memory_mb} MiB`;
    gpu.health.problems.push(`memory held by a process that is not llmgw's: ${who} uses ${mem}`);
  }
  for (const gpu of gpus) {
    if (listed.has(gpu) || gpu.memory_used_mb === null) continue;
    if (gpu.memory_used_mb > limit) {
      gpu.health.problems.push(
        `${gpu.memory_used_mb} MiB in use by processes nvidia-smi does not list (another container?)`,
      );
    }
  }
  return problems;
}
