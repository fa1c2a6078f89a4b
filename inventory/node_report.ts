/**
 * What an agent reports about its node (design §4, §10): the registration, and
 * the checks its GPU list must pass before the inventory records anything.
 *
 * @module
 */
import type { FabricAttachment, Gpu } from "../discovery/types.ts";

/** What an agent sends when it registers (design §4, §10). */
export interface NodeRegistration {
  /** Stable node id. */
  id: string;
  /** Host name, for people. */
  hostname: string;
  /** Management address: the bootstrap interface's address (design §5.3). */
  mgmt_addr: string;
  /** The interface holding it (NCCL_SOCKET_IFNAME); omitted or null when unknown. */
  mgmt_interface?: string | null;
  /**
   * Labels from the agent's configuration, which the operator writes; a
   * re-registration replaces them.
   */
  labels: Record<string, string>;
  /** GPUs as discovery reports them (design §5.1). */
  gpus: Gpu[];
  /** Fabric attachments (design §5.2). */
  fabrics: FabricAttachment[];
  /** The agent's version. */
  agent_version: string;
  /** Engine name → installed version (design §14). */
  engine_versions: Record<string, string>;
}

/** Raised for a registration or heartbeat whose content cannot be recorded. */
export class NodeReportError extends Error {
  /** Creates the error; `message` names the node and the offending value. */
  constructor(message: string) {
    super(message);
    this.name = "NodeReportError";
  }
}

/** Whether a GPU may hold work: discovery found no health problem on it (design §5.1). */
export function isHealthy(gpu: Gpu): boolean {
  return gpu.health.problems.length === 0;
}

/**
 * Checks a node's GPU report as registration and heartbeats do (indices
 * whole, non-negative and unique), so callers can refuse one before
 * changing anything. Throws {@link NodeReportError}.
 */
export function checkGpus(nodeId: string, gpus: readonly Gpu[], action: string): void {
  const seen = new Set<number>();
  for (const g of gpus) {
    if (!Number.isSafeInteger(g.index) || g.index < 0) {
      throw new NodeReportError(
        `Cannot ${action} node ${nodeId}: GPU index ${g.index} is not a non-negative integer`,
      );
    }
    if (seen.has(g.index)) {
      throw new NodeReportError(
        `Cannot ${action} node ${nodeId}: GPU index ${g.index} appears twice`,
      );
    }
    seen.add(g.index);
  }
}
