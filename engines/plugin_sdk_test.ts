import { assertEquals } from "../tests/assert.ts";
import { type EnginePlugin, type PluginIo, serveEnginePlugin } from "./plugin_sdk.ts";
import { sglangPlugin } from "./sglang.ts";
import { vllmPlugin } from "./vllm.ts";

/** Runs one protocol call in memory; returns the exit status and what was written. */
async function call(plugin: EnginePlugin, args: string[]): Promise<{ code: number; out: string }> {
  let out = "";
  const io: PluginIo = {
    args,
    readInput: () => Promise.resolve(""),
    write: (t) => out += t,
    error: () => {},
  };
  return { code: await serveEnginePlugin(plugin, io), out };
}

Deno.test("describe carries the engine's API key declaration, and only when it has one", async () => {
  for (
    const [plugin, key] of [
      [vllmPlugin, { env: "VLLM_API_KEY" }],
      [sglangPlugin, { config_file: { flag: "--config", field: "api-key" } }],
    ] as const
  ) {
    const { code, out } = await call(plugin, ["describe"]);
    assertEquals(code, 0);
    assertEquals(JSON.parse(out).api_key, key);
  }
  const { api_key: _, ...keyless } = vllmPlugin;
  const { code, out } = await call({ ...keyless, name: "keyless" }, ["describe"]);
  assertEquals(code, 0);
  assertEquals(Object.keys(JSON.parse(out)).sort(), [
    "api_version",
    "name",
    "quantizations",
    "version_command",
  ]);
});
