/**
 * Runs a short command and collects its output, bounded in time: past the
 * deadline the command is SIGKILLed, and pipes that a leftover descendant
 * still holds open are abandoned after a grace period, so a caller never
 * hangs on a command that did not end.
 *
 * @module
 */

/** How a short command ended. */
export interface CommandResult {
  /** Exit code (128 + n when killed by signal n). */
  code: number;
  /** The signal that ended it, or null. */
  signal: Deno.Signal | null;
  /** True when it exited with code 0. */
  success: boolean;
  /** Its standard output, as UTF-8 text. */
  stdout: string;
  /** Its standard error, as UTF-8 text. */
  stderr: string;
  /** True when it ran past its timeout and was killed. */
  timedOut: boolean;
}

/** Options of {@link runBounded}. */
export interface BoundedOptions {
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Working directory. */
  cwd?: string;
  /** Kill the command after this many milliseconds (default 10 000). */
  timeoutMs?: number;
  /** Called with the child once it runs; the returned function when it has ended. */
  track?: (child: Deno.ChildProcess) => () => void;
}

/** How long pipes may stay open after the command ended (a descendant holding them). */
const DRAIN_GRACE_MS = 2000;

/** Runs `cmd args`, for at most `timeoutMs`; see the module doc. */
export async function runBounded(
  cmd: string,
  args: readonly string[],
  options: BoundedOptions = {},
): Promise<CommandResult> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`Cannot run ${cmd}: timeoutMs must be positive, got ${timeoutMs}`);
  }
  const child = new Deno.Command(cmd, {
    args: [...args],
    env: options.env,
    cwd: options.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const untrack = options.track?.(child);
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // Exited in the meantime.
    }
  }, timeoutMs);
  let status: Deno.CommandStatus;
  try {
    status = await child.status;
  } finally {
    clearTimeout(timer);
    untrack?.();
  }
  const [out, err] = await drain([stdout, stderr], DRAIN_GRACE_MS);
  return {
    code: status.code,
    signal: status.signal,
    success: status.success,
    stdout: out,
    stderr: err,
    timedOut,
  };
}

/** A stream being read to its end, which can be abandoned. */
export interface Collecting {
  /** All the text read, once the stream ended or was cancelled. */
  text: Promise<string>;
  /** Stops reading; `text` then resolves with what was read so far. */
  cancel(): Promise<void>;
}

/** Reads `stream` to its end in the background. */
export function collect(stream: ReadableStream<Uint8Array>): Collecting {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const text = (async () => {
    let out = "";
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        out += decoder.decode(value, { stream: true });
      }
    } catch {
      // Cancelled: keep what was read.
    }
    return out + decoder.decode();
  })();
  return {
    text,
    cancel: () => reader.cancel().catch(() => {}),
  };
}

/**
 * Waits for every stream to end, for at most `graceMs`; streams still open
 * then are cancelled. Returns their texts in order.
 */
export async function drain(streams: readonly Collecting[], graceMs: number): Promise<string[]> {
  const all = Promise.all(streams.map((s) => s.text));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), graceMs);
  });
  try {
    const first = await Promise.race([all, late]);
    if (first !== "late") return first;
  } finally {
    clearTimeout(timer);
  }
  await Promise.all(streams.map((s) => s.cancel()));
  return await all;
}
