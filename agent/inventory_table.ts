/**
 * The readable form of `llmgw agent inventory` (design §13).
 *
 * @module
 */
import type { Inventory } from "../discovery/mod.ts";
import { renderTable } from "../text/table.ts";

const show = (v: string | number | null): string => v === null ? "-" : String(v);

/** Formats an inventory as text tables: GPUs, adapters, fabrics, then problems. */
export function formatInventory(inv: Inventory): string {
  const out: string[] = [];
  out.push(`GPUs (source: ${inv.source})`);
  if (inv.gpus.length === 0) out.push("  none");
  else {
    out.push(renderTable(
      [
        "IDX",
        "CLASS",
        "NAME",
        "MEM USED/TOTAL MiB",
        "CC",
        "NUMA",
        "PCI",
        "NVLINK",
        "TEMP",
        "HEALTH",
      ],
      inv.gpus.map((g) => [
        String(g.index),
        show(g.class),
        show(g.name),
        `${show(g.memory_used_mb)}/${show(g.memory_total_mb)}`,
        show(g.compute_capability),
        show(g.numa_node),
        show(g.pci_bus_id),
        g.nvlink_peers.length === 0 ? "-" : g.nvlink_peers.join(","),
        g.health.temperature_c === null ? "-" : `${g.health.temperature_c}C`,
        g.health.problems.length === 0 ? "ok" : g.health.problems.join("; "),
      ]),
    ));
    const g0 = inv.gpus[0];
    out.push(`driver ${show(g0.driver_version)}, CUDA ${show(g0.cuda_version)}`);
  }
  out.push("", "Adapters");
  if (inv.hcas.length === 0) out.push("  none (no RDMA: a single-node island)");
  else {
    out.push(renderTable(
      ["HCA", "PORT", "STATE", "PHYS", "RATE Gb/s", "LINK", "ROCEv2 GID", "NUMA", "PCI"],
      inv.hcas.flatMap((h) =>
        (h.ports.length === 0 ? [null] : h.ports).map((p) => [
          h.name,
          p === null ? "-" : String(p.port),
          show(p?.state ?? null),
          show(p?.physical_state ?? null),
          show(p?.rate_gbps ?? null),
          show(p?.link_layer ?? null),
          show(p?.roce_v2_gid_index ?? null),
          show(h.numa_node),
          show(h.pci_bus_id),
        ])
      ),
    ));
  }
  out.push("", "Fabrics");
  if (inv.fabrics.length === 0) out.push("  none (this node can host only single-node replicas)");
  else {
    out.push(renderTable(
      ["FABRIC", "HCAS", "SLOWEST Gb/s"],
      inv.fabrics.map((f) => [f.fabric, f.hcas.join(","), show(f.rate_gbps)]),
    ));
  }
  for (const [title, items] of [["Warnings", inv.warnings], ["Problems", inv.problems]] as const) {
    if (items.length > 0) out.push("", title, ...items.map((p) => `  - ${p}`));
  }
  return out.join("\n");
}
