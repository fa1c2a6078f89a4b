/**
 * Engines a `llmgw dev` finds running when it starts. Its engines run in
 * their own process groups so that agents can restart without stopping
 * them (design §9.2); so when dev itself dies without stopping them (`kill
 * -9`, a crash), they keep running:
 *
 * - on the same directory, the next dev's agents adopt them from their pid
 *   files (the fingerprint must match), and dev says so;
 * - anything else listening in its engines' ports (engines of a dev killed on
 *   another directory, a hand-started server) is named in a warning with the
 *   command that stops it: its agents skip those ports, and it holds memory
 *   and, on real hosts, GPUs.
 *
 * {@link engineLeftReport} is the pure core; {@link scanEnginesLeft} reads
 * the pid files and /proc.
 *
 * @module
 */
import { join } from "node:path";
import { checkFingerprint, type PidRecord, readPidFile } from "../supervisor/pid_file.ts";
import { readProcStat } from "../supervisor/proc.ts";
import {
  describeHolders,
  parseProcNetTcp,
  portHolders,
  ProcNetError,
} from "../supervisor/listen_owner.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import { errorMessage } from "../text/error_message.ts";

/** An engine of this directory that its agents will adopt. */
export interface AdoptableEngine {
  /** The node whose agent adopts it. */
  node: string;
  /** The engine's pid (its process group's leader). */
  pid: number;
  /** Its port. */
  port: number;
}

/** A process listening in dev's engine ports that this directory's pid files do not name. */
export interface ForeignListener {
  /** The port. */
  port: number;
  /** The holder; null when /proc does not show it (another user's). */
  pid: number | null;
  /** Its process group, when known. */
  pgid: number | null;
  /** Its command line; empty when unknown. */
  cmdline: string[];
}

/** What dev found running when it started. */
export interface EnginesLeft {
  /** Engines its agents adopt. */
  adoptable: AdoptableEngine[];
  /** Listeners in its engine ports it did not start. */
  foreign: ForeignListener[];
  /** Why /proc could not be scanned, if it could not. */
  unknown?: string;
}

/** Listeners named one per line before the rest are counted. */
const SHOWN = 10;

/**
 * The lines dev prints about engines left running (empty: none): a note for
 * the adopted ones, a warning naming each foreign listener and how to stop
 * it. `range` is the span of all its agents' engine ports.
 */
export function engineLeftReport(found: EnginesLeft, range: PortRange): string {
  let out = "";
  if (found.adoptable.length > 0) {
    const list = found.adoptable.map((e) => `${e.node} pid ${e.pid} port ${e.port}`).join(", ");
    out += `llmgw dev: ${found.adoptable.length} engine(s) left running by an earlier dev on ` +
      `this directory; its agents adopt them: ${list}\n`;
  }
  if (found.foreign.length > 0) {
    const sorted = [...found.foreign].sort((a, b) => a.port - b.port);
    out +=
      `llmgw dev: warning: ${sorted.length} listener(s) it did not start in its engine ports ` +
      `${range.from}…${range.to} (its agents skip those ports):\n`;
    for (const l of sorted.slice(0, SHOWN)) {
      out += `  port ${l.port}: ${describeHolders([{ pid: l.pid, cmdline: l.cmdline }])}\n`;
    }
    if (sorted.length > SHOWN) out += `  … and ${sorted.length - SHOWN} more\n`;
    const groups = [...new Set(sorted.map((l) => l.pgid).filter((g) => g !== null))];
    out += `  engines of a dev stopped by kill -9 on another --dir? ` +
      (groups.length > 0
        ? `stop them with: kill -- ${groups.map((g) => `-${g}`).join(" ")}\n`
        : `/proc does not show their processes: stop them as their owner\n`);
  }
  if (found.unknown !== undefined) {
    out += `llmgw dev: warning: cannot check its engine ports for engines it did not start: ` +
      `${found.unknown}\n`;
  }
  return out;
}

/** The pid files under a dev directory's agents: `DIR/agents/NODE/shards/SHARD/pid.json`. */
function pidRecords(dir: string, nodes: readonly string[]): [string, PidRecord][] {
  const out: [string, PidRecord][] = [];
  for (const node of nodes) {
    const shards = join(dir, "agents", node, "shards");
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(shards)];
    } catch {
      continue;
    }
    for (const e of entries) {
      const read = readPidFile(join(shards, e.name, "pid.json"));
      if ("record" in read) out.push([node, read.record]);
    }
  }
  return out;
}

/** Every LISTEN socket's port in `range`, from /proc/net/tcp and tcp6. */
function listeningPorts(range: PortRange, procRoot: string): number[] {
  const ports = new Set<number>();
  for (const [name, optional] of [["tcp", false], ["tcp6", true]] as const) {
    let text: string;
    try {
      text = Deno.readTextFileSync(`${procRoot}/net/${name}`);
    } catch (e) {
      if (optional && e instanceof Deno.errors.NotFound) continue;
      throw new ProcNetError(`Cannot read ${procRoot}/net/${name}: ${String(e)}`);
    }
    for (const s of parseProcNetTcp(text)) {
      if (s.port >= range.from && s.port <= range.to) ports.add(s.port);
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * Scans for engines left running: this directory's pid files whose process
 * still matches its fingerprint (adoptable), and every other listener in
 * `range` (foreign). A listener in the process group of an adoptable engine
 * (its worker) is not foreign. Never throws: what /proc cannot tell is
 * `unknown`.
 */
export function scanEnginesLeft(
  dir: string,
  nodes: readonly string[],
  range: PortRange,
  procRoot = "/proc",
): EnginesLeft {
  const adoptable: AdoptableEngine[] = [];
  const ours = new Set<number>();
  for (const [node, r] of pidRecords(dir, nodes)) {
    if (!checkFingerprint(r).ok) continue;
    adoptable.push({ node, pid: r.pid, port: r.port });
    ours.add(r.pgid);
  }
  const foreign: ForeignListener[] = [];
  try {
    for (const port of listeningPorts(range, procRoot)) {
      for (const h of portHolders(port, procRoot)) {
        const pgid = h.pid === null ? null : readProcStat(h.pid)?.pgid ?? null;
        if (pgid !== null && ours.has(pgid)) continue;
        foreign.push({ port, pid: h.pid, pgid, cmdline: h.cmdline });
      }
    }
  } catch (e) {
    return { adoptable, foreign, unknown: errorMessage(e) };
  }
  return { adoptable, foreign };
}
