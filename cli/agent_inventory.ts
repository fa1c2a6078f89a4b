/**
 * `llmgw agent inventory`: what the scheduler would see on this node (design §13).
 *
 * @module
 */
import { formatInventory } from "../agent/inventory_table.ts";
import { discoverInventory } from "../discovery/mod.ts";
import { discoverySettings } from "./discovery_flags.ts";
import { parseFlags, UsageError } from "./usage_error.ts";

/** Usage text of the command. */
export const INVENTORY_USAGE = `Usage: llmgw agent inventory [options]

Prints what the scheduler would see on this node: GPUs, RDMA adapters, fabrics.

Options:
  --json                 print JSON instead of tables
  --nvidia-smi PATH      nvidia-smi executable (default: nvidia-smi on PATH)
  --sysfs-root DIR       sysfs root (default: /sys)
  --fabric NAME=HCA,...  assign adapters to an operator-named fabric (repeatable)
  --config FILE          agent config file (JSON: nvidia_smi, sysfs_root, fabrics)
  --timeout SECONDS      per nvidia-smi call (default: 10)
`;

/**
 * Runs the command; returns the exit code. Output goes to `write`.
 *
 * @throws {UsageError} Naming the flag or config file that is wrong (exit code 2).
 */
export async function inventoryCommand(
  args: string[],
  write: (text: string) => void,
): Promise<number> {
  const { values, positionals } = parseFlags("agent inventory", args, {
    json: { type: "boolean" },
    "nvidia-smi": { type: "string" },
    "sysfs-root": { type: "string" },
    fabric: { type: "string", multiple: true },
    config: { type: "string" },
    timeout: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    write(INVENTORY_USAGE);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(`agent inventory: unexpected argument "${positionals[0]}"`);
  }
  const { nvidiaSmi, sysfsRoot, fabrics } = await discoverySettings("agent inventory", values);
  let timeoutMs: number | undefined;
  if (values.timeout !== undefined) {
    const s = Number(values.timeout);
    if (!Number.isFinite(s) || s <= 0) {
      throw new UsageError(
        `agent inventory: --timeout must be a positive number of seconds, got "${values.timeout}"`,
      );
    }
    timeoutMs = s * 1000;
  }
  const inventory = await discoverInventory({ nvidiaSmi, sysfsRoot, fabrics, timeoutMs });
  write(
    values.json ? JSON.stringify(inventory, null, 2) + "\n" : formatInventory(inventory) + "\n",
  );
  return 0;
}
