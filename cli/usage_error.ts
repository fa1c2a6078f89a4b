/**
 * Command-line errors, and flag parsing that turns node:util's exceptions
 * into them (node:util parseArgs stands in for @std/cli, which is JSR-only).
 *
 * @module
 */
import { ControlUrlError, parseControlUrls } from "../http/failover_fetch.ts";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { errorMessage } from "../text/error_message.ts";

/** A mistake on the command line: printed on one line without a stack trace, exit code 2. */
export class UsageError extends Error {
  /** The command whose `--help` tells the fix, e.g. `get`; absent: top-level help. */
  readonly command?: string;
  /** Creates the error; `message` says what was wrong and where. */
  constructor(message: string, command?: string) {
    super(message);
    this.name = "UsageError";
    this.command = command;
  }
}

/**
 * node:util's parse errors in our words: one line naming the flag and the
 * fix (its own text quotes unevenly and speaks of positionals).
 */
export function flagErrorMessage(command: string, error: unknown): string {
  const code = (error as { code?: string }).code;
  const text = errorMessage(error);
  const flag = /'[^']*?(--[\w-]+)/.exec(text)?.[1] ?? /'(-\w)/.exec(text)?.[1] ?? "a flag";
  switch (code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `${command}: unknown flag ${flag}`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      return /argument missing/.test(text)
        ? `${command}: ${flag} needs a value, e.g. ${flag} VALUE`
        : `${command}: ${flag} takes no value; write ${flag} alone`;
    case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
      return `${command}: unexpected argument`;
    default:
      return `${command}: ${text.replace(/\s*\n\s*/g, " ")}`;
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
    throw new UsageError(flagErrorMessage(command, e), command);
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

/**
 * The control planes' URLs from the first source that has any (flag, then
 * environment, then config file), comma-separated or repeated (issue #15).
 *
 * @throws {UsageError} Naming the command, the flag and the entry that is not an http(s) URL.
 */
export function controlUrlsOf(
  command: string,
  flag: string,
  sources: readonly (readonly string[] | undefined)[],
): string[] {
  for (const source of sources) {
    if (source === undefined) continue;
    try {
      const urls = parseControlUrls(source, `${command}: ${flag}`);
      if (urls.length > 0) return urls;
    } catch (e) {
      if (e instanceof ControlUrlError) throw new UsageError(e.message);
      throw e;
    }
  }
  return [];
}
