/**
 * How an engine process ended (design §9.3): waiting a moment for the end of
 * one that may be dying, and saying it in words, its exit code or the
 * signal that killed it by number and name, the way an operator reads
 * `kill -9` back. A process's own end is its failure's first explanation,
 * before any guess from what /proc shows of its port.
 *
 * @module
 */
import { isRunning } from "./proc.ts";

/** Linux signal numbers (x86-64 and arm64 agree on these), by name. */
const SIGNAL_NUMBERS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGILL: 4,
  SIGTRAP: 5,
  SIGABRT: 6,
  SIGBUS: 7,
  SIGFPE: 8,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
  SIGSTKFLT: 16,
  SIGCHLD: 17,
  SIGCONT: 18,
  SIGSTOP: 19,
  SIGTSTP: 20,
  SIGTTIN: 21,
  SIGTTOU: 22,
  SIGURG: 23,
  SIGXCPU: 24,
  SIGXFSZ: 25,
  SIGVTALRM: 26,
  SIGPROF: 27,
  SIGWINCH: 28,
  SIGIO: 29,
  SIGPWR: 30,
  SIGSYS: 31,
};

/** How a process ended. */
export interface ProcessEnd {
  /** Exit code; meaningful when no signal ended it. */
  code: number;
  /** The signal that ended it (`SIGKILL`), or null. */
  signal: string | null;
}

/**
 * "killed by signal 9 (SIGKILL)", "exited with code 1", or, for a process
 * whose status this agent cannot learn (adopted: not its child),
 * "process 4242 is gone".
 */
export function exitReason(end: ProcessEnd | null, pid: number | null): string {
  if (end === null) return `process ${pid ?? "?"} is gone`;
  if (end.signal === null) return `exited with code ${end.code}`;
  const n = SIGNAL_NUMBERS[end.signal];
  return n === undefined
    ? `killed by signal ${end.signal}`
    : `killed by signal ${n} (${end.signal})`;
}

/**
 * Whether the process ends within `ms`: a child's exit status, or /proc for
 * a process this agent adopted (not its child), polled every 50 ms.
 */
export async function endsWithin(
  child: Deno.ChildProcess | null,
  pid: number,
  startTime: number | undefined,
  ms: number,
): Promise<boolean> {
  if (child !== null) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ended = await Promise.race([
      child.status.then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
    ]);
    clearTimeout(timer);
    return ended;
  }
  for (let i = 0; i <= ms / 50; i++) {
    if (!isRunning(pid, startTime)) return true;
    if (i < ms / 50) await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
