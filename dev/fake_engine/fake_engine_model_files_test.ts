import { assertEquals, assertOk } from "../../tests/assert.ts";
import { isFile, modelOpenProblem } from "./fake_engine_model_files.ts";

async function withDir(body: (dir: string) => void | Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "fake_engine_model_" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const env = (vars: Record<string, string>) => (n: string) => vars[n];

Deno.test("fake engine: a local directory without config.json fails as vLLM and SGLang fail", async () => {
  await withDir((dir) => {
    const vllm = modelOpenProblem("vllm", dir, env({}), isFile)!;
    assertEquals(
      vllm[0],
      `ValueError: Invalid repository ID or local directory specified: '${dir}'.`,
    );
    assertEquals(modelOpenProblem("sglang", dir, env({}), isFile), [
      `OSError: ${dir} does not appear to have a file named config.json.`,
    ]);
    Deno.writeTextFileSync(`${dir}/config.json`, "{}");
    assertEquals(modelOpenProblem("vllm", dir, env({}), isFile), null);
    assertEquals(modelOpenProblem("vllm", `file://${dir}`, env({}), isFile), null);
  });
});

Deno.test("fake engine: a hub id offline opens only from the hub cache, else huggingface_hub's offline error", async () => {
  await withDir((cache) => {
    const vars = { HF_HUB_OFFLINE: "1", HF_HUB_CACHE: cache, HF_ENDPOINT: "http://hub.lan" };
    const lines = modelOpenProblem("vllm", "acme/tiny", env(vars), isFile)!;
    assertEquals(
      lines[0],
      "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach http://hub.lan/acme/tiny/resolve/main/config.json: " +
        "offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.",
    );
    assertOk(lines.at(-6)!.startsWith("ValueError: Invalid repository ID"));
    const commit = "a".repeat(40);
    Deno.mkdirSync(`${cache}/models--acme--tiny/refs`, { recursive: true });
    Deno.mkdirSync(`${cache}/models--acme--tiny/snapshots/${commit}`, { recursive: true });
    Deno.writeTextFileSync(`${cache}/models--acme--tiny/refs/main`, commit);
    Deno.writeTextFileSync(`${cache}/models--acme--tiny/snapshots/${commit}/config.json`, "{}");
    assertEquals(modelOpenProblem("vllm", "acme/tiny", env(vars), isFile), null);
    // The hub on: nothing is checked (the fake engine fetches nothing).
    assertEquals(modelOpenProblem("vllm", "acme/other", env({}), isFile), null);
  });
});
