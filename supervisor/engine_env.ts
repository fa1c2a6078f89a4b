/**
 * The environment engines start from.
 *
 * @module
 */

/**
 * The agent's own environment minus llmgw's (`LLMGW_*` holds tokens and
 * agent settings an engine has no business reading).
 */
export function engineBaseEnv(): Record<string, string> {
  const env = Deno.env.toObject();
  for (const key of Object.keys(env)) if (key.startsWith("LLMGW_")) delete env[key];
  return env;
}
