import { assertEquals, assertRejects } from "../tests/assert.ts";
import { MODEL_CONFIGS, modelConfigTexts } from "../tests/model_configs.ts";
import {
  firstSource,
  hubFactsSource,
  type ListedFile,
  localFactsSource,
  localModelDir,
  readModelDir,
} from "./facts_source.ts";
import { ModelFactsError } from "./model_facts.ts";

Deno.test("a local model directory: config.json and the index, or the shards' sizes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // With an index (the fixture's own folder).
    const withIndex = new URL("llama-3.1-8b-instruct", MODEL_CONFIGS).pathname;
    assertEquals((await readModelDir(withIndex)).weight_bytes, 16_060_522_496);
    // Without: the *.safetensors files' sizes, other files ignored.
    await Deno.writeTextFile(`${dir}/config.json`, modelConfigTexts("qwen2.5-7b-instruct").config);
    await Deno.writeFile(`${dir}/model-00001-of-00002.safetensors`, new Uint8Array(300));
    await Deno.writeFile(`${dir}/model-00002-of-00002.safetensors`, new Uint8Array(200));
    await Deno.writeFile(`${dir}/tokenizer.json`, new Uint8Array(999));
    const facts = await localFactsSource().facts(`file://${dir}/`);
    assertEquals([facts?.weight_bytes, facts?.attention_heads], [500, 28]);
    // A hub id is not a local source's to answer.
    assertEquals(await localFactsSource().facts("Qwen/Qwen2.5-7B-Instruct"), null);
    await Deno.remove(`${dir}/config.json`);
    await assertRejects(() => readModelDir(dir), Error, `no ${dir}/config.json`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("localModelDir: absolute paths and file:// URLs", () => {
  assertEquals(localModelDir("/models/x"), "/models/x");
  assertEquals(localModelDir("file:///models/my%20model"), "/models/my model");
  assertEquals(localModelDir("org/name"), null);
});

Deno.test("the hub seam: config.json and the index through the hub client's reader", async () => {
  const texts = modelConfigTexts("llama-3.1-70b-instruct");
  const asked: string[] = [];
  const encoder = new TextEncoder();
  const source = hubFactsSource(
    (repo, revision, path) => {
      asked.push(`${repo}@${revision}:${path}`);
      const text = path === "config.json" ? texts.config : texts.index;
      return Promise.resolve(text === undefined ? null : encoder.encode(text));
    },
    () => Promise.reject(new Error("not listed when there is an index")),
  );
  const facts = await source.facts("meta-llama/Llama-3.1-70B-Instruct");
  assertEquals(facts?.weight_bytes, 141_107_412_992);
  assertEquals(asked, [
    "meta-llama/Llama-3.1-70B-Instruct@main:config.json",
    "meta-llama/Llama-3.1-70B-Instruct@main:model.safetensors.index.json",
  ]);
  // No index: the listed shard sizes.
  const listed: ListedFile[] = [{ name: "model.safetensors", size: 77 }, {
    name: "README.md",
    size: 5,
  }];
  const noIndex = hubFactsSource(
    (_r, _v, path) => Promise.resolve(path === "config.json" ? encoder.encode(texts.config) : null),
    () => Promise.resolve(listed),
  );
  assertEquals((await noIndex.facts("a/b"))?.weight_bytes, 77);
  // A bad config names the field.
  const bad = hubFactsSource(
    () => Promise.resolve(encoder.encode('{"num_hidden_layers": 2}')),
    () => Promise.resolve(listed),
  );
  await assertRejects(
    () => bad.facts("a/b"),
    ModelFactsError,
    "a/b/config.json: num_attention_heads",
  );
  // Local paths are not the hub's.
  assertEquals(await noIndex.facts("/models/x"), null);
});

Deno.test("firstSource asks each source in turn", async () => {
  const config = new TextEncoder().encode(modelConfigTexts("llama-3.1-8b-instruct").config);
  const hub = hubFactsSource(
    (_r, _v, path) => Promise.resolve(path === "config.json" ? config : null),
    () => Promise.resolve([{ name: "m.safetensors", size: 1 }]),
  );
  const both = firstSource([localFactsSource(), hub]);
  assertEquals((await both.facts("org/name"))?.source, "org/name");
  assertEquals(await firstSource([]).facts("org/name"), null);
});
