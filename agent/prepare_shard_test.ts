import { assertEquals, assertOk } from "../tests/assert.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import { testEngineCache } from "../tests/engine_cache.ts";
import type { EngineCacheKeeper } from "./engine_cache/engine_cache_keeper.ts";
import { EngineRegistry } from "../engines/registry.ts";
import { compileCacheDir, compileCacheKeyInput } from "../engines/compile_cache.ts";
import { offlineEnv, prepareShard } from "./prepare_shard.ts";
import { HUB_ENGINE_SETTINGS } from "../models/hub_env.ts";
import type { LaunchedShard } from "../supervisor/types.ts";

/** Keepers a test made: closed before its root goes, their queued sweeps done. */
const keepers: EngineCacheKeeper[] = [];

function keeper(root: string): EngineCacheKeeper {
  const k = testEngineCache(root);
  keepers.push(k);
  return k;
}

async function closeKeepers(): Promise<void> {
  for (const k of keepers.splice(0)) await k.close();
}

function shard(env: Record<string, string> = {}): LaunchedShard {
  const l = launch({ port: 8000 });
  return { id: l.shard_id, engine: "vllm", launch: { ...l, profile: { ...l.profile, env } } };
}

Deno.test("a shard gets its compile cache directory, made, under the agent's state", async () => {
  const root = await Deno.makeTempDir();
  try {
    const d = shard();
    const spec = await prepareShard(EngineRegistry.builtin(), {
      engineCache: keeper(`${root}/engine_cache`),
    })(d);
    const dir = compileCacheDir(
      `${root}/engine_cache`,
      compileCacheKeyInput("vllm", d.launch),
    );
    assertEquals(spec.problems, []);
    assertEquals(spec.command?.env.VLLM_CACHE_ROOT, `${dir}/vllm`);
    assertEquals(spec.command?.env.TRITON_CACHE_DIR, `${dir}/triton`);
    assertOk(Deno.statSync(dir).isDirectory);
    // llmgw's GPU variables are still there.
    assertEquals(spec.command?.env.CUDA_DEVICE_ORDER, "PCI_BUS_ID");
    // A restart of the same shard finds the same directory.
    const again = await prepareShard(EngineRegistry.builtin(), {
      engineCache: keeper(`${root}/engine_cache`),
    })(shard());
    assertEquals(again.command?.env.VLLM_CACHE_ROOT, `${dir}/vllm`);
  } finally {
    await closeKeepers();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a profile that moves a cache wins; without an engine cache nothing is added", async () => {
  const root = await Deno.makeTempDir();
  try {
    const spec = await prepareShard(EngineRegistry.builtin(), {
      engineCache: keeper(root),
    })(shard({ TRITON_CACHE_DIR: "/fast/triton" }));
    assertEquals(spec.command?.env.TRITON_CACHE_DIR, "/fast/triton");
    const plain = await prepareShard(EngineRegistry.builtin())(shard());
    assertEquals(plain.command?.env.VLLM_CACHE_ROOT, undefined);
  } finally {
    await closeKeepers();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a cache directory that cannot be made fails the shard with the reason", async () => {
  const root = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${root}/file`, "");
    const spec = await prepareShard(EngineRegistry.builtin(), {
      engineCache: testEngineCache(`${root}/file`),
    })(shard());
    assertEquals(spec.command, null);
    assertOk(
      spec.problems[0].startsWith("engine vllm cannot prepare shard r-1/0: "),
      spec.problems[0],
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("with a model cache every shard runs with the hub off and the cache as its hub cache, over the profile's own", async () => {
  const d = shard({ HF_HUB_OFFLINE: "0", HF_HUB_CACHE: "/elsewhere" });
  const spec = await prepareShard(EngineRegistry.builtin(), { modelCache: "/var/cache/llmgw" })(
    d,
  );
  const env = spec.command?.env ?? {};
  assertEquals(env.HF_HUB_OFFLINE, "1");
  assertEquals(env.TRANSFORMERS_OFFLINE, "1");
  assertEquals(env.HF_HUB_CACHE, "/var/cache/llmgw");
  assertEquals(env.HF_HOME, "/var/cache/llmgw/.llmgw/hf_home");
  assertOk(!("HF_TOKEN" in env));
  // Without one (an agent with no model cache) nothing of the hub is set.
  const plain = await prepareShard(EngineRegistry.builtin())(shard());
  assertEquals(plain.command?.env.HF_HUB_OFFLINE, undefined);
});

Deno.test("every hub variable the agent sets for an engine is one a profile's env may not set", () => {
  const set = Object.keys(offlineEnv("/cache"));
  assertEquals(set.filter((k) => !HUB_ENGINE_SETTINGS.includes(k)), []);
});
