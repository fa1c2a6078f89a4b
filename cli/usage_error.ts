/**
 * Command-line errors, and flag parsing that turns node:util's exceptions
 * into them (node:util parseArgs stands in for @std/cli, which is JSR-only).
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

/** A mistake on the command line: printed without a stack trace, exit code 2. */
export class UsageError extends Error {
  /** Creates the error; `message` says what was wrong and where. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Parses flags strictly; unknown or malformed flags become a {@link UsageError}. */
export function parseFlags<T extends NonNullable<ParseArgsConfig["options"]>>(
  command: string,
  args: string[],
  options: T,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (e) {
    const message = e instanceof Error ? e.message.replace(/\s*\n\s*/g, " ") : String(e);
    throw new UsageError(`${command}: ${message}`);
  }
}

/**
 * Parses `HOST:PORT` (`[::1]:80` for IPv6, `:80` for all interfaces).
 *
 * @throws {UsageError} Naming the flag and the value.
 */
export function parseListen(value: string, flag = "--listen"): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]*)):(\d{1,5})$/.exec(value);
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || port > 65535) {
    throw new UsageError(`${flag} "${value}": expected HOST:PORT, e.g. 127.0.0.1:7070`);
  }
  return { hostname: m[1] ?? (m[2] || "0.0.0.0"), port };
}
