/**
 * CPU seconds a process has used (user + system, all its threads), from
 * `/proc/<pid>/stat`: what a benchmark on a shared machine can compare when
 * wall times are noise (other processes take turns on the same cores, but
 * do not add to this process's CPU time). Linux only.
 *
 * @module
 */

/** Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU time of a process, seconds. */
export interface CpuTime {
  user: number;
  system: number;
}

/**
 * The CPU time of `pid` (default: this process) so far; with
 * `children`, the time of its waited-for children instead (`cutime`,
 * `cstime`: what a shell's commands used once they exited).
 */
export function cpuTime(pid: number | "self" = "self", children = false): CpuTime {
  const text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // utime, stime, cutime, cstime are fields 14 to 17, i.e. 11 to 14 after the name.
  const at = children ? 13 : 11;
  return {
    user: Number(fields[at]) / TICKS_PER_SECOND,
    system: Number(fields[at + 1]) / TICKS_PER_SECOND,
  };
}

/** `b - a`. */
export function cpuSince(a: CpuTime, b: CpuTime): CpuTime {
  return { user: b.user - a.user, system: b.system - a.system };
}
