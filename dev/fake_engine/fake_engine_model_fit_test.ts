/**
 * The fake engine fails as vLLM and SGLang fail from the same facts (issue
 * #25 item 6), as real processes through the shims, each killed in
 * `finally` by the harness: a tensor-parallel size that does not divide the
 * heads, weights beyond the GPU, no room for the KV cache, not one
 * full-length sequence, with the model's recorded config.json
 * (tests/fixtures/model_configs) in a local directory and the GPU's memory
 * from FAKE_ENGINE_GPU_MEMORY_MIB.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { freePort, sglangArgv, vllmArgv, withEngine } from "../../tests/fake_engine_harness.ts";
import { MODEL_CONFIGS } from "../../tests/model_configs.ts";
import { until } from "../../tests/until.ts";

const FAST = { FAKE_ENGINE_LOAD_SECONDS: "0.4" };

/** A model directory with fixture `name`'s config.json (and index, else one small shard). */
async function modelDir(name: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "fake_engine_fit_" });
  const from = new URL(`${name}/`, MODEL_CONFIGS);
  await Deno.copyFile(new URL("config.json", from), `${dir}/config.json`);
  try {
    await Deno.copyFile(
      new URL("model.safetensors.index.json", from),
      `${dir}/model.safetensors.index.json`,
    );
  } catch {
    await Deno.writeFile(`${dir}/model.safetensors`, new Uint8Array(4096));
  }
  return dir;
}

/** `argv` with the model and the tensor-parallel size replaced. */
function withModel(argv: string[], model: string, tp: number): string[] {
  const out = argv.map((a) => a === "org/fake-model-8b" ? model : a);
  const i = out.findIndex((a) => a === "--tensor-parallel-size" || a === "--tp-size");
  out[i + 1] = String(tp);
  return out;
}

async function withDir(name: string, body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await modelDir(name);
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a TP that does not divide the heads: vLLM refuses at start (memory unknown), SGLang asserts as it builds the model", async () => {
  await withDir("qwen2.5-7b-instruct", async (dir) => {
    const port = freePort();
    await withEngine(withModel(vllmArgv(port), dir, 8), FAST, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(
        e.out + e.err,
        "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).",
      );
      assertOk(!(e.out + e.err).includes("Starting to load model"), "refused before loading");
    });
    const sport = freePort();
    await withEngine(withModel(sglangArgv(sport), dir, 8), FAST, sport, async (e) => {
      assertEquals((await e.exit()).code, 1);
      const err = e.err;
      assertOk(err.indexOf("Load weight begin") < err.indexOf("Scheduler hit an exception"), err);
      assertStringIncludes(err, "] AssertionError\n");
      assertStringIncludes(err, "Received sigquit from a child process");
    });
  });
});

Deno.test("Llama-3.1-405B on one 45 GiB L40S: CUDA out of memory part-way through the weights", async () => {
  await withDir("llama-3.1-405b-instruct", async (dir) => {
    const port = freePort();
    const env = { ...FAST, FAKE_ENGINE_GPU_MEMORY_MIB: "46068" };
    await withEngine(withModel(vllmArgv(port), dir, 1), env, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(e.err, "50% Completed | 2/4");
      assertOk(!e.err.includes("75% Completed"), "stopped in the weights");
      assertStringIncludes(e.out + e.err, "EngineCore failed to start.");
      assertStringIncludes(
        e.out + e.err,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 710.97 GiB. GPU 0 has a " +
          "total capacity of 44.99 GiB of which 0.00 GiB is free.",
      );
      assertStringIncludes(e.err, "RuntimeError: Engine core initialization failed.");
    });
  });
});

Deno.test("Llama-3.1-8B on 24 GiB: vLLM refuses one full sequence after the weights; --max-model-len 8192 starts", async () => {
  await withDir("llama-3.1-8b-instruct", async (dir) => {
    const env = { ...FAST, FAKE_ENGINE_GPU_MEMORY_MIB: "24576" };
    const port = freePort();
    await withEngine(withModel(vllmArgv(port), dir, 1), env, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      const all = e.out + e.err;
      assertStringIncludes(all, "Model loading took 14.96 GiB");
      assertStringIncludes(all, "Available KV cache memory: 6.64 GiB");
      assertStringIncludes(
        all,
        "ValueError: To serve at least one request with the models's max seq len (131072), " +
          "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory " +
          "(6.64 GiB). Based on the available memory, the estimated maximum model length is 54400.",
      );
    });
    const ok = freePort();
    const argv = withModel(vllmArgv(ok, ["--max-model-len", "8192"]), dir, 1);
    await withEngine(argv, env, ok, async (e) => {
      const r = await until("/health 200", () => e.request("/health").then((x) => x ?? undefined));
      assertEquals(r.status, 200);
      assertStringIncludes(e.out + e.err, "GPU KV cache size: 54,400 tokens");
    });
  });
});

Deno.test("SGLang: weights beyond its fraction leave no pool (exit 1); without FAKE_ENGINE_GPU_MEMORY_MIB no memory is checked", async () => {
  await withDir("llama-3.1-8b-instruct", async (dir) => {
    const port = freePort();
    const env = { ...FAST, FAKE_ENGINE_GPU_MEMORY_MIB: "16384" };
    await withEngine(withModel(sglangArgv(port), dir, 1), env, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertOk(e.err.indexOf("Load weight end") < e.err.indexOf("Not enough memory"), e.err);
      assertStringIncludes(
        e.err,
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
      );
    });
    const free = freePort();
    await withEngine(withModel(sglangArgv(free), dir, 1), FAST, free, async (e) => {
      const r = await until("/health 200", async () => {
        const x = await e.request("/health");
        return x?.status === 200 ? x : undefined;
      });
      assertEquals(r.status, 200);
    });
  });
});
