/**
 * Discovery's shell: runs nvidia-smi and reads sysfs through the seams of
 * design §5.5, then hands the text to the pure parsers. Never throws for bad
 * hardware or bad output: every failure is a problem in the inventory.
 *
 * @module
 */
import { applyComputeApps, COMPUTE_APPS_FIELDS, parseComputeApps } from "./compute_apps.ts";
import { attachFabrics, type FabricConfig } from "./fabrics.ts";
import {
  GPU_QUERY_FIELDS,
  invalidQueryField,
  parseCudaVersion,
  parseGpuQuery,
} from "./gpu_query.ts";
import { readInfinibandAdapters } from "./infiniband.ts";
import { clip } from "./nvidia_smi_csv.ts";
import { CommandError, type CommandOutput, runCommand } from "./run_command.ts";
import { isFailure, readNumaNode } from "./sysfs.ts";
import { parseTopoMatrix } from "./topo_matrix.ts";
import type { Gpu, GpuSource, Inventory } from "./types.ts";
import { errorMessage } from "../text/error_message.ts";

/** Where discovery reads from, and what it counts as ours. */
export interface DiscoveryOptions {
  /** The nvidia-smi executable (design §5.5 seam). Default `nvidia-smi` on PATH. */
  nvidiaSmi?: string;
  /** The sysfs root (design §5.5 seam). Default `/sys`. */
  sysfsRoot?: string;
  /** The operator's fabric assignment (design §5.2). */
  fabrics?: FabricConfig;
  /** Pids of llmgw's own engine processes, whose GPU memory is expected. */
  ownPids?: ReadonlySet<number>;
  /** Per nvidia-smi call. Default 10 s. */
  timeoutMs?: number;
  /** See {@link OwnershipOptions.unattributedMemoryLimitMiB}. */
  unattributedMemoryLimitMiB?: number;
}

type Run = (args: string[]) => Promise<CommandOutput | CommandError>;

/** Discovers GPUs, adapters and fabric attachments of this node. */
export async function discoverInventory(options: DiscoveryOptions = {}): Promise<Inventory> {
  const sysfsRoot = options.sysfsRoot ?? "/sys";
  const [gpuPart, ib] = await Promise.all([
    discoverGpus(options, sysfsRoot),
    readInfinibandAdapters(sysfsRoot),
  ]);
  const { fabrics, warnings } = attachFabrics(ib.hcas, options.fabrics ?? {});
  const hcaProblems = ib.hcas.flatMap((h) => h.problems.map((p) => `${h.name}: ${p}`));
  return {
    gpus: gpuPart.gpus,
    hcas: ib.hcas,
    fabrics,
    source: gpuPart.source,
    problems: [...gpuPart.problems, ...ib.problems, ...hcaProblems],
    warnings,
  };
}

async function discoverGpus(
  options: DiscoveryOptions,
  sysfsRoot: string,
): Promise<{ gpus: Gpu[]; source: GpuSource; problems: string[] }> {
  const smi = options.nvidiaSmi ?? "nvidia-smi";
  const run: Run = (args) =>
    runCommand(smi, args, { timeoutMs: options.timeoutMs }).catch((e: unknown) => {
      if (e instanceof CommandError) return e;
      throw e;
    });
  const problems: string[] = [];
  const [query, apps, topo, version] = await Promise.all([
    queryGpus(run, problems),
    run([`--query-compute-apps=${COMPUTE_APPS_FIELDS.join(",")}`, "--format=csv"]),
    run(["topo", "-m"]),
    run(["--version"]),
  ]);
  if (query instanceof CommandError) {
    if (query.kind === "not-found") {
      return { gpus: [], source: "none", problems: [`no NVIDIA backend: ${query.message}`] };
    }
    return { gpus: [], source: "nvidia-smi-failed", problems: [`nvidia-smi: ${query.message}`] };
  }
  if (query === null) return { gpus: [], source: "nvidia-smi-failed", problems };
  let text = query.stdout;
  if (query.code !== 0 && text !== "" && !text.endsWith("\n")) {
    // A run that died mid-line: the last row may be cut inside a cell.
    problems.push("nvidia-smi --query-gpu output ends in an incomplete line; it was ignored");
    text = text.slice(0, text.lastIndexOf("\n") + 1);
  }
  const parsed = safely(() => parseGpuQuery(text), problems);
  if (parsed === null) return { gpus: [], source: "nvidia-smi-failed", problems };
  if (query.code !== 0) problems.push(`nvidia-smi --query-gpu exited ${describeExit(query)}`);
  problems.push(...parsed.problems);
  const gpus = parsed.gpus;

  const appsText = usableOutput(apps, "--query-compute-apps", problems);
  const appsResult = appsText === null ? null : safely(() => parseComputeApps(appsText), problems);
  if (appsResult !== null) {
    problems.push(...appsResult.problems);
    problems.push(...applyComputeApps(gpus, appsResult.apps, options));
  } else {
    problems.push("GPU processes unknown: memory held by other processes cannot be detected");
  }

  const topoText = usableOutput(topo, "topo -m", problems);
  const matrix = topoText === null ? null : safely(() => parseTopoMatrix(topoText), problems);
  if (matrix !== null) problems.push(...matrix.problems);

  let cuda = version instanceof CommandError ? null : parseCudaVersion(version.stdout);
  if (cuda === null) {
    const q = await run(["-q", "-d", "COMPUTE"]);
    cuda = q instanceof CommandError ? null : parseCudaVersion(q.stdout);
  }

  for (const gpu of gpus) {
    gpu.cuda_version = cuda;
    const topoGpu = matrix?.gpus.get(gpu.index);
    gpu.nvlink_peers = (topoGpu?.nvlinkPeers ?? []).filter((p) => gpus.some((g) => g.index === p));
    if (gpu.pci_bus_id !== null) {
      const numa = await readNumaNode(`${sysfsRoot}/bus/pci/devices/${gpu.pci_bus_id}/numa_node`);
      if (!isFailure(numa)) gpu.numa_node = numa;
      else if (numa.error !== "missing") {
        problems.push(`GPU ${gpu.index}: numa_node in sysfs: ${numa.error}`);
      }
    }
    gpu.numa_node ??= topoGpu?.numaAffinity ?? null;
  }
  return { gpus, source: "nvidia-smi", problems };
}

/**
 * Runs the GPU query, dropping fields this driver does not know (it answers
 * `Field "x" is not a valid field to query.` and exits 2), so one unsupported
 * field never costs the whole GPU list.
 */
async function queryGpus(
  run: Run,
  problems: string[],
): Promise<CommandOutput | CommandError | null> {
  const fields = [...GPU_QUERY_FIELDS];
  while (true) {
    const out = await run([`--query-gpu=${fields.join(",")}`, "--format=csv"]);
    if (out instanceof CommandError || out.code === 0) return out;
    const bad = invalidQueryField(out.stdout + out.stderr);
    if (bad === null || !fields.includes(bad) || bad === "index") {
      // Output with a header is worth reading even from a failing run (one
      // lost GPU makes nvidia-smi exit non-zero but the others are listed).
      if (/^\s*index\b/m.test(out.stdout)) return out;
      problems.push(
        `nvidia-smi --query-gpu exited ${describeExit(out)}: ${
          clip(out.stderr || out.stdout, 200) || "no output"
        }`,
      );
      return null;
    }
    problems.push(`nvidia-smi does not support field ${bad}; it is reported as unknown`);
    fields.splice(fields.indexOf(bad), 1);
  }
}

function usableOutput(
  out: CommandOutput | CommandError,
  what: string,
  /** Problems found while reading, in words; never fatal. */
  problems: string[],
): string | null {
  if (out instanceof CommandError) {
    problems.push(`nvidia-smi ${what}: ${out.message}`);
    return null;
  }
  if (out.code !== 0) {
    problems.push(
      `nvidia-smi ${what} exited ${describeExit(out)}: ${clip(out.stderr || out.stdout, 200)}`,
    );
    return null;
  }
  return out.stdout;
}

function describeExit(out: CommandOutput): string {
  return out.signal !== null ? `on signal ${out.signal}` : `with code ${out.code}`;
}

function safely<T>(parse: () => T, problems: string[]): T | null {
  try {
    return parse();
  } catch (e) {
    problems.push(errorMessage(e));
    return null;
  }
}
