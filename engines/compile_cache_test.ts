import { assertEquals, assertOk } from "../tests/assert.ts";
import { launch } from "../tests/fake_engine_harness.ts";
import {
  compileCacheDir,
  compileCacheEnv,
  compileCacheKey,
  type CompileCacheKeyInput,
  compileCacheKeyInput,
} from "./compile_cache.ts";

const BASE: CompileCacheKeyInput = {
  engine: "vllm",
  engine_version: "0.11.1",
  model: "meta-llama/Llama-3.1-8B-Instruct",
  revision: "0e9e39f249a16976918f6564b8830bc894c89659",
  gpu_class: "h100-80g",
  tensor_parallel: 2,
  pipeline_parallel: 1,
  nodes: 1,
};

Deno.test("the same key gives the same directory: a restart on the host finds its cache", () => {
  const a = compileCacheDir("/var/lib/llmgw/engine_cache/", BASE);
  assertEquals(a, compileCacheDir("/var/lib/llmgw/engine_cache", { ...BASE }));
  assertEquals(
    a,
    "/var/lib/llmgw/engine_cache/vllm/meta-llama--Llama-3.1-8B-Instruct_0e9e39f249a1_h100-80g_tp2-pp1-n1_v0.11.1_" +
      (compileCacheKey(BASE)).slice(-12),
  );
  assertOk(/^[0-9a-f]{12}$/.test((compileCacheKey(BASE)).slice(-12)));
});

Deno.test("every part of the key changes the directory", () => {
  const changes: Partial<CompileCacheKeyInput>[] = [
    { engine: "sglang" },
    { engine_version: "0.11.2" },
    { engine_version: null },
    { model: "meta-llama/Llama-3.1-70B-Instruct" },
    { revision: "1111111111111111111111111111111111111111" },
    { revision: null },
    { gpu_class: "a100-80g" },
    { tensor_parallel: 4 },
    { pipeline_parallel: 2 },
    { nodes: 2 },
  ];
  const base = compileCacheKey(BASE);
  const seen = new Set([base]);
  for (const c of changes) {
    const key = compileCacheKey({ ...BASE, ...c });
    assertOk(key !== base, JSON.stringify(c));
    seen.add(key);
  }
  assertEquals(seen.size, changes.length + 1);
});

Deno.test("keys are one path-safe component, even from hostile parts", () => {
  const key = compileCacheKey({
    ...BASE,
    model: "/models/../../etc/passwd",
    gpu_class: "a b/c",
    engine_version: "0.11\n1",
  });
  assertOk(!key.includes("/") && !key.startsWith("."), key);
  assertOk(/^[A-Za-z0-9._+=-]+$/.test(key), key);
  const dir = compileCacheDir("/s", { ...BASE, engine: "../x" });
  assertEquals(dir.split("/").length, 4, dir);
});

Deno.test("a launch's key: its engine version, model, GPU class and parallelism", () => {
  assertEquals(compileCacheKeyInput("vllm", launch({ tp: 2, port: 8000 })), {
    engine: "vllm",
    engine_version: "0.11.1",
    model: "org/fake-model-8b",
    revision: null,
    gpu_class: "h100-80g",
    tensor_parallel: 2,
    pipeline_parallel: 1,
    nodes: 1,
  });
});

Deno.test("a launch that names its model's commit keys by it; its desired form keys the same", () => {
  const commit = "a".repeat(40);
  const l = { ...launch({ tp: 1, port: 8000 }), model_commit: commit };
  assertEquals(compileCacheKeyInput("vllm", l).revision, commit);
  const desired = { ...l, port: null };
  assertEquals(
    compileCacheKey(compileCacheKeyInput("vllm", desired)),
    compileCacheKey(compileCacheKeyInput("vllm", l)),
  );
  assertOk(compileCacheKey(compileCacheKeyInput("vllm", l)).includes("_aaaaaaaaaaaa_"));
});

Deno.test("the environment points vLLM, Inductor, Triton and FlashInfer into the directory", () => {
  assertEquals(compileCacheEnv("/s/vllm/k"), {
    VLLM_CACHE_ROOT: "/s/vllm/k/vllm",
    TORCHINDUCTOR_CACHE_DIR: "/s/vllm/k/torchinductor",
    TRITON_CACHE_DIR: "/s/vllm/k/triton",
    FLASHINFER_WORKSPACE_BASE: "/s/vllm/k",
  });
});
