import { assertEquals } from "../../tests/assert.ts";
import { MODEL_PRESETS } from "./model_presets.ts";

const FIXTURES = new URL("../../tests/fixtures/model_configs/", import.meta.url);

Deno.test("each preset's config.json is the one recorded from its hub repo", async () => {
  for (const [name, preset] of Object.entries(MODEL_PRESETS)) {
    const recorded = JSON.parse(await Deno.readTextFile(new URL(`${name}/config.json`, FIXTURES)));
    assertEquals(preset.config, recorded, name);
    const index = new URL(`${name}/model.safetensors.index.json`, FIXTURES);
    const hasIndex = await Deno.stat(index).then(() => true, () => false);
    if (hasIndex) {
      assertEquals(
        preset.weightBytes,
        JSON.parse(await Deno.readTextFile(index)).metadata.total_size,
        name,
      );
    }
  }
});
