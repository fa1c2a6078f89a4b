/**
 * Writes sysfs fixture trees laid out as the kernel lays them out: adapters
 * live under `devices/…/<pci>/infiniband/<hca>`, and `class/infiniband/<hca>`,
 * `<hca>/device` and `bus/pci/devices/<pci>` are symlinks (design §5.5). The
 * values come from recorded real outputs (tests/fixtures/ib_sources).
 *
 * @module
 */
import { dirname, join, relative } from "node:path";

/** One port's sysfs attribute values, as the kernel prints them. */
export interface PortSpec {
  /** e.g. "4: ACTIVE" */
  state?: string;
  /** e.g. "5: LinkUp" */
  phys_state?: string;
  /** e.g. "400 Gb/sec (4X NDR)" */
  rate?: string;
  /** "InfiniBand" or "Ethernet" */
  link_layer?: string;
  /** GID index → GID text. */
  gids?: Record<string, string>;
  /** GID index → "IB/RoCE v1" or "RoCE v2". */
  gid_types?: Record<string, string>;
}

/** One adapter: its PCI address and NUMA node when recorded, and its ports. */
export interface HcaSpec {
  /** PCI address, or null when the source did not record it. */
  pci_bus_id: string | null;
  /** NUMA node, or null when the source did not record it. */
  numa_node: number | null;
  /** Port number → attributes. */
  ports: Record<string, PortSpec>;
}

/** A recorded sample: its source and adapters (tests/fixtures/ib_sources/*.json). */
export interface IbSample {
  /** Where the values were recorded. */
  source: string;
  /** Adapter name → spec. */
  hcas: Record<string, HcaSpec>;
}

/** Reads a recorded sample by name. */
export function loadIbSample(name: string): IbSample {
  const url = new URL(`./fixtures/ib_sources/${name}.json`, import.meta.url);
  return JSON.parse(Deno.readTextFileSync(url)) as IbSample;
}

/** Writes the adapters of `sample` as a sysfs tree under `root`. */
export function writeSysfsTree(root: string, sample: IbSample): void {
  for (const [name, hca] of Object.entries(sample.hcas)) {
    // Without a recorded PCI address the adapter sits under a parent with no
    // `device` link, so discovery reports its address as unknown, not invented.
    const parent = hca.pci_bus_id === null
      ? join(root, "devices/unrecorded", name)
      : join(root, "devices/pci0000:00", hca.pci_bus_id);
    const dir = join(parent, "infiniband", name);
    Deno.mkdirSync(dir, { recursive: true });
    link(join(root, "class/infiniband", name), dir);
    if (hca.pci_bus_id !== null) {
      link(join(dir, "device"), parent);
      link(join(root, "bus/pci/devices", hca.pci_bus_id), parent);
      if (hca.numa_node !== null) {
        Deno.writeTextFileSync(join(parent, "numa_node"), `${hca.numa_node}\n`);
      }
    }
    for (const [port, p] of Object.entries(hca.ports)) {
      const pdir = join(dir, "ports", port);
      Deno.mkdirSync(pdir, { recursive: true });
      for (const attr of ["state", "phys_state", "rate", "link_layer"] as const) {
        if (p[attr] !== undefined) Deno.writeTextFileSync(join(pdir, attr), `${p[attr]}\n`);
      }
      for (const [i, gid] of Object.entries(p.gids ?? {})) {
        Deno.mkdirSync(join(pdir, "gids"), { recursive: true });
        Deno.writeTextFileSync(join(pdir, "gids", i), `${gid}\n`);
      }
      for (const [i, type] of Object.entries(p.gid_types ?? {})) {
        Deno.mkdirSync(join(pdir, "gid_attrs/types"), { recursive: true });
        Deno.writeTextFileSync(join(pdir, "gid_attrs/types", i), `${type}\n`);
      }
    }
  }
}

/** Creates a relative symlink at `at` pointing to `target`, as sysfs does. */
function link(at: string, target: string): void {
  Deno.mkdirSync(dirname(at), { recursive: true });
  Deno.symlinkSync(relative(dirname(at), target), at);
}
