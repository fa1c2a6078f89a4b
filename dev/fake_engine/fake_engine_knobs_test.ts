/**
 * Tests of the fake engine's `FAKE_ENGINE_*` knobs (dev/fake_engine/fake_engine_knobs.ts).
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { type EngineName, KnobError, readKeepAlive, readKnobs } from "./fake_engine_knobs.ts";

Deno.test("knobs: defaults and refusals", () => {
  const none = (_: string) => undefined;
  assertEquals(readKnobs(none), {
    load_seconds: 2,
    worker: false,
    crash_after_requests: null,
    crash_after_seconds: null,
    never_ready: false,
    ignore_sigterm: false,
    tokens: 8,
    token_delay_ms: 5,
    progress: "cr",
    access_log: true,
    worker_max_seconds: 3600,
    leak_api_key: false,
    gpu_memory_mib: null,
  });
  assertEquals(
    readKnobs((k) => k === "FAKE_ENGINE_GPU_MEMORY_MIB" ? "46068" : undefined).gpu_memory_mib,
    46068,
  );
  assertEquals(
    readKnobs((k) => k === "FAKE_ENGINE_LEAK_API_KEY" ? "1" : undefined).leak_api_key,
    true,
  );
  const env = (vars: Record<string, string>) => (k: string) => vars[k];
  assertEquals(
    readKnobs(env({ FAKE_ENGINE_LOAD_SECONDS: "0.5", FAKE_ENGINE_WORKER: "1" })).load_seconds,
    0.5,
  );
  for (
    const bad of [
      { FAKE_ENGINE_TOKENS: "2.5" },
      { FAKE_ENGINE_WORKER: "maybe" },
      { FAKE_ENGINE_LOAD_SECONDS: "-1" },
      { FAKE_ENGINE_GPU_MEMORY_MIB: "0" },
      { FAKE_ENGINE_GPU_MEMORY_MIB: "45G" },
    ] as Record<string, string>[]
  ) {
    try {
      readKnobs(env(bad));
      throw new Error(`${JSON.stringify(bad)} must be refused`);
    } catch (e) {
      assertOk(e instanceof KnobError, String(e));
    }
  }
});

Deno.test("keep-alive: each engine's own variable, its default, and what each does with a value it cannot read", () => {
  const env = (vars: Record<string, string>) => (k: string) => vars[k];
  const cases: [EngineName, Record<string, string>, number, boolean][] = [
    ["vllm", {}, 5, false],
    ["sglang", {}, 5, false],
    ["vllm", { VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "1" }, 1, false],
    ["vllm", { VLLM_HTTP_TIMEOUT_KEEP_ALIVE: " 1_0 " }, 10, false],
    ["vllm", { VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "0" }, 0, false],
    // Each engine reads only its own variable.
    ["vllm", { SGLANG_TIMEOUT_KEEP_ALIVE: "1" }, 5, false],
    ["sglang", { SGLANG_TIMEOUT_KEEP_ALIVE: "2" }, 2, false],
    ["sglang", { VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "2" }, 5, false],
    // SGLang's EnvInt warns and keeps the default.
    ["sglang", { SGLANG_TIMEOUT_KEEP_ALIVE: "0.5" }, 5, true],
  ];
  for (const [engine, vars, seconds, warns] of cases) {
    const k = readKeepAlive(engine, env(vars));
    assertEquals([k.seconds, k.warning !== null], [seconds, warns], JSON.stringify([engine, vars]));
  }
  assertStringIncludes(
    readKeepAlive("sglang", env({ SGLANG_TIMEOUT_KEEP_ALIVE: "soon" })).warning ?? "",
    'Invalid value for SGLANG_TIMEOUT_KEEP_ALIVE: "soon" is not a valid integer value, using default "5"',
  );
  // vLLM's int() refuses it with Python's ValueError, quoting the value as repr() does.
  const cannotRead: [string, string][] = [
    ["0.5", "'0.5'"],
    ["soon", "'soon'"],
    ["", "''"],
    ["it's", `"it's"`],
  ];
  for (const [bad, quoted] of cannotRead) {
    const k = readKeepAlive("vllm", env({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: bad }));
    assertEquals(
      [k.error, k.warning],
      [`ValueError: invalid literal for int() with base 10: ${quoted}`, null],
      JSON.stringify(bad),
    );
  }
  assertEquals(readKeepAlive("vllm", env({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "7" })).error, null);
  assertEquals(readKeepAlive("sglang", env({ SGLANG_TIMEOUT_KEEP_ALIVE: "soon" })).error, null);
});
