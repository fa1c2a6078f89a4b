/**
 * The hub's environment variables (as huggingface_hub reads them) that a
 * deployment may not set for its engines: the credentials, which belong to
 * the agents and the control plane alone (an engine never talks to the hub,
 * and a deployment's spec is stored, listed and sent in events), and the
 * settings llmgw itself sets for every engine to keep it offline on the
 * agent's model cache (agent/prepare_shard.ts `offlineEnv`).
 *
 * @module
 */

/** The hub's credentials: kept out of every engine's environment and every profile's `env`. */
export const HUB_CREDENTIALS: readonly string[] = [
  "HF_TOKEN",
  "HUGGING_FACE_HUB_TOKEN",
  "HF_TOKEN_PATH",
];

/**
 * What llmgw decides for engines about the hub: offline, reading the
 * agent's model cache. `HF_ENDPOINT` is among them because an engine is
 * never to reach a hub or mirror; the agent's own endpoint is its setting.
 */
export const HUB_ENGINE_SETTINGS: readonly string[] = [
  "HF_HUB_OFFLINE",
  "TRANSFORMERS_OFFLINE",
  "HF_HUB_CACHE",
  "HF_HOME",
  "HF_ENDPOINT",
];
