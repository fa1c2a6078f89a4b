/**
 * One run's engine process (design §9.1, §9.2): the process group llmgw
 * spawned or adopted, its pid file, how it ended, and stopping it whole.
 * The runner (shard_runner.ts) decides what happens; this is the process
 * it acts on.
 *
 * @module
 */
import { spawnEngine } from "./engine_spawn.ts";
import { fingerprint, type PidRecord, writePidFile } from "./pid_file.ts";
import { endsWithin } from "./process_end.ts";
import { groupMembers, isRunning, signalGroup, waitGroupEmpty } from "./proc.ts";

/** What a spawned process's pid file says besides the process itself. */
export type RunFacts = Omit<
  PidRecord,
  "version" | "pid" | "pgid" | "start_time" | "cmdline" | "started_at"
>;

/** An engine's process group: spawned by this agent, or adopted from a previous one. */
export class EngineProcess {
  /** The group leader. */
  readonly pid: number;
  /** Its kernel start time (0 when /proc did not say). */
  readonly startTime: number;
  /** Whether a previous agent started it. */
  readonly adopted: boolean;
  readonly #child: Deno.ChildProcess | null;
  readonly #pidFile: string;
  #record: PidRecord;
  #exit: Deno.CommandStatus | null = null;

  private constructor(
    child: Deno.ChildProcess | null,
    record: PidRecord,
    pidFile: string,
  ) {
    this.#child = child;
    this.#record = record;
    this.#pidFile = pidFile;
    this.pid = record.pid;
    this.startTime = record.start_time;
    this.adopted = child === null;
    child?.status.then((s) => this.#exit = s);
  }

  /**
   * Spawns `argv` in a session of its own, its output appended to
   * `facts.log_path`, and writes its pid file, dated `startedAt` (the
   * supervisor's clock).
   *
   * @throws {Error} When the process cannot be spawned or its pid file written.
   */
  static spawn(
    argv: readonly string[],
    env: Record<string, string>,
    pidFile: string,
    facts: RunFacts,
    startedAt: number,
  ): EngineProcess {
    const child = spawnEngine(facts.log_path, argv, env);
    const fp = fingerprint(child.pid);
    const record: PidRecord = {
      version: 1,
      ...facts,
      pid: child.pid,
      pgid: child.pid,
      start_time: fp?.start_time ?? 0,
      cmdline: fp?.cmdline ?? [...argv],
      started_at: startedAt,
    };
    try {
      writePidFile(pidFile, record);
    } catch (e) {
      // Untracked, it would outlive every agent: it does not run at all.
      signalGroup(child.pid, "SIGKILL");
      throw e;
    }
    return new EngineProcess(child, record, pidFile);
  }

  /** Takes over a process whose fingerprint matched its pid file (design §9.2). */
  static adopt(record: PidRecord, pidFile: string): EngineProcess {
    return new EngineProcess(null, record, pidFile);
  }

  /** How it ended, once it did and this agent is its parent; null otherwise. */
  get exit(): Deno.CommandStatus | null {
    return this.#exit;
  }

  /** Whether it still runs: its exit status for a child, /proc for an adopted process. */
  alive(): boolean {
    if (this.#child !== null) return this.#exit === null;
    return isRunning(this.pid, this.startTime);
  }

  /** Live members of its process group. */
  members(): number[] {
    return groupMembers(this.pid);
  }

  /** Whether it ends within `ms` (a process being killed is given a moment). */
  endsWithin(ms: number): Promise<boolean> {
    return endsWithin(this.#child, this.pid, this.startTime, ms);
  }

  /**
   * Keeps the recorded command line current: the exec chain (shell, shims,
   * interpreters) may settle after the engine is already loading, and a
   * stale fingerprint would make the next agent refuse to adopt it.
   */
  refreshCmdline(): void {
    if (this.adopted) return;
    const fp = fingerprint(this.pid);
    if (fp !== null && fp.cmdline.join("\0") !== this.#record.cmdline.join("\0")) {
      this.#record = { ...this.#record, cmdline: fp.cmdline };
      writePidFile(this.#pidFile, this.#record);
    }
  }

  /**
   * SIGTERM (when there is a grace period), wait, SIGKILL, wait until the
   * group is empty; a child is reaped, so its {@link exit} is known after.
   */
  async kill(graceMs: number): Promise<void> {
    const pgid = this.#record.pgid;
    if (graceMs > 0 && groupMembers(pgid).length > 0) {
      signalGroup(pgid, "SIGTERM");
      await waitGroupEmpty(pgid, graceMs);
    }
    if (groupMembers(pgid).length > 0) {
      signalGroup(pgid, "SIGKILL");
      await waitGroupEmpty(pgid, 10_000);
    }
    if (this.#child !== null) await this.#child.status;
  }

  /** Removes its pid file: the next agent must not adopt what this run was. */
  forget(): void {
    try {
      Deno.removeSync(this.#pidFile);
    } catch {
      // Already gone.
    }
  }
}
