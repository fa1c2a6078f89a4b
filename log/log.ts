/**
 * llmgw's one structured log (design §13), for the agent, the control plane,
 * the supervisor and the gateway: one JSON object per line on stderr,
 * `{"ts", "level", "component", "msg", …fields}`. Secrets (join, node and
 * local tokens) are never passed to the log; as a second line of defence
 * every known secret that still shows up in a line is replaced by
 * `[redacted]` before it is written.
 *
 * @module
 */

/** How bad a log line is. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Writes log lines. */
export interface Logger {
  /** Logs `msg` with structured `fields` at `level`. */
  log(level: LogLevel, msg: string, fields?: Record<string, unknown>): void;
  /** Shorthand for `log("info", …)`. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** Shorthand for `log("warn", …)`. */
  warn(msg: string, fields?: Record<string, unknown>): void;
  /** Shorthand for `log("error", …)`. */
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** Secrets shorter than this are not searched for: they would redact ordinary words. */
const MIN_SECRET_LENGTH = 8;

const encoder = new TextEncoder();

/** Writes a line to stderr (the default sink). */
export function stderrSink(line: string): void {
  try {
    Deno.stderr.writeSync(encoder.encode(line + "\n"));
  } catch {
    // A closed stderr must not take the process down.
  }
}

/**
 * Formats one log line (pure): `{"ts", "level", "component", "msg", …fields}`,
 * with every secret of at least 8 characters replaced by `[redacted]`.
 */
export function formatLogLine(
  at: Date,
  level: LogLevel,
  component: string,
  msg: string,
  fields: Record<string, unknown>,
  secrets: readonly string[],
): string {
  let line: string;
  try {
    line = JSON.stringify({ ts: at.toISOString(), level, component, msg, ...fields });
  } catch {
    line = JSON.stringify({ ts: at.toISOString(), level, component, msg });
  }
  for (const s of secrets) {
    if (s.length >= MIN_SECRET_LENGTH) line = line.replaceAll(s, "[redacted]");
  }
  return line;
}

/**
 * A logger for `component` writing to `sink`; `secrets` is asked for the
 * current secrets on every line (tokens change when the agent re-registers).
 */
export function createLogger(
  component: string,
  sink: (line: string) => void = stderrSink,
  secrets: () => readonly string[] = () => [],
): Logger {
  const log = (level: LogLevel, msg: string, fields: Record<string, unknown> = {}) => {
    try {
      sink(formatLogLine(new Date(), level, component, msg, fields, secrets()));
    } catch {
      // Logging never breaks the process that logs.
    }
  };
  return {
    log,
    info: (msg, fields) => log("info", msg, fields),
    warn: (msg, fields) => log("warn", msg, fields),
    error: (msg, fields) => log("error", msg, fields),
  };
}

/**
 * A line callback (the form the control plane's, HA's and the gateway's
 * notes take: `log?: (line) => void`) that writes each line through
 * `logger` as its `msg` at `level`, so a service's notes are JSON lines too.
 */
export function lineSink(logger: Logger, level: LogLevel): (line: string) => void {
  return (line) => logger.log(level, line);
}
