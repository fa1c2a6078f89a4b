/**
 * Engine API keys (design §11.2): each shard's engine gets a random key that
 * only the agent's engine proxy sends. This module keeps a profile from
 * setting that key itself and adds a key to a shard's command at spawn time,
 * the way its engine declares ({@link EngineApiKey}). Pure: it never
 * generates, stores or logs a key.
 *
 * @module
 */
import type { EngineApiKey, EngineCommand, LaunchProfile } from "./types.ts";

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
  const flags = [...("flag" in check.key ? [check.key.flag] : []), ...(check.also_flags ?? [])];
  const seen = new Set<string>();
  for (const raw of profile.engine_args) {
    const hit = flagHit(check.normalize?.(raw) ?? raw, flags);
    if (hit !== undefined && !seen.has(hit)) {
      seen.add(hit);
      problems.push(`${name}: engine_args sets ${hit}, ${why}; remove it`);
    }
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
 * The command with `secret` added the way `key` says: the variable set in
 * its environment, or the flag and the key appended to its argv. The key
 * must be non-empty (vLLM reads an empty `VLLM_API_KEY` as no key at all)
 * and fit in an HTTP header without quoting.
 *
 * @throws {EngineApiKeyError} When the key is empty or has characters outside visible ASCII.
 */
export function withApiKey(
  command: EngineCommand,
  key: EngineApiKey,
  secret: string,
): EngineCommand {
  if (secret === "") throw new EngineApiKeyError("Cannot add engine API key: value is empty");
  if (!/^[\x21-\x7e]+$/.test(secret)) {
    throw new EngineApiKeyError(
      "Cannot add engine API key: it must be visible ASCII without spaces, to travel in a Bearer header",
    );
  }
  if ("env" in key) return { argv: [...command.argv], env: { ...command.env, [key.env]: secret } };
  return { argv: [...command.argv, key.flag, secret], env: { ...command.env } };
}
