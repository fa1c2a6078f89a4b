/**
 * `llmgw dev`: the all-in-one local cluster (plan §3). In this release it
 * discovers the simulated nodes (recorded real machines under
 * tests/fixtures/machines) through the production discovery path and prints
 * what the scheduler would see on each; control plane, agents and the fake
 * engine join it in later releases.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { discoverInventory } from "../discovery/mod.ts";
import { parseAgentConfig, resolveConfigPaths } from "../agent/config.ts";
import { formatInventory } from "../agent/inventory_table.ts";
import { parseFlags, UsageError } from "./usage_error.ts";

const DEFAULT_MACHINES = fileURLToPath(new URL("../tests/fixtures/machines/", import.meta.url));

/** Runs `llmgw dev [--machines DIR] [--node NAME]`. */
export async function devCommand(args: string[], write: (t: string) => void): Promise<number> {
  const { values } = parseFlags("dev", args, {
    machines: { type: "string" },
    node: { type: "string" },
  });
  const root = values.machines ?? DEFAULT_MACHINES;
  const nodes = await listMachines(root);
  if (nodes.length === 0) throw new UsageError(`dev: no simulated machines under ${root}`);
  const chosen = values.node === undefined ? nodes : nodes.filter((n) => n === values.node);
  if (chosen.length === 0) {
    throw new UsageError(`dev: no simulated machine "${values.node}" (known: ${nodes.join(", ")})`);
  }
  write(`llmgw dev: ${chosen.length} simulated node(s) from ${root}\n\n`);
  for (const node of chosen) {
    const configPath = join(root, node, "agent.json");
    const config = resolveConfigPaths(
      parseAgentConfig(await Deno.readTextFile(configPath), configPath),
      configPath,
    );
    const inventory = await discoverInventory({
      nvidiaSmi: config.nvidia_smi,
      sysfsRoot: config.sysfs_root,
      fabrics: config.fabrics,
    });
    write(`=== node ${node} ===\n${formatInventory(inventory)}\n\n`);
  }
  return 0;
}

async function listMachines(root: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(root)) {
      try {
        await Deno.stat(join(root, e.name, "agent.json"));
        names.push(e.name);
      } catch {
        // Not a machine directory.
      }
    }
  } catch {
    throw new UsageError(`dev: cannot read ${root}`);
  }
  return names.sort();
}
