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
