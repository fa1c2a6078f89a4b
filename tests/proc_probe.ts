/**
 * Test helpers that watch processes through `/proc` (Linux): Deno has no
 * `kill(pid, 0)`, so a process counts as gone when it has no
 * `/proc/<pid>/stat` or that says it is a zombie. Used to prove that a killed
 * command left nothing behind, and to clean up when it did.
 *
 * Deno reads `/proc` only with `--allow-all`; under `deno task test`'s
 * narrower permissions the files are read by a `cat` child process instead.
 *
 * @module
 */

/** The fields of `/proc/<pid>/stat` these tests need. */
export interface ProcStat {
  /** The command name (`comm`), e.g. `sleep`. */
  comm: string;
  /** One letter: R, S, D, Z, T, X, … */
  state: string;
  /** Parent pid. */
  ppid: number;
  /** Process group id. */
  pgrp: number;
}

let readProcDirectly: boolean | null = null;

/** Every process now, by pid, from `/proc/<pid>/stat`. */
export function processes(): Map<number, ProcStat> {
  const out = new Map<number, ProcStat>();
  for (const line of readAllStats()) {
    // "pid (comm) state ppid pgrp …"; comm may itself contain spaces and parens.
    const m = /^(\d+) \((.*)\) (\S) (-?\d+) (-?\d+) /s.exec(line);
    if (m !== null) {
      out.set(Number(m[1]), { comm: m[2], state: m[3], ppid: Number(m[4]), pgrp: Number(m[5]) });
    }
  }
  return out;
}

function readAllStats(): string[] {
  if (readProcDirectly !== false) {
    try {
      const lines: string[] = [];
      for (const entry of Deno.readDirSync("/proc")) {
        if (!/^\d+$/.test(entry.name)) continue;
        try {
          lines.push(Deno.readTextFileSync(`/proc/${entry.name}/stat`));
        } catch {
          // Exited while we looked.
        }
      }
      readProcDirectly = true;
      return lines;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotCapable) && !(e instanceof Deno.errors.PermissionDenied)) {
        throw e;
      }
      readProcDirectly = false;
    }
  }
  const out = new Deno.Command("/bin/sh", {
    args: ["-c", "cat /proc/[0-9]*/stat 2>/dev/null; true"],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).outputSync();
  // Each stat file is one line ending in a newline.
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
}

function live(s: ProcStat | undefined): s is ProcStat {
  return s !== undefined && s.state !== "Z" && s.state !== "X";
}

/** True while the process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  return live(processes().get(pid));
}

/** Live processes among `pids` or in one of the process groups `groups`. */
export function aliveAmong(
  pids: readonly number[],
  groups: readonly number[],
  procs: Map<number, ProcStat> = processes(),
): number[] {
  const out: number[] = [];
  for (const [pid, s] of procs) {
    if (live(s) && (pids.includes(pid) || groups.includes(s.pgrp))) out.push(pid);
  }
  return out.sort((a, b) => a - b);
}

/**
 * Polls until none of `pids` and no member of the process groups `groups` is
 * alive, for at most `withinMs`. Returns the survivors (empty when all went).
 */
export async function survivorsAfter(
  pids: readonly number[],
  groups: readonly number[],
  withinMs = 2000,
): Promise<number[]> {
  // Not until(): the answer here is who survived the deadline, which a caller asserts empty.
  const deadline = Date.now() + withinMs;
  while (true) {
    const alive = aliveAmong(pids, groups);
    if (alive.length === 0 || Date.now() >= deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * SIGKILLs every listed pid, group member and descendant of those still
 * alive whose command is one of `commands` (a guard against killing an
 * unrelated process that reused a pid). For `finally` blocks: a failing test
 * must not leak processes.
 */
export function killLeftovers(
  pids: readonly number[],
  groups: readonly number[],
  commands: readonly string[] = ["sh", "sleep", "yes", "cat", "head"],
): void {
  const procs = processes();
  const targets = new Set(aliveAmong(pids, groups, procs));
  // Their children too, found by parent pid, in case they left the group.
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, s] of procs) {
      if (live(s) && !targets.has(pid) && targets.has(s.ppid)) {
        targets.add(pid);
        grew = true;
      }
    }
  }
  for (const pid of targets) {
    if (!commands.includes(procs.get(pid)!.comm)) continue;
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // Gone in the meantime.
    }
  }
}

/** Reads the pids a script wrote to `path` (one per line); empty when none yet. */
export function readPids(path: string): number[] {
  let text = "";
  try {
    text = Deno.readTextFileSync(path);
  } catch {
    return [];
  }
  return text.split("\n").filter((l) => /^\d+$/.test(l.trim())).map((l) => Number(l.trim()));
}

/** How a promise settled. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Waits for `promise` at most `withinMs`. When it has not settled by then,
 * calls `cleanUp` (kill what the code under test left running, so its pipes
 * close), waits for it to settle after all, and throws: a broken kill must
 * fail the test, not hang the test run.
 */
export async function settleWithin<T>(
  promise: Promise<T>,
  withinMs: number,
  cleanUp: () => void,
): Promise<Settled<T>> {
  const settled: Promise<Settled<T>> = promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<"hung">((resolve) => {
    timer = setTimeout(() => resolve("hung"), withinMs);
  });
  try {
    const first = await Promise.race([settled, hung]);
    if (first !== "hung") return first;
  } finally {
    clearTimeout(timer);
  }
  cleanUp();
  await settled;
  throw new Error(`did not settle within ${withinMs} ms; leftover processes were killed`);
}

/**
 * Whether process `pid` has a handler for signal number `signal` (its bit in
 * `SigCgt` of `/proc/<pid>/status`): a process that prints that it listens
 * before it installs its SIGTERM handler is only stopped gracefully after.
 * False when the process is gone.
 */
export function catchesSignal(pid: number, signal: number): boolean {
  let status: string;
  try {
    status = Deno.readTextFileSync(`/proc/${pid}/status`);
  } catch {
    return false;
  }
  const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return mask !== undefined && (BigInt(`0x${mask}`) >> BigInt(signal - 1) & 1n) === 1n;
}
