/**
 * Engine API keys (design §11.2): each shard's engine gets a random key that
 * only the agent's engine proxy sends. This module keeps a profile from
 * setting that key itself and adds a key to a shard's command at spawn time,
 * the way its engine declares ({@link EngineApiKey}). Pure: it never
 * generates, stores, writes or logs a key; the supervisor writes the file
 * {@link withApiKey} describes.
 *
 * @module
 */
import { join } from "node:path";
import type { EngineApiKey, EngineCommand, LaunchProfile } from "./types.ts";

/**
 * The file a `config_file` engine reads its key from, in the shard's
 * directory. The `.yaml` suffix is required: SGLang refuses any other
 * ("Config file must be YAML format", engine reference §6.2).
 */
export const ENGINE_KEY_CONFIG_FILE = "engine_key.yaml";

/** Raised when a key cannot be added to a command; the message never holds the key. */
export class EngineApiKeyError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "EngineApiKeyError";
  }
}

/** What {@link apiKeyProblems} checks a profile against. */
export interface ApiKeyCheck {
  /** How the engine takes its key. */
  key: EngineApiKey;
  /** Other flags that set the key, e.g. vLLM's `--api-key`, which beats `VLLM_API_KEY`. */
  also_flags?: readonly string[];
  /** Rewrites an argument before matching (vLLM reads `--api_key` as `--api-key`). */
  normalize?: (arg: string) => string;
}

/**
 * Problems with a profile that sets the engine API key itself: in `env`
 * (the declared variable) or in `engine_args` (the declared flag and
 * `also_flags`, as `--flag`, `--flag=value` or an argparse abbreviation).
 * A key from the profile would be a shared, long-lived secret in the
 * deployment, and an engine that takes its key from argv before the
 * environment would refuse the proxy's. Messages name the flag or variable,
 * never the argument, which may hold a secret.
 */
export function apiKeyProblems(
  engine: string,
  profile: LaunchProfile,
  check: ApiKeyCheck,
): string[] {
  const name = `profile "${profile.name}"`;
  const why = `the ${engine} API key, which llmgw generates for every shard`;
  const problems: string[] = [];
  if ("env" in check.key && Object.hasOwn(profile.env, check.key.env)) {
    problems.push(`${name}: env ${check.key.env} is ${why}; remove it from the profile`);
  }
  const file = "config_file" in check.key ? check.key.config_file : null;
  const flags = [
    ...("flag" in check.key ? [check.key.flag] : []),
    // A flag named like the file's field would beat the file: the CLI wins.
    ...(file === null ? [] : [`--${file.field}`, file.flag]),
    ...(check.also_flags ?? []),
  ];
  const seen = new Set<string>();
  for (const raw of profile.engine_args) {
    const hit = flagHit(check.normalize?.(raw) ?? raw, flags);
    if (hit === undefined || seen.has(hit)) continue;
    seen.add(hit);
    problems.push(
      hit === file?.flag
        // The engine takes one such file (SGLang refuses a second), and it is the key's.
        ? `${name}: engine_args sets ${hit}, the file llmgw gives ${engine} its API key in; put that file's settings in engine_args instead`
        : `${name}: engine_args sets ${hit}, ${why}; remove it`,
    );
  }
  return problems;
}

/** argparse's matching: exact, `--flag=value`, or an unambiguous prefix of a long flag. */
function flagHit(arg: string, flags: readonly string[]): string | undefined {
  if (!arg.startsWith("-") || arg === "-" || arg === "--") return undefined;
  const flag = arg.split("=")[0];
  return flags.find((f) =>
    f === flag || (flag.startsWith("--") && flag.length > 3 && f.startsWith(flag))
  );
}

/**
 * Flags engines take a secret in, for scrubbing a command line llmgw did
 * not build, and how many values each takes: vLLM's and SGLang's
 * `--api-key` (vLLM takes several), SGLang's `--admin-api-key` (engine
 * reference §6), and vLLM's `--hf-token` (`nargs='?'`: one value, or none
 * for the token `hf auth login` stored). An exec plugin's own key flag is
 * not known here.
 */
const KNOWN_KEY_FLAGS: ReadonlyMap<string, number> = new Map([
  ["--api-key", Infinity],
  ["--admin-api-key", Infinity],
  ["--hf-token", 1],
]);

/** How many values after `name` are a secret: 0 when it is no known key flag. */
function keyFlagValues(name: string): number {
  const hit = flagHit(name.replaceAll("_", "-"), [...KNOWN_KEY_FLAGS.keys()]);
  return hit === undefined ? 0 : KNOWN_KEY_FLAGS.get(hit)!;
}

/**
 * `argv` with the values of known key flags replaced by `***`, for showing
 * another process's command line (a port's holder, a pid's new owner):
 * `--api-key K`, every value after it up to the next option (vLLM takes
 * several keys), `--api-key=K`, `_` spellings and argparse abbreviations.
 * An argument holding a whole shell command (`sh -c "vllm serve … --api-key
 * K"`, as Ray's workers are started) has its words scrubbed alike.
 */
export function scrubKeyArgs(argv: readonly string[]): string[] {
  const out: string[] = [];
  let left = 0; // values still to hide after a key flag
  for (const arg of argv) {
    if (left > 0 && arg !== "" && !arg.startsWith("-")) {
      out.push("***");
      left--;
      continue;
    }
    left = 0;
    if (/\s/.test(arg)) {
      out.push(scrubWords(arg));
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg : arg.slice(0, eq);
    const values = keyFlagValues(name);
    if (values > 0 && eq >= 0) {
      out.push(`${name}=***`);
      continue;
    }
    out.push(arg);
    left = values;
  }
  return out;
}

/** One argument holding several words (a shell command): each word scrubbed, the spacing kept. */
function scrubWords(arg: string): string {
  const parts = arg.split(/(\s+)/); // words at even indices, the whitespace between at odd
  const words = scrubKeyArgs(parts.filter((_, i) => i % 2 === 0));
  return parts.map((p, i) => i % 2 === 0 ? words[i / 2] : p).join("");
}

/** A file to write before the spawn: owner-only (0600), created fresh. Its text holds the key. */
export interface EngineKeyFile {
  /** Where: {@link ENGINE_KEY_CONFIG_FILE} in the shard's directory. */
  path: string;
  /** What, e.g. `"api-key": "KEY"` and a newline. */
  text: string;
}

/** A shard's command with its key added, and the file that holds the key, if any. */
export interface KeyedCommand {
  /** The command to spawn. */
  command: EngineCommand;
  /** The file to write before the spawn (`config_file` engines); null for the others. */
  file: EngineKeyFile | null;
}

/**
 * The command with `secret` added the way `key` says: the variable set in
 * its environment; the flag and the key appended to its argv; or, for a
 * `config_file` engine, `flag PATH` appended and the file at PATH (in the
 * shard's directory `dir`) holding one YAML line, `"field": "KEY"`. Both
 * key and value are double-quoted, as JSON writes them, so YAML reads them
 * as strings whatever they look like (`123`, `yes`, `null`). The key must
 * be non-empty (vLLM reads an empty `VLLM_API_KEY` as no key at all) and
 * fit in an HTTP header without quoting. For the flag and file forms it
 * must not start with `-`: argparse reads such a value as an option and
 * exits ("argument --api-key: expected one argument"), and SGLang turns the
 * file's entry into that very argument.
 *
 * @throws {EngineApiKeyError} When the key is empty, has characters outside
 * visible ASCII, or starts with `-` for the flag or file form.
 */
export function withApiKey(
  command: EngineCommand,
  key: EngineApiKey,
  secret: string,
  dir: string,
): KeyedCommand {
  if (secret === "") throw new EngineApiKeyError("Cannot add engine API key: value is empty");
  if (!/^[\x21-\x7e]+$/.test(secret)) {
    throw new EngineApiKeyError(
      "Cannot add engine API key: it must be visible ASCII without spaces, to travel in a Bearer header",
    );
  }
  if (!("env" in key) && secret.startsWith("-")) {
    throw new EngineApiKeyError(
      "Cannot add engine API key: it starts with '-', which argparse would read as an option",
    );
  }
  const argv = [...command.argv];
  const env = { ...command.env };
  if ("env" in key) return { command: { argv, env: { ...env, [key.env]: secret } }, file: null };
  if ("flag" in key) return { command: { argv: [...argv, key.flag, secret], env }, file: null };
  const path = join(dir, ENGINE_KEY_CONFIG_FILE);
  return {
    command: { argv: [...argv, key.config_file.flag, path], env },
    file: { path, text: `${JSON.stringify(key.config_file.field)}: ${JSON.stringify(secret)}\n` },
  };
}
