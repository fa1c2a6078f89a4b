/**
 * `nvidia-smi --query-gpu=… --format=csv` rows to GPUs (design §5.1).
 *
 * @module
 */
import { gpuClass } from "./gpu_class.ts";
import { clip, type CsvColumn, parseCsvTable, smiNumber, smiValue } from "./nvidia_smi_csv.ts";
import type { Gpu } from "./types.ts";
import { errorMessage } from "../text/error_message.ts";

/** The fields llmgw asks for, in the order it asks. */
export const GPU_QUERY_FIELDS: readonly string[] = [
  "index",
  "uuid",
  "name",
  "memory.total",
  "memory.used",
  "compute_cap",
  "pci.bus_id",
  "driver_version",
  "temperature.gpu",
  "ecc.errors.uncorrected.volatile.total",
];

/** Other spellings nvidia-smi accepts for the same fields. */
const FIELD_ALIASES: Record<string, string> = {
  gpu_name: "name",
  /** UUID of the GPU the process uses. */
  gpu_uuid: "uuid",
  gpu_bus_id: "pci.bus_id",
  "compute_capability": "compute_cap",
};

/** The result of reading a query-gpu table: GPUs and node-level problems. */
export interface GpuQueryResult {
  /** The GPUs, sorted by index. */
  gpus: Gpu[];
  /** Problems found while reading, in words; never fatal. */
  problems: string[];
}

/**
 * Normalises a PCI bus id to the form sysfs uses: lower-case with a 4-digit
 * domain (`00000000:18:00.0` → `0000:18:00.0`). Returns `null` when the text
 * is not a bus id.
 */
export function normalizePciBusId(text: string): string | null {
  const m = /^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/.exec(
    text.trim(),
  );
  if (m === null) return null;
  const domain = (m[1] ?? "0").toLowerCase().replace(/^0+/, "").padStart(4, "0");
  if (domain.length > 4) return null;
  return `${domain}:${m[2].toLowerCase()}:${m[3].toLowerCase()}.${m[4]}`;
}

/**
 * Parses the CSV output of `nvidia-smi --query-gpu`. Every GPU whose index
 * can be read is returned; cells in an error state become health problems,
 * unknown cells become `null`, and unreadable rows become node problems.
 *
 * @throws {NvidiaSmiParseError} When the output has no header row.
 */
export function parseGpuQuery(text: string): GpuQueryResult {
  const lost = inaccessibleGpus(text);
  const rest = text.split(/\r?\n/).filter((l) => !LOST_GPU_LINE.test(l)).join("\n");
  const table = parseCsvTable(rest, "nvidia-smi --query-gpu output");
  const problems = [...lost, ...table.problems];
  const at = columnIndex(table.columns);
  if (!at.has("index")) {
    problems.push("nvidia-smi --query-gpu output has no index column: GPUs cannot be identified");
    return { gpus: [], problems };
  }
  const gpus: Gpu[] = [];
  const seen = new Set<number>();
  for (const row of table.rows) {
    const gpuProblems: string[] = [];
    const cell = (field: string): { text: string; unit: string | null } | null => {
      const i = at.get(field);
      if (i === undefined) return null;
      const v = smiValue(row.cells[i]);
      if (v.kind === "unknown") return null;
      if (v.kind === "error") {
        gpuProblems.push(`nvidia-smi reports ${field} in an error state: ${v.text}`);
        return null;
      }
      return { text: v.text, unit: table.columns[i].unit };
    };
    const num = (field: string): number | null => {
      const c = cell(field);
      if (c === null) return null;
      const n = smiNumber(c.text, c.unit);
      if (n === null) gpuProblems.push(`${field} is not a number: ${clip(c.text, 40)}`);
      return n;
    };
    const index = num("index");
    if (index === null || !Number.isInteger(index) || index < 0) {
      problems.push(
        `nvidia-smi --query-gpu line ${row.line}: GPU index is missing or invalid; row skipped`,
      );
      continue;
    }
    if (seen.has(index)) {
      problems.push(`nvidia-smi --query-gpu line ${row.line}: GPU index ${index} appears twice`);
      continue;
    }
    seen.add(index);
    const name = cell("name")?.text ?? null;
    const memoryTotal = num("memory.total");
    const memoryUsed = num("memory.used");
    const cc = cell("compute_cap")?.text ?? null;
    if (cc !== null && !/^\d+\.\d+$/.test(cc)) {
      gpuProblems.push(`compute_cap is not of the form major.minor: ${clip(cc, 40)}`);
    }
    const busText = cell("pci.bus_id")?.text ?? null;
    const pciBusId = busText === null ? null : normalizePciBusId(busText);
    if (busText !== null && pciBusId === null) {
      problems.push(`GPU ${index}: pci.bus_id is not a PCI bus id: ${clip(busText, 40)}`);
    }
    const ecc = num("ecc.errors.uncorrected.volatile.total");
    if (ecc !== null && ecc > 0) {
      gpuProblems.push(`uncorrected ECC errors: ${ecc} (volatile count)`);
    }
    let cls: string | null = null;
    if (name !== null && memoryTotal !== null && memoryTotal > 0) {
      try {
        cls = gpuClass(name, memoryTotal);
      } catch (e) {
        gpuProblems.push(`class unknown: ${errorMessage(e)}`);
      }
    } else {
      gpuProblems.push("class unknown: nvidia-smi did not report the name and total memory");
    }
    gpus.push({
      index,
      uuid: cell("uuid")?.text ?? null,
      name,
      class: cls,
      memory_total_mb: memoryTotal,
      memory_used_mb: memoryUsed,
      compute_capability: cc !== null && /^\d+\.\d+$/.test(cc) ? cc : null,
      numa_node: null,
      pci_bus_id: pciBusId,
      driver_version: cell("driver_version")?.text ?? null,
      cuda_version: null,
      nvlink_peers: [],
      health: { ecc_errors: ecc, temperature_c: num("temperature.gpu"), problems: gpuProblems },
    });
  }
  gpus.sort((a, b) => a.index - b.index);
  return { gpus, problems };
}

function columnIndex(columns: CsvColumn[]): Map<string, number> {
  const at = new Map<string, number>();
  columns.forEach((c, i) => {
    const field = FIELD_ALIASES[c.field] ?? c.field;
    if (!at.has(field)) at.set(field, i);
  });
  return at;
}

/**
 * Reads which field nvidia-smi refused from its error message
 * (`Field "compute_cap" is not a valid field to query.`), so the query can be
 * retried without it instead of losing the whole GPU list.
 */
export function invalidQueryField(output: string): string | null {
  const m = /Field "([^"]+)" is not a valid field to query/.exec(output);
  return m === null ? null : m[1];
}

/**
 * Reads the CUDA version from `nvidia-smi --version`, `-q` or the plain table
 * header. Drivers from 610 print `CUDA version : Deprecated, see "CUDA UMD
 * version" instead` and then `CUDA UMD version : 13.3`.
 */
export function parseCudaVersion(output: string): string | null {
  const m = /CUDA(?: Driver| UMD)? Version\s*:\s*([0-9]+\.[0-9]+)/i.exec(output);
  return m === null ? null : m[1];
}

const LOST_GPU_LINE = /Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+):\s*(.+)/;

/** Reads lines where nvidia-smi says it cannot reach a GPU at all. */
export function inaccessibleGpus(output: string): string[] {
  const out: string[] = [];
  for (const m of output.matchAll(new RegExp(LOST_GPU_LINE, "g"))) {
    const bus = normalizePciBusId(m[1]) ?? m[1];
    out.push(`GPU at PCI ${bus} is inaccessible: ${clip(m[2], 80)}`);
  }
  return out;
}
