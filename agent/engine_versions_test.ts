/**
 * The engine versions an agent reports (design §14), with real version
 * commands: through the fake engine's shims (dev/fake_engine/bin), as on `llmgw dev`'s
 * simulated nodes, and with nothing installed.
 */
import { assertEquals } from "../tests/assert.ts";
import { BIN } from "../tests/fake_engine_harness.ts";
import { EngineRegistry } from "../engines/registry.ts";
import { engineVersions } from "./engine_versions.ts";

const PATH = Deno.env.get("PATH") ?? "";

Deno.test("the fake engine's shims answer both version commands: vllm and sglang are reported", async () => {
  // llmgw dev puts the shims first on the engines' PATH; SGLang used to be
  // left out (its version command ran the real python3), so placement would
  // keep SGLang profiles off every simulated node (issue #23).
  const versions = await engineVersions(EngineRegistry.builtin(), {
    env: { PATH: `${BIN}:${PATH}` },
  });
  assertEquals(versions, { sglang: "0.5.3", vllm: "0.11.1" });
  const pinned = await engineVersions(EngineRegistry.builtin(), {
    env: { PATH: `${BIN}:${PATH}`, FAKE_ENGINE_VERSION: "0.4.9" },
  });
  assertEquals(pinned, { sglang: "0.4.9", vllm: "0.4.9" });
});

Deno.test("an engine that is not installed is left out", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const versions = await engineVersions(EngineRegistry.builtin(), { env: { PATH: dir } });
    assertEquals(versions, {});
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
