/**
 * The environment engines start from.
 *
 * @module
 */
import { HUB_CREDENTIALS } from "../models/hub_env.ts";

/**
 * The agent's own environment minus llmgw's (`LLMGW_*` holds tokens and
 * agent settings an engine has no business reading) and the hub's
 * credentials ({@link HUB_CREDENTIALS}).
 */
export function engineBaseEnv(
  agentEnv: Record<string, string> = Deno.env.toObject(),
): Record<string, string> {
  const env = { ...agentEnv };
  for (const key of Object.keys(env)) {
    if (key.startsWith("LLMGW_") || HUB_CREDENTIALS.includes(key)) delete env[key];
  }
  return env;
}

/**
 * An engine's whole environment: {@link engineBaseEnv} of `agentEnv`, then
 * each of `layers` over it (the agent's extra variables, the plugin's
 * command), with the hub's credentials taken out of all of them: a profile
 * stored before its `env` was checked for them (deployment/validate.ts) may
 * still name one, and an engine never talks to the hub.
 */
export function engineEnv(
  agentEnv: Record<string, string>,
  ...layers: Record<string, string>[]
): Record<string, string> {
  const env = Object.assign(engineBaseEnv(agentEnv), ...layers);
  for (const key of HUB_CREDENTIALS) delete env[key];
  return env;
}
