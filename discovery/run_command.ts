/**
 * Runs a discovery tool (nvidia-smi) with a deadline and an output cap: a
 * hung or babbling tool must never hang or bloat the agent.
 *
 * @module
 */

/** What a finished command produced. */
export interface CommandOutput {
  /** Exit code. */
  code: number;
  /** The signal that ended it, or `null`. */
  signal: string | null;
  /** Everything it printed on standard output. */
  stdout: string;
  /** Everything it printed on standard error. */
  stderr: string;
}

/** Why a command produced no usable output. */
export type CommandFailureKind = "not-found" | "not-executable" | "timeout" | "too-large";

/** Raised when a command could not run to completion; `kind` says why. */
export class CommandError extends Error {
  /** Why the command failed. */
  readonly kind: CommandFailureKind;
  /** Creates the error. */
  constructor(kind: CommandFailureKind, message: string) {
    super(message);
    this.name = "CommandError";
    this.kind = kind;
  }
}

/** How long to keep reading a finished command's pipes (held open by an escaped child). */
const PIPE_DRAIN_MS = 250;

/** Limits for {@link runCommand}. */
export interface RunLimits {
  /** Kill the command (its whole process group) after this long. Default 10 s. */
  timeoutMs?: number;
  /** Kill the command once stdout plus stderr exceed this. Default 8 MiB. */
  maxOutputBytes?: number;
  /** Text written to the command's standard input (which is closed after it). */
  input?: string;
}

/**
 * Runs `path args…` in its own process group and collects its output. On
 * timeout or excess output the whole group is killed with SIGKILL, so a
 * wrapper script's children go too.
 *
 * @throws {CommandError} When the command is missing, not executable, timed
 * out or printed too much.
 */
export async function runCommand(
  path: string,
  args: string[],
  limits: RunLimits = {},
): Promise<CommandOutput> {
  const timeoutMs = limits.timeoutMs ?? 10_000;
  const maxBytes = limits.maxOutputBytes ?? 8 * 1024 * 1024;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(path, {
      args,
      stdin: limits.input === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new CommandError("not-found", `${path} not found`);
    }
    if (e instanceof Deno.errors.PermissionDenied) {
      throw new CommandError("not-executable", `${path} is not executable`);
    }
    throw new CommandError("not-executable", `${path} could not be started: ${String(e)}`);
  }
  if (limits.input !== undefined) {
    const writer = child.stdin.getWriter();
    // A command that exits without reading its input is not an error here.
    writer.write(new TextEncoder().encode(limits.input)).then(() => writer.close()).catch(() => {});
  }
  let failure: CommandError | null = null;
  const killGroup = (why: CommandError) => {
    failure ??= why;
    try {
      Deno.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  };
  const timer = setTimeout(() => {
    killGroup(new CommandError("timeout", `${path} did not finish within ${timeoutMs} ms; killed`));
    stopReading();
  }, timeoutMs);
  let total = 0;
  const readers: ReadableStreamDefaultReader<Uint8Array>[] = [];
  // A process that left the group (setsid) can hold the pipes open forever:
  // once we have given up on the command, or it has exited, stop reading.
  const stopReading = () => {
    for (const r of readers) r.cancel().catch(() => {});
  };
  const collect = async (stream: ReadableStream<Uint8Array>): Promise<string> => {
    const chunks: Uint8Array[] = [];
    const reader = stream.getReader();
    readers.push(reader);
    try {
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        total += value.byteLength;
        if (total > maxBytes) {
          killGroup(
            new CommandError("too-large", `${path} printed more than ${maxBytes} bytes; killed`),
          );
          stopReading();
          break;
        }
        chunks.push(value);
      }
    } catch {
      // Cancelled: keep what was read.
    } finally {
      reader.releaseLock();
    }
    const decoder = new TextDecoder();
    return chunks.map((c) => decoder.decode(c, { stream: true })).join("") + decoder.decode();
  };
  let drainTimer: ReturnType<typeof setTimeout> | undefined;
  try {
    const status = child.status.then((s) => {
      // The command is done; give stragglers holding its pipes a moment, no more.
      drainTimer = setTimeout(stopReading, PIPE_DRAIN_MS);
      return s;
    });
    const outputs = Promise.all([collect(child.stdout), collect(child.stderr)]);
    const [[stdout, stderr], finished] = await Promise.all([outputs, status]);
    if (failure !== null) throw failure;
    return { code: finished.code, signal: finished.signal, stdout, stderr };
  } finally {
    clearTimeout(timer);
    clearTimeout(drainTimer);
  }
}
