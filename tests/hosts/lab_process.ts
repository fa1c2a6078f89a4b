/**
 * A long-running process in a lab host's namespace, its standard output and
 * error appended to one log file.
 *
 * It is started as `ip netns exec <ns> <cmd> <args…>`. `ip netns exec` joins
 * the namespace (setns, plus a private mount namespace for /sys) and then
 * execs the command in its own process: it does not fork. So the child's pid
 * is the command's own pid (checked by lab_test.ts through `/proc/<pid>/comm`
 * and `/proc/<pid>/ns/net`), and a signal sent to it reaches the command, not
 * a wrapper.
 *
 * @module
 */
import { type Collecting, drain } from "./bounded_command.ts";

/** Options of a spawned lab process. */
export interface SpawnOptions {
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Working directory (default: this process's). */
  cwd?: string;
  /** The log file for stdout and stderr together (default: one in the lab's log folder). */
  log?: string;
}

/** A process a lab host runs; see the module doc. */
export class LabProcess {
  /** The command's pid (the same as the `ip netns exec` child's: it execs). */
  readonly pid: number;
  /** When and how it ended. */
  readonly status: Promise<Deno.CommandStatus>;
  #child: Deno.ChildProcess;
  #exited: Deno.CommandStatus | null = null;
  #pumps: Collecting[];
  #logged: Promise<void>;
  #file: Deno.FsFile;

  private constructor(
    /** The host that runs it. */
    readonly host: string,
    /** The command line, without the `ip netns exec` part. */
    readonly command: readonly string[],
    /** The log file holding its stdout and stderr. */
    readonly log: string,
    child: Deno.ChildProcess,
    file: Deno.FsFile,
  ) {
    this.#child = child;
    this.#file = file;
    this.pid = child.pid;
    this.status = child.status.then((s) => (this.#exited = s));
    // One write at a time, so a chunk of stdout never splits one of stderr.
    let tail = Promise.resolve();
    const write = (chunk: Uint8Array) => (tail = tail.then(() => writeAll(file, chunk)));
    this.#pumps = [child.stdout, child.stderr].map((s) => collectInto(s, write));
    this.#logged = Promise.all(this.#pumps.map((p) => p.text)).then(() => tail);
  }

  /** Starts `cmd args` in namespace `netns`, logging to `log`. */
  static async start(
    host: string,
    netns: string,
    cmd: string,
    args: readonly string[],
    log: string,
    options: SpawnOptions = {},
  ): Promise<LabProcess> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(log, { write: true, create: true, append: true });
    } catch (e) {
      throw new Error(`Cannot spawn ${cmd} on host ${host}: cannot open log ${log}: ${e}`, {
        cause: e,
      });
    }
    try {
      const child = new Deno.Command("ip", {
        args: ["netns", "exec", netns, cmd, ...args],
        env: options.env,
        cwd: options.cwd,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      return new LabProcess(host, [cmd, ...args], log, child, file);
    } catch (e) {
      file.close();
      throw new Error(`Cannot spawn ${cmd} on host ${host}: ${String(e)}`, { cause: e });
    }
  }

  /** True once it has ended (and been reaped). */
  get exited(): boolean {
    return this.#exited !== null;
  }

  /** Sends `signal` (default SIGTERM); does nothing once it has ended. */
  kill(signal: Deno.Signal = "SIGTERM"): void {
    if (this.#exited !== null) return;
    try {
      this.#child.kill(signal);
    } catch (e) {
      // It ended between the check and the kill.
      if (!(e instanceof TypeError) && !(e instanceof Deno.errors.NotFound)) throw e;
    }
  }

  /** What it has logged so far. */
  async readLog(): Promise<string> {
    return await Deno.readTextFile(this.log);
  }

  /**
   * Ends it: SIGTERM, then SIGKILL when it has not ended after `termMs`, then
   * waits at most `killMs` more. True when it ended.
   */
  async stop(termMs: number, killMs: number): Promise<boolean> {
    this.kill("SIGTERM");
    if (await endsWithin(this.status, termMs)) return true;
    this.kill("SIGKILL");
    return await endsWithin(this.status, killMs);
  }

  /**
   * Flushes its log and closes the file: waits at most `graceMs` for its pipes
   * to close (a descendant may hold them), then stops reading them.
   */
  async closeLog(graceMs: number): Promise<void> {
    await drain(this.#pumps, graceMs);
    await this.#logged;
    this.#file.close();
  }
}

/** True when `p` settles within `ms`. */
export async function endsWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Reads `stream` to its end, handing each chunk to `write`; can be abandoned. */
function collectInto(
  stream: ReadableStream<Uint8Array>,
  write: (chunk: Uint8Array) => Promise<void>,
): Collecting {
  const reader = stream.getReader();
  const text = (async () => {
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        await write(value);
      }
    } catch {
      // Cancelled: what was read is in the log.
    }
    return "";
  })();
  return { text, cancel: () => reader.cancel().catch(() => {}) };
}

async function writeAll(file: Deno.FsFile, chunk: Uint8Array): Promise<void> {
  let written = 0;
  while (written < chunk.length) {
    const n = await file.write(chunk.subarray(written));
    // A write that makes no progress would spin: give up on the log instead.
    if (n <= 0) throw new Error("Cannot write the log: the file took no bytes");
    written += n;
  }
}
