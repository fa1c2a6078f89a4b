/**
 * A shard's side of port ownership: taking a block from the agent's range
 * and saying who held what it skipped, and what an ownership check means
 * for readiness. The runner (shard_runner.ts) acts on the answers.
 *
 * @module
 */
import { PORT_BLOCK } from "../engines/port_block.ts";
import { describeHolders, portHolders, type PortOwnership } from "./listen_owner.ts";
import type { PortAllocator, PortCheck } from "./port_allocator.ts";

/** A block taken for a shard, and the notice naming a holder it skipped, if any. */
export interface TakenBlock {
  /** The ports, the HTTP port first. */
  ports: number[];
  /** "port P is held by pid N (…); using ports from Q", when a port was found held. */
  notice: string | null;
}

/** Who holds `port`, in words; "a process /proc does not name" when /proc cannot tell. */
function holderOf(port: number, procRoot: string): string {
  try {
    const holders = portHolders(port, procRoot);
    if (holders.length > 0) return describeHolders(holders);
  } catch {
    // /proc unreadable: the port is still skipped.
  }
  return "a process /proc does not name";
}

/** Takes a block of {@link PORT_BLOCK} free ports for `owner`; a port found held is named. */
export async function takeBlock(
  allocator: PortAllocator,
  owner: string,
  isFree: PortCheck,
  procRoot: string,
): Promise<TakenBlock> {
  const held: number[] = [];
  const ports = await allocator.allocate(owner, PORT_BLOCK, async (p) => {
    const free = await isFree(p);
    if (!free) held.push(p);
    return free;
  });
  return {
    ports,
    notice: held.length === 0
      ? null
      : `port ${held[0]} is held by ${holderOf(held[0], procRoot)}; using ports from ${ports[0]}`,
  };
}

/**
 * Why an ownership check did not find the shard's own socket, for a
 * timeout's reason; null when it did, or when another process holds the
 * port (which fails the run at once).
 */
export function ownershipHint(owner: PortOwnership, port: number): string | null {
  if (owner.kind === "unknown") return `the owner of port ${port} cannot be read: ${owner.reason}`;
  if (owner.kind === "none") {
    return `nothing of the shard listens on port ${port} (an engine that binds another port is never ready)`;
  }
  return null;
}
