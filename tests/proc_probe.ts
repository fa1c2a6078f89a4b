/**
 * Test helpers that watch processes through `/proc` (Linux): Deno has no
 * `kill(pid, 0)`, so a process counts as gone when `/proc/<pid>/stat` is
 * missing or says it is a zombie. Used to prove that a killed command left
 * nothing behind, and to clean up when it did.
 *
 * @module
 */

/** The fields of `/proc/<pid>/stat` these tests need. */
export interface ProcStat {
  /** One letter: R, S, D, Z, T, X, … */
  state: string;
  /** Parent pid. */
  ppid: number;
  /** Process group id. */
  pgrp: number;
}

/** Reads `/proc/<pid>/stat`; `null` when the process does not exist. */
export function procStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return null;
  }
  // "pid (comm) state ppid pgrp …"; comm may itself contain spaces and parens.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]) };
}

/** True while the process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  const s = procStat(pid);
  return s !== null && s.state !== "Z" && s.state !== "X";
}

/** Live processes whose process group is one of `groups`. */
export function groupMembers(groups: readonly number[]): number[] {
  const out: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    const s = procStat(pid);
    if (s !== null && s.state !== "Z" && s.state !== "X" && groups.includes(s.pgrp)) {
      out.push(pid);
    }
  }
  return out;
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
  const deadline = Date.now() + withinMs;
  while (true) {
    const alive = [...new Set([...pids.filter(isAlive), ...groupMembers(groups)])];
    if (alive.length === 0 || Date.now() >= deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * SIGKILLs every listed pid, group member and descendant of those still alive
 * whose command is one of `commands` (a guard against killing an unrelated process that reused a
 * pid). For `finally` blocks: a failing test must not leak processes.
 */
export function killLeftovers(
  pids: readonly number[],
  groups: readonly number[],
  commands: readonly string[] = ["sh", "sleep", "yes", "cat"],
): void {
  const targets = new Set([...pids, ...groupMembers(groups)]);
  // Their children too, found by parent pid, in case they left the group.
  const all = [...Deno.readDirSync("/proc")].filter((e) => /^\d+$/.test(e.name));
  for (let grew = true; grew;) {
    grew = false;
    for (const entry of all) {
      const pid = Number(entry.name);
      const s = procStat(pid);
      if (s !== null && !targets.has(pid) && targets.has(s.ppid)) {
        targets.add(pid);
        grew = true;
      }
    }
  }
  for (const pid of targets) {
    if (!isAlive(pid)) continue;
    let comm = "";
    try {
      comm = Deno.readTextFileSync(`/proc/${pid}/comm`).trim();
    } catch {
      continue;
    }
    if (!commands.includes(comm)) continue;
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
