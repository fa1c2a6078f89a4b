/**
 * Names for a network-namespace lab (issue #14): every namespace and link a
 * lab creates starts with its prefix, `lg<pid>-<serial>` (both base 36, the
 * serial two digits wide), so two labs never collide, a leftover names the
 * process that made it, and `sweepStaleLabs` (lab.ts) can tell a dead lab's
 * leftovers from a live one's.
 *
 * Linux interface names are at most 15 bytes (IFNAMSIZ − 1). The prefix is at
 * most 10 ("lg" + 5 digits for a pid up to 2^22, the kernel's ceiling, + "-" +
 * 2), which leaves 5 for a link's role, network and host: see
 * {@link bridgeName}, {@link hostLinkName}, {@link switchLinkName}.
 *
 * @module
 */

/** The kernel's ceiling for a pid (PID_MAX_LIMIT on 64-bit). */
export const MAX_PID = 4_194_304;
/** Labs one process may create: two base-36 digits of serial. */
export const MAX_SERIAL = 36 * 36 - 1;
/** Networks one lab may have: one base-36 digit. */
export const MAX_NETWORKS = 36;
/** Hosts one lab may have: two base-36 digits. */
export const MAX_HOSTS = 36 * 36;
/** The longest Linux interface name. */
export const IFNAME_MAX = 15;

/**
 * Matches a name a lab made, capturing the creating process's pid (base 36)
 * as `pid` and the whole prefix as `prefix`. The serial's fixed width is what
 * tells the prefix from the link's role letter that follows it.
 */
export const LAB_NAME_PATTERN = /^(?<prefix>lg(?<pid>[0-9a-z]{1,5})-[0-9a-z]{2})/;

/** The switch namespace's suffix; no host may take this name. */
export const SWITCH = "switch";

/** Thrown for a name that cannot be used in a lab. */
export class LabNameError extends Error {
  override name = "LabNameError";
}

/** The prefix of the `serial`-th lab of process `pid`, e.g. `lgdn9-00`. */
export function labPrefix(pid: number, serial: number): string {
  if (!Number.isInteger(pid) || pid < 1 || pid > MAX_PID) {
    throw new LabNameError(`Cannot name a lab: pid must be an integer in 1…${MAX_PID}, got ${pid}`);
  }
  if (!Number.isInteger(serial) || serial < 0 || serial > MAX_SERIAL) {
    throw new LabNameError(
      `Cannot name a lab: serial must be an integer in 0…${MAX_SERIAL}, got ${serial}` +
        " (this process has made too many labs)",
    );
  }
  return `lg${pid.toString(36)}-${serial.toString(36).padStart(2, "0")}`;
}

/**
 * The pid that made `name`, when `pattern` matches it, else null. A custom
 * `pattern` must have a named group `pid` holding the pid in base 36.
 */
export function pidOfLabName(name: string, pattern: RegExp = LAB_NAME_PATTERN): number | null {
  const pid = pattern.exec(name)?.groups?.pid;
  if (pid === undefined) return null;
  const n = parseInt(pid, 36);
  return Number.isSafeInteger(n) && n >= 1 ? n : null;
}

/** The lab prefix `name` starts with, or null. */
export function prefixOfLabName(name: string): string | null {
  return LAB_NAME_PATTERN.exec(name)?.groups?.prefix ?? null;
}

const HOST_NAME = /^[a-z][a-z0-9-]{0,31}$/;
const NETWORK_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/** Checks a host's name (`a`, `agent-1`); throws {@link LabNameError}. */
export function checkHostName(name: string): string {
  if (!HOST_NAME.test(name)) {
    throw new LabNameError(
      `Cannot add host ${JSON.stringify(name)}: a host name is a lower-case letter then up to 31` +
        " letters, digits or '-'",
    );
  }
  if (name === SWITCH) {
    throw new LabNameError(`Cannot add host "${SWITCH}": the name is the lab's switch namespace`);
  }
  return name;
}

/** Checks a network's name (`mgmt`, `fabric`); throws {@link LabNameError}. */
export function checkNetworkName(name: string): string {
  if (!NETWORK_NAME.test(name)) {
    throw new LabNameError(
      `Cannot add network ${JSON.stringify(name)}: a network name is a lower-case letter then` +
        " up to 31 letters, digits, '_' or '-'",
    );
  }
  return name;
}

/** Checks a lab's label (used in messages and its log folder); throws {@link LabNameError}. */
export function checkLabName(name: string): string {
  if (!HOST_NAME.test(name)) {
    throw new LabNameError(
      `Cannot create lab ${JSON.stringify(name)}: a lab name is a lower-case letter then up to` +
        " 31 letters, digits or '-'",
    );
  }
  return name;
}

/** The namespace of host `host` (namespace names have no 15-byte limit). */
export function hostNamespace(prefix: string, host: string): string {
  return `${prefix}-${checkHostName(host)}`;
}

/** The namespace holding the lab's bridges. */
export function switchNamespace(prefix: string): string {
  return `${prefix}-${SWITCH}`;
}

/** The bridge of network number `network` (in the switch namespace). */
export function bridgeName(prefix: string, network: number): string {
  return ifname(prefix, `b${digit(network, MAX_NETWORKS, "network")}`);
}

/** The host's end of its veth on network number `network` (in the host's namespace). */
export function hostLinkName(prefix: string, network: number): string {
  return ifname(prefix, `h${digit(network, MAX_NETWORKS, "network")}`);
}

/** The switch's end of host number `host`'s veth on network number `network`. */
export function switchLinkName(prefix: string, network: number, host: number): string {
  const h = digit(host, MAX_HOSTS, "host").padStart(2, "0");
  return ifname(prefix, `s${digit(network, MAX_NETWORKS, "network")}${h}`);
}

function digit(n: number, limit: number, what: string): string {
  if (!Number.isInteger(n) || n < 0 || n >= limit) {
    throw new LabNameError(`Cannot name a link: a lab has at most ${limit} ${what}s, got #${n}`);
  }
  return n.toString(36);
}

function ifname(prefix: string, suffix: string): string {
  const name = prefix + suffix;
  if (name.length > IFNAME_MAX) {
    throw new LabNameError(
      `Cannot name a link: ${JSON.stringify(name)} is longer than ${IFNAME_MAX} bytes`,
    );
  }
  return name;
}
