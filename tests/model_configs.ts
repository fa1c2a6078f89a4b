/**
 * The model configs of tests/fixtures/model_configs/ (sources in its
 * README.md), read into ModelFacts for tests.
 *
 * @module
 */
import { type ModelFacts, parseModelFacts } from "../models/model_facts.ts";

/** The fixture folder. */
export const MODEL_CONFIGS = new URL("./fixtures/model_configs/", import.meta.url);

/** The raw texts of one fixture: config.json and, when present, the index. */
export function modelConfigTexts(name: string): { config: string; index?: string } {
  const dir = new URL(`${name}/`, MODEL_CONFIGS);
  const config = Deno.readTextFileSync(new URL("config.json", dir));
  try {
    return { config, index: Deno.readTextFileSync(new URL("model.safetensors.index.json", dir)) };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { config };
    throw e;
  }
}

/**
 * The facts of one fixture; `safetensorsSizes` stands in for the weights of
 * a fixture that has no index.
 */
export function fixtureFacts(name: string, safetensorsSizes?: number[]): ModelFacts {
  return parseModelFacts({ source: name, ...modelConfigTexts(name), safetensorsSizes });
}
