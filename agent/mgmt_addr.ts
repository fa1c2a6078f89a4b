/**
 * The node's management address and interface (design §4, §5.3): the address
 * the control plane and the other nodes of a replica reach it on, and the
 * interface NCCL and Gloo bootstrap over (`NCCL_SOCKET_IFNAME`). The
 * operator's choice wins; otherwise the interface of the default route,
 * which is what an operator expects of "the node's address".
 *
 * @module
 */

/** One address of a network interface (the fields of `Deno.networkInterfaces()` used). */
export interface InterfaceAddress {
  /** Interface name, e.g. `eth0`. */
  name: string;
  /** `IPv4` or `IPv6`. */
  family: "IPv4" | "IPv6";
  /** The address. */
  address: string;
}

/** The chosen management address and interface, or why none could be chosen. */
export type MgmtChoice =
  | { addr: string; iface: string | null }
  | { error: string };

/** Interfaces that are never a node's management interface unless named. */
const VIRTUAL = /^(lo|docker\d*|veth|br-|virbr|cni|flannel|cali|tun|tap|kube)/;

/**
 * The default route's interface from `/proc/net/route` text: the first line
 * with destination and mask 0. Null when there is none.
 */
export function defaultRouteInterface(routeText: string): string | null {
  for (const line of routeText.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 8 && f[1] === "00000000" && f[7] === "00000000") return f[0];
  }
  return null;
}

function firstAddress(addrs: readonly InterfaceAddress[], iface: string): string | null {
  const own = addrs.filter((a) => a.name === iface);
  const v4 = own.find((a) => a.family === "IPv4");
  if (v4 !== undefined) return v4.address;
  const v6 = own.find((a) => a.family === "IPv6" && !a.address.toLowerCase().startsWith("fe80"));
  return v6?.address ?? null;
}

/**
 * Chooses the management address and interface (pure).
 *
 * - Both given: taken as they are.
 * - Only the address: the interface that holds it (null when none does).
 * - Only the interface: its IPv4 address, else its global IPv6 one.
 * - Neither: the default route's interface and its address; else the first
 *   physical-looking interface with an IPv4 address.
 */
export function chooseMgmt(
  addrs: readonly InterfaceAddress[],
  wanted: { addr?: string; iface?: string },
  defaultIface: string | null,
): MgmtChoice {
  if (wanted.addr !== undefined) {
    return {
      addr: wanted.addr,
      iface: wanted.iface ?? addrs.find((a) => a.address === wanted.addr)?.name ?? null,
    };
  }
  if (wanted.iface !== undefined) {
    const addr = firstAddress(addrs, wanted.iface);
    if (addr === null) {
      const known = [...new Set(addrs.map((a) => a.name))].join(", ") || "none";
      return {
        error: `management interface ${wanted.iface} has no usable address (interfaces: ${known})`,
      };
    }
    return { addr, iface: wanted.iface };
  }
  if (defaultIface !== null) {
    const addr = firstAddress(addrs, defaultIface);
    if (addr !== null) return { addr, iface: defaultIface };
  }
  const candidate = addrs.find((a) => a.family === "IPv4" && !VIRTUAL.test(a.name));
  if (candidate !== undefined) return { addr: candidate.address, iface: candidate.name };
  return {
    error: "cannot tell the management address: no default route and no physical interface " +
      "with an IPv4 address; set --mgmt-addr and --mgmt-interface",
  };
}

/** Reads the host's interfaces and default route, then {@link chooseMgmt}. */
export function detectMgmt(wanted: { addr?: string; iface?: string }): MgmtChoice {
  let addrs: InterfaceAddress[] = [];
  try {
    addrs = Deno.networkInterfaces().map((i) => ({
      name: i.name,
      family: i.family,
      address: i.address,
    }));
  } catch {
    // Without --allow-sys, or no interfaces: only the operator's choice works.
  }
  let route: string | null = null;
  try {
    route = defaultRouteInterface(Deno.readTextFileSync("/proc/net/route"));
  } catch {
    // Not Linux, or not readable.
  }
  return chooseMgmt(addrs, wanted, route);
}
