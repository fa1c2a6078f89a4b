/**
 * Writes tests/fixtures/clusters/recorded.json: one node per recorded machine
 * (its reviewed `expected_inventory.json`), for `llmgw plan` and tests. Run
 * after changing a machine: `deno run -A tests/make_cluster_fixtures.ts`.
 * Management addresses are from 192.0.2.0/24 (TEST-NET-1, documentation only).
 *
 * @module
 */
import { join } from "node:path";
import { machineNames, MACHINES_DIR } from "./make_machine_fixtures.ts";
import type { Inventory } from "../discovery/mod.ts";
import type { ClusterNode } from "../inventory/types.ts";

/** The cluster of recorded machines. */
export function recordedCluster(): ClusterNode[] {
  return machineNames().map((name, i) => {
    const inv = JSON.parse(
      Deno.readTextFileSync(join(MACHINES_DIR, name, "expected_inventory.json")),
    ) as Inventory;
    return {
      id: name.replaceAll("_", "-"),
      hostname: name.replaceAll("_", "-"),
      mgmt_addr: `192.0.2.${10 + i}`,
      mgmt_interface: "eth0",
      state: "ready",
      labels: { "llmgw.io/recorded-machine": name },
      gpus: inv.gpus,
      fabrics: inv.fabrics,
      allocations: [],
    };
  });
}

if (import.meta.main) {
  const path = new URL("./fixtures/clusters/recorded.json", import.meta.url);
  Deno.writeTextFileSync(path, JSON.stringify({ nodes: recordedCluster() }, null, 2) + "\n");
  console.log(`wrote ${path.pathname}`);
}
