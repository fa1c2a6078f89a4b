/**
 * What /proc says about a process: enough to tell a live process from a
 * zombie, to find its process group, and to fingerprint it (design §9.2).
 * Linux only. Deno grants /proc/<pid> reads only with --allow-all, which is
 * why the agent runs with it.
 *
 * @module
 */

/** The fields of /proc/<pid>/stat llmgw uses. */
export interface ProcStat {
  /** Process id. */
  pid: number;
  /** Command name (truncated to 15 characters by the kernel). */
  comm: string;
  /** State letter: R, S, D, Z (zombie), T, … */
  state: string;
  /** Parent pid. */
  ppid: number;
  /** Process group id. */
  pgid: number;
  /** Session id. */
  sid: number;
  /** Start time in clock ticks after boot: with the pid, a unique identity. */
  startTime: number;
}

/** Parses /proc/<pid>/stat text. The command may contain spaces and parentheses. */
export function parseProcStat(text: string): ProcStat | null {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open === -1 || close < open) return null;
  const pid = Number(text.slice(0, open).trim());
  const rest = text.slice(close + 2).split(" ");
  // rest[0] is field 3 (state); starttime is field 22.
  const field = (n: number) => Number(rest[n - 3]);
  if (!Number.isInteger(pid) || rest.length < 20) return null;
  return {
    pid,
    comm: text.slice(open + 1, close),
    state: rest[0],
    ppid: field(4),
    pgid: field(5),
    sid: field(6),
    startTime: field(22),
  };
}

/** Reads a process's stat; null when it does not exist (or cannot be read). */
export function readProcStat(pid: number): ProcStat | null {
  try {
    return parseProcStat(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return null;
  }
}

/** Reads a process's command line; null when it does not exist. */
export function readCmdline(pid: number): string[] | null {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
    return text.split("\0").filter((_, i, all) => i < all.length - 1 || all[i] !== "");
  } catch {
    return null;
  }
}

/** True when the process exists, is not a zombie, and (if given) started at `startTime`. */
export function isRunning(pid: number, startTime?: number): boolean {
  const s = readProcStat(pid);
  return s !== null && s.state !== "Z" && (startTime === undefined || s.startTime === startTime);
}

/** Pids of live (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const s = readProcStat(Number(entry.name));
    if (s !== null && s.pgid === pgid && s.state !== "Z") out.push(s.pid);
  }
  return out;
}

/** Sends a signal to a whole process group; false when the group is gone. */
export function signalGroup(pgid: number, signal: Deno.Signal): boolean {
  try {
    Deno.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

const GROUP_POLL_MS = 50;

/**
 * Polls every 50 ms until no process of group `pgid` is left, or `ms` of
 * polls pass; true when empty. Bounded by the count of polls, so it reads
 * no clock (a grace period is a least wait: a slow /proc scan only adds).
 */
export async function waitGroupEmpty(pgid: number, ms: number): Promise<boolean> {
  for (let waited = 0; groupMembers(pgid).length > 0; waited += GROUP_POLL_MS) {
    if (waited >= ms) return false;
    await new Promise((r) => setTimeout(r, GROUP_POLL_MS));
  }
  return true;
}
