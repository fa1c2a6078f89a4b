/**
 * The environment engines start from.
 *
 * @module
 */

/**
 * The hub's credentials as huggingface_hub reads them: the agent's own, for
 * its model cache; an engine never talks to the hub (issue #25 item 4).
 */
export const HUB_CREDENTIALS: readonly string[] = [
  "HF_TOKEN",
  "HUGGING_FACE_HUB_TOKEN",
  "HF_TOKEN_PATH",
];

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
