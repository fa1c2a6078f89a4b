/**
 * Who holds a TCP port, from /proc (design §11.2): a shard is ready only when
 * the socket listening on its port belongs to its own process group, so a
 * foreign server on the port (a hand-started `vllm serve`, a second dev
 * cluster) never makes a dead shard look ready.
 *
 * The kernel lists listening sockets with their inode in `/proc/net/tcp` and
 * `/proc/net/tcp6`; a process holds a socket when one of its
 * `/proc/<pid>/fd/*` links reads `socket:[<inode>]`. Linux only; the tables
 * are those of the reader's network namespace, which is the engines' as long
 * as the agent launches them directly.
 *
 * @module
 */
import { scrubKeyArgs } from "../engines/api_key.ts";
import { errorMessage } from "../text/error_message.ts";

/** A listening TCP socket, as /proc/net/tcp{,6} lists it. */
export interface ListeningSocket {
  /** Local address: `0.0.0.0`, `127.0.0.1`, `::`, `::1`, `::ffff:127.0.0.1`, … */
  address: string;
  /** Local port. */
  port: number;
  /** The socket's inode, matched against `/proc/<pid>/fd` links. */
  inode: number;
  /** 4 for /proc/net/tcp, 6 for /proc/net/tcp6 (IPv4-mapped addresses included). */
  family: 4 | 6;
}

/** A process holding a listening socket; `pid` is null when /proc cannot say which. */
export interface PortHolder {
  /** The holder, or null when no readable process holds the socket (another user's, say). */
  pid: number | null;
  /** Its command line; empty when unknown or unreadable. */
  cmdline: string[];
}

/**
 * Whose socket listens on a port:
 * - `ours`: a socket on the port is held by one of the given pids, and no
 *   other socket listens on it; `pid` is the first given pid that holds it.
 * - `foreign`: some socket on the port is held by nobody among the given
 *   pids; `holders` names who does (pid null where /proc cannot say), and
 *   `ours` the given pid that also listens, if one does (SO_REUSEPORT, or a
 *   v6-only socket next to a v4 one): the kernel spreads connections over
 *   all of them, so such a port is not ours.
 * - `none`: nobody listens on the port.
 * - `unknown`: /proc could not answer; `reason` says why.
 */
export type PortOwnership =
  | { kind: "ours"; pid: number }
  | { kind: "foreign"; holders: PortHolder[]; ours: number | null }
  | { kind: "none" }
  | { kind: "unknown"; reason: string };

/** Raised when a /proc/net table cannot be read; the message names the file. */
export class ProcNetError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "ProcNetError";
  }
}

/** The state column's value for LISTEN (include/net/tcp_states.h: TCP_LISTEN = 10). */
const TCP_LISTEN = "0A";

/**
 * How many processes a holder scan looks at before giving up and calling the
 * rest unknown: /proc lists one directory per process (threads live under
 * `task/`), so this is far above what a GPU host runs, yet bounds the work
 * on a pathological one.
 */
export const DEFAULT_SCAN_LIMIT = 16_384;

/**
 * Parses `/proc/net/tcp` or `/proc/net/tcp6` text and returns its LISTEN
 * sockets. Addresses are printed as the kernel's in-memory 32-bit words in
 * hex, hence byte-reversed per word on the little-endian hosts llmgw runs on
 * (x86-64, arm64); the port is plain hex. The header and malformed lines are
 * skipped, never thrown on.
 */
export function parseProcNetTcp(text: string): ListeningSocket[] {
  const out: ListeningSocket[] = [];
  for (const line of text.split("\n")) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !/^\d+:$/.test(f[0]) || f[3] !== TCP_LISTEN) continue;
    const local = /^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/.exec(f[1]);
    if (local === null || !/^\d+$/.test(f[9])) continue;
    const inode = Number(f[9]);
    if (!Number.isSafeInteger(inode)) continue;
    const hex = local[1];
    out.push({
      address: hex.length === 8 ? ipv4(wordBytes(hex)) : ipv6(wordBytes(hex)),
      port: parseInt(local[2], 16),
      inode,
      family: hex.length === 8 ? 4 : 6,
    });
  }
  return out;
}

/** Bytes of an address printed as little-endian 32-bit words. */
function wordBytes(hex: string): number[] {
  const bytes: number[] = [];
  for (let w = 0; w < hex.length; w += 8) {
    for (let b = 3; b >= 0; b--) bytes.push(parseInt(hex.slice(w + 2 * b, w + 2 * b + 2), 16));
  }
  return bytes;
}

function ipv4(b: number[]): string {
  return b.join(".");
}

/** RFC 5952 text: lowercase, the longest run of two or more zero groups as `::`. */
function ipv6(b: number[]): string {
  if (b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) {
    return `::ffff:${ipv4(b.slice(12))}`;
  }
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i] << 8) | b[2 * i + 1]);
  let best = { start: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len) best = { start: i, len: j - i };
    i = j;
  }
  const text = (gs: number[]) => gs.map((g) => g.toString(16)).join(":");
  if (best.len < 2) return text(groups);
  return `${text(groups.slice(0, best.start))}::${text(groups.slice(best.start + best.len))}`;
}

/** The inode of an fd link target `socket:[12345]`; null for anything else. */
export function parseSocketLink(target: string): number | null {
  const m = /^socket:\[(\d+)\]$/.exec(target);
  if (m === null) return null;
  const inode = Number(m[1]);
  return Number.isSafeInteger(inode) ? inode : null;
}

/**
 * The LISTEN sockets on `port`, from `<procRoot>/net/tcp` and `tcp6`. A
 * missing tcp6 means a kernel without IPv6 and adds nothing.
 *
 * @throws {ProcNetError} When `<procRoot>/net/tcp` (or an existing tcp6) cannot be read.
 */
export function listenersOn(port: number, procRoot = "/proc"): ListeningSocket[] {
  const read = (name: string, optional: boolean): string => {
    const path = `${procRoot}/net/${name}`;
    try {
      return Deno.readTextFileSync(path);
    } catch (e) {
      if (optional && e instanceof Deno.errors.NotFound) return "";
      throw new ProcNetError(
        `Cannot read ${path}: ${errorMessage(e)}`,
      );
    }
  };
  return [...parseProcNetTcp(read("tcp", false)), ...parseProcNetTcp(read("tcp6", true))]
    .filter((s) => s.port === port);
}

/** A process's socket inodes, or why they could not be read. */
type FdScan = { inodes: Set<number> } | { denied: true } | { gone: true };

function scanFds(pid: number, procRoot: string): FdScan {
  const dir = `${procRoot}/${pid}/fd`;
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch (e) {
    return e instanceof Deno.errors.PermissionDenied ? { denied: true } : { gone: true };
  }
  const inodes = new Set<number>();
  for (const entry of entries) {
    try {
      const inode = parseSocketLink(Deno.readLinkSync(`${dir}/${entry.name}`));
      if (inode !== null) inodes.add(inode);
    } catch {
      // The fd was closed between listing and reading: it holds nothing now.
    }
  }
  return { inodes };
}

/**
 * The socket inodes a process holds, from its `/proc/<pid>/fd` links. A
 * process that vanished or whose fds this user may not read holds none
 * here: never a throw.
 */
export function socketInodesOf(pid: number, procRoot = "/proc"): Set<number> {
  const scan = scanFds(pid, procRoot);
  return "inodes" in scan ? scan.inodes : new Set();
}

/** A process's command line under `procRoot`; empty when unreadable. */
function cmdlineOf(pid: number, procRoot: string): string[] {
  try {
    const text = Deno.readTextFileSync(`${procRoot}/${pid}/cmdline`);
    const parts = text.split("\0");
    if (parts.at(-1) === "") parts.pop();
    return parts;
  } catch {
    return [];
  }
}

/**
 * Finds a holder for each of `inodes`: scans /proc in pid order and stops
 * once every inode has one (a forked child sharing its parent's socket is
 * not looked for) or `scanLimit` processes were looked at. Inodes nobody
 * readable holds get one holder with pid null.
 */
function findHolders(inodes: ReadonlySet<number>, procRoot: string, scanLimit: number) {
  const holders: PortHolder[] = [];
  const missing = new Set(inodes);
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(procRoot)];
  } catch {
    entries = [];
  }
  const pids = entries.filter((e) => /^\d+$/.test(e.name)).map((e) => Number(e.name))
    .sort((a, b) => a - b).slice(0, scanLimit);
  for (const pid of pids) {
    if (missing.size === 0) break;
    const scan = scanFds(pid, procRoot);
    if (!("inodes" in scan)) continue;
    let holds = false;
    for (const inode of [...missing]) {
      if (scan.inodes.has(inode)) {
        missing.delete(inode);
        holds = true;
      }
    }
    if (holds) holders.push({ pid, cmdline: cmdlineOf(pid, procRoot) });
  }
  if (missing.size > 0) holders.push({ pid: null, cmdline: [] });
  return holders;
}

/**
 * Which processes hold a listening socket on `port`: one holder per socket
 * (the first process in pid order that holds it), plus one with pid null
 * when some socket's holder could not be found (another user's process
 * without permission, or past the first `scanLimit` processes). Empty when
 * nobody listens. `procRoot` is /proc's mount point; tests point it at a
 * fake tree.
 *
 * @throws {ProcNetError} When /proc/net/tcp cannot be read.
 */
export function portHolders(
  port: number,
  procRoot = "/proc",
  scanLimit = DEFAULT_SCAN_LIMIT,
): PortHolder[] {
  const listeners = listenersOn(port, procRoot);
  if (listeners.length === 0) return [];
  return findHolders(new Set(listeners.map((s) => s.inode)), procRoot, scanLimit);
}

/**
 * Whose socket listens on `port`, `pids` being the processes that count as
 * ours (a shard's process-group members). A socket counts as ours when any
 * of `pids` holds it, even if a process outside them holds the same socket
 * too (a worker that left the group with an inherited fd: connections are
 * still accepted by the engine's own code). A port where another socket
 * also listens is `foreign`, with `ours` noting our pid: see
 * {@link PortOwnership}. Never throws: what /proc cannot tell is `unknown`,
 * including a member of `pids` whose fds cannot be read, since its socket
 * would otherwise be taken for a stranger's.
 */
export function portOwnership(
  port: number,
  pids: readonly number[],
  procRoot = "/proc",
  scanLimit = DEFAULT_SCAN_LIMIT,
): PortOwnership {
  let listeners: ListeningSocket[];
  try {
    listeners = listenersOn(port, procRoot);
  } catch (e) {
    return { kind: "unknown", reason: errorMessage(e) };
  }
  if (listeners.length === 0) return { kind: "none" };
  const wanted = new Set(listeners.map((s) => s.inode));
  const foreign = new Set(wanted);
  let ours: number | null = null;
  for (const pid of pids) {
    const scan = scanFds(pid, procRoot);
    if ("denied" in scan) {
      return {
        kind: "unknown",
        reason: `Cannot read ${procRoot}/${pid}/fd: permission denied`,
      };
    }
    if ("gone" in scan) continue;
    for (const inode of wanted) {
      if (scan.inodes.has(inode)) {
        foreign.delete(inode);
        ours ??= pid;
      }
    }
  }
  if (foreign.size === 0 && ours !== null) return { kind: "ours", pid: ours };
  return {
    kind: "foreign",
    holders: findHolders(foreign, procRoot, scanLimit),
    ours,
  };
}

/**
 * One line naming holders for a failure or an event, e.g.
 * `pid 4242 (vllm serve meta-llama/Llama-3.1-8B --port 8000)`; command lines
 * are cut at 200 characters, with the values of known key flags as `***`:
 * a holder may be another shard whose engine takes its key in argv.
 */
export function describeHolders(holders: readonly PortHolder[]): string {
  if (holders.length === 0) return "nobody";
  return holders.map((h) => {
    if (h.pid === null) return "a process /proc does not show (another user's?)";
    const cmd = scrubKeyArgs(h.cmdline).join(" ");
    const shown = cmd.length > 200 ? `${cmd.slice(0, 200)}…` : cmd;
    return shown === "" ? `pid ${h.pid}` : `pid ${h.pid} (${shown})`;
  }).join(", ");
}
