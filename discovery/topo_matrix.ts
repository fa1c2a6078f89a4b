/**
 * `nvidia-smi topo -m`: NVLink peers and NUMA affinity per GPU (design §5.1).
 *
 * @module
 */
import { clip, stripAnsi } from "./nvidia_smi_csv.ts";

/** What the matrix says about one GPU. */
export interface TopoGpu {
  /** GPUs this one reaches over NVLink (`NV#` cells), sorted. */
  nvlinkPeers: number[];
  /** The "NUMA Affinity" column; `null` when absent or N/A. */
  numaAffinity: number | null;
}

/** The parsed matrix: per GPU index, plus rows that could not be read. */
export interface TopoMatrix {
  /** The GPUs, sorted by index. */
  gpus: Map<number, TopoGpu>;
  /** Problems found while reading, in words; never fatal. */
  problems: string[];
}

/** Raised when the text is not a topology matrix at all. */
export class TopoParseError extends Error {
  /** Creates the error; `message` says what was wrong. */
  constructor(message: string) {
    super(message);
    this.name = "TopoParseError";
  }
}

/** A device column label: GPUs, NICs (`NIC0`, or the device name on older drivers). */
const DEVICE_LABEL = /^(GPU\d+|NIC\d+|mlx\d+_\S+|[a-z]+\d*_\d+|eth\S*|ib\S*)$/i;

/**
 * Parses the connection matrix. Only `NV#` cells between GPUs are NVLink:
 * `X`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`, NIC rows and columns and the CPU and
 * NUMA affinity columns are not. Works on tab- or space-separated copies.
 *
 * @throws {TopoParseError} When there is no header row naming GPU0.
 */
export function parseTopoMatrix(text: string): TopoMatrix {
  const lines = stripAnsi(text).split(/\r?\n/);
  const headerAt = lines.findIndex((l) => /^\s+GPU0\b/.test(l) || /^\s*GPU0\s+GPU1\b/.test(l));
  if (headerAt === -1) {
    throw new TopoParseError("Cannot parse nvidia-smi topo -m: no header row starting with GPU0");
  }
  const headerTokens = lines[headerAt].trim().split(/\s+/);
  const devices: string[] = [];
  for (const t of headerTokens) {
    if (!DEVICE_LABEL.test(t)) break;
    devices.push(t);
  }
  // "CPU Affinity  NUMA Affinity  GPU NUMA ID" follow the devices; the NUMA
  // affinity is the second value after the device cells.
  const rest = headerTokens.slice(devices.length).join(" ");
  const hasCpuAffinity = /CPU Affinity/i.test(rest);
  const hasNumaAffinity = /NUMA Affinity/i.test(rest);
  const gpus = new Map<number, TopoGpu>();
  const problems: string[] = [];
  for (let i = headerAt + 1; i < lines.length; i++) {
    const line = lines[i];
    if (/^\s*Legend:/i.test(line)) break;
    const m = /^\s*GPU(\d+)\s+(.*)$/.exec(line);
    if (m === null) continue;
    const index = Number(m[1]);
    const cells = m[2].trim().split(/\s+/);
    if (cells.length < devices.length) {
      if (problems.length >= 20) continue;
      problems.push(
        `nvidia-smi topo -m line ${i + 1}: expected ${devices.length} cells, got ${cells.length}: ${
          clip(line)
        }`,
      );
      continue;
    }
    const peers: number[] = [];
    devices.forEach((label, col) => {
      const peer = /^GPU(\d+)$/i.exec(label);
      if (peer !== null && /^NV\d+$/i.test(cells[col]) && Number(peer[1]) !== index) {
        peers.push(Number(peer[1]));
      }
    });
    let numa: number | null = null;
    if (hasNumaAffinity) {
      const v = cells[devices.length + (hasCpuAffinity ? 1 : 0)];
      if (v !== undefined && /^\d+$/.test(v)) numa = Number(v);
    }
    gpus.set(index, { nvlinkPeers: peers.sort((a, b) => a - b), numaAffinity: numa });
  }
  if (gpus.size === 0) {
    problems.push("nvidia-smi topo -m: header found but no GPU rows");
  }
  return { gpus, problems };
}
