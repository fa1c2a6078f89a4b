/**
 * InfiniBand and RoCE adapters from `<sysfs>/class/infiniband` (design §5.2).
 *
 * @module
 */
import { isFailure, listDir, readAttribute, readNumaNode, resolvePath } from "./sysfs.ts";
import { normalizePciBusId } from "./gpu_query.ts";
import type { Hca, HcaPort, LinkLayer } from "./types.ts";

/** Parses `state` / `phys_state` files: `"4: ACTIVE"` → `"ACTIVE"`. */
export function parsePortState(text: string): string | null {
  const m = /^\d+:\s*([A-Za-z_][A-Za-z_ ]*)$/.exec(text.trim());
  return m === null ? null : m[1].trim();
}

/** Parses the `rate` file: `"400 Gb/sec (4X NDR)"` → 400, `"2.5 Gb/sec (1X SDR)"` → 2.5. */
export function parseRate(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)\s*Gb\/sec\b/.exec(text.trim());
  return m === null ? null : Number(m[1]);
}

/** Parses `link_layer`: "InfiniBand" is native IB, "Ethernet" is RoCE. */
export function parseLinkLayer(text: string): LinkLayer | null {
  const t = text.trim().toLowerCase();
  if (t === "infiniband") return "infiniband";
  if (t === "ethernet") return "roce";
  return null;
}

/** A GID table entry as read from `gids/N` and `gid_attrs/types/N`. */
export interface GidEntry {
  /** nvidia-smi's index, the number `CUDA_VISIBLE_DEVICES` uses. */
  index: number;
  /** The GID as sysfs prints it. */
  gid: string;
  /** The GID type, e.g. `RoCE v2`. */
  type: string;
}

/**
 * Chooses the RoCE v2 GID index NCCL should use: a RoCE v2 entry holding an
 * IPv4-mapped address first (what routed RoCE needs, and what NCCL's own
 * auto-selection prefers for IPv4), else the first non-link-local RoCE v2
 * entry, else any RoCE v2 entry. Empty (all-zero) entries never count.
 */
export function chooseRoceV2GidIndex(entries: GidEntry[]): number | null {
  const v2 = entries
    .filter((e) => /roce\s*v2/i.test(e.type) && !/^[0:]+$/.test(e.gid))
    .sort((a, b) => a.index - b.index);
  const ipv4 = v2.find((e) => /^0000:0000:0000:0000:0000:ffff:/i.test(e.gid));
  if (ipv4 !== undefined) return ipv4.index;
  const global = v2.find((e) => !/^fe80:/i.test(e.gid));
  return (global ?? v2[0])?.index ?? null;
}

/** Most ports and GID entries one adapter may have before we stop reading. */
const MAX_PORTS = 16;
const MAX_GIDS = 256;

/**
 * Reads every adapter under `<root>/class/infiniband`. A missing directory is
 * a node without RDMA (a single-node island, design §5.2), not an error.
 * Missing or malformed attribute files become problems on that adapter.
 */
export async function readInfinibandAdapters(
  sysfsRoot: string,
): Promise<{ hcas: Hca[]; problems: string[] }> {
  const dir = `${sysfsRoot}/class/infiniband`;
  const names = await listDir(dir, 256);
  if (names === null) return { hcas: [], problems: [] };
  if (isFailure(names)) return { hcas: [], problems: [`cannot list ${dir}: ${names.error}`] };
  // Adapters are independent: read them concurrently (each is a few dozen small files).
  const hcas = await Promise.all(names.map((name) => readAdapter(`${dir}/${name}`, name)));
  return { hcas, problems: [] };
}

async function readAdapter(path: string, name: string): Promise<Hca> {
  const problems: string[] = [];
  const device = await resolvePath(`${path}/device`);
  const busName = device?.split("/").pop() ?? null;
  const pciBusId = busName === null ? null : normalizePciBusId(busName);
  const numa = await readNumaNode(`${path}/device/numa_node`);
  if (isFailure(numa) && numa.error !== "missing") {
    problems.push(`device/numa_node: ${numa.error}`);
  }
  const ports: HcaPort[] = [];
  const portNames = await listDir(`${path}/ports`, MAX_PORTS);
  if (portNames === null) problems.push("no ports directory");
  else if (isFailure(portNames)) problems.push(`ports: ${portNames.error}`);
  else {
    for (const p of portNames) {
      if (!/^\d+$/.test(p)) {
        problems.push(`ports/${p}: not a port number`);
        continue;
      }
      ports.push(await readPort(`${path}/ports/${p}`, Number(p), problems));
    }
  }
  return {
    name,
    pci_bus_id: pciBusId,
    numa_node: isFailure(numa) ? null : numa,
    ports,
    problems,
  };
}

async function readPort(path: string, port: number, problems: string[]): Promise<HcaPort> {
  const read = async <T>(
    file: string,
    parse: (s: string) => T | null,
    expected: string,
  ): Promise<T | null> => {
    const v = await readAttribute(`${path}/${file}`);
    if (isFailure(v)) {
      problems.push(`port ${port} ${file}: ${v.error}`);
      return null;
    }
    const parsed = parse(v);
    if (parsed === null) {
      problems.push(
        `port ${port} ${file}: expected ${expected}, got ${JSON.stringify(v.slice(0, 40))}`,
      );
    }
    return parsed;
  };
  const state = await read("state", parsePortState, '"N: STATE"');
  const physical = await read("phys_state", parsePortState, '"N: State"');
  const rate = await read("rate", parseRate, '"N Gb/sec (…)"');
  const linkLayer = await read("link_layer", parseLinkLayer, '"InfiniBand" or "Ethernet"');
  const gidIndex = linkLayer === "roce" ? chooseRoceV2GidIndex(await readGids(path)) : null;
  return {
    port,
    state,
    physical_state: physical,
    rate_gbps: rate,
    link_layer: linkLayer,
    roce_v2_gid_index: gidIndex,
    active: state === "ACTIVE" && physical === "LinkUp",
  };
}

async function readGids(portPath: string): Promise<GidEntry[]> {
  const indices = await listDir(`${portPath}/gid_attrs/types`, MAX_GIDS);
  if (indices === null || isFailure(indices)) return [];
  const entries: GidEntry[] = [];
  for (const i of indices) {
    if (!/^\d+$/.test(i)) continue;
    // The kernel answers EINVAL for the type of an empty GID slot: skipping
    // such entries is normal, not a problem worth reporting.
    const type = await readAttribute(`${portPath}/gid_attrs/types/${i}`);
    const gid = await readAttribute(`${portPath}/gids/${i}`);
    if (isFailure(type) || isFailure(gid)) continue;
    entries.push({ index: Number(i), gid, type });
  }
  return entries;
}
