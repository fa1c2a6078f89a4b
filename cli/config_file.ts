/**
 * Config files for the services (`control serve --config`, `gateway serve
 * --config`; the units in deploy/systemd use them). A config file is JSON
 * whose keys are the command's flags in snake_case; it is read into flags
 * placed before the command line's own, so a flag given on the command line
 * wins (and a repeatable one adds to the file's). Relative paths in the file
 * are relative to the file. Secrets never belong here: they come from the
 * environment (the units' EnvironmentFile).
 *
 * @module
 */
import { dirname, resolve } from "node:path";
import type { z } from "zod";
import { formatPath } from "../validation/issues.ts";
import { zodIssues } from "../validation/issues.ts";
import { UsageError } from "./usage_error.ts";
import { errorMessage } from "../text/error_message.ts";

/** A config value: what a flag takes. */
type FlagValue = string | number | boolean | readonly string[];

/**
 * The `--config FILE` of `args`, removed, and the file's settings as flags in
 * front of what is left.
 *
 * @param command The command, for messages (`control serve`).
 * @param schema The file's keys and their types (strict: an unknown key is an error).
 * @param pathKeys Keys whose values are paths, resolved against the file's directory.
 * @throws {UsageError} Naming the file and the field, when it cannot be read or used.
 */
export function expandConfig(
  command: string,
  args: readonly string[],
  schema: z.ZodType<Record<string, FlagValue | undefined>>,
  pathKeys: readonly string[] = [],
): string[] {
  const rest: string[] = [];
  let file: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--config" || a.startsWith("--config=")) {
      const value = a === "--config" ? args[++i] : a.slice("--config=".length);
      if (value === undefined || value === "") {
        throw new UsageError(`${command}: --config needs a FILE`);
      }
      if (file !== null) throw new UsageError(`${command}: --config is given twice`);
      file = value;
    } else rest.push(a);
  }
  if (file === null) return rest;
  return [...configFlags(command, file, schema, pathKeys), ...rest];
}

function configFlags(
  command: string,
  file: string,
  schema: z.ZodType<Record<string, FlagValue | undefined>>,
  pathKeys: readonly string[],
): string[] {
  let text: string;
  try {
    text = Deno.readTextFileSync(file);
  } catch (e) {
    throw new UsageError(
      `${command}: cannot read --config ${file}: ${errorMessage(e)}`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UsageError(
      `${command}: cannot parse ${file}: not valid JSON (${errorMessage(e)})`,
    );
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const [issue] = zodIssues(parsed.error);
    throw new UsageError(
      `${command}: cannot use ${file}: ${formatPath(issue.path)}: ${issue.message}`,
    );
  }
  const base = dirname(resolve(file));
  const flags: string[] = [];
  for (const [key, value] of Object.entries(parsed.data)) {
    if (value === undefined || value === false) continue;
    const flag = `--${key.replaceAll("_", "-")}`;
    // A path resolves against the file; ":memory:" and URLs (postgres://…) stay as written.
    const path = (v: string) =>
      pathKeys.includes(key) && v !== ":memory:" && !/^[a-z][a-z0-9+.-]*:\/\//i.test(v)
        ? resolve(base, v)
        : v;
    if (value === true) flags.push(flag);
    else if (Array.isArray(value)) { for (const v of value) flags.push(flag, path(String(v))); }
    else flags.push(flag, path(String(value)));
  }
  return flags;
}
