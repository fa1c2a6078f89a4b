/**
 * The fake engine's cold-start phases as real processes print them, read
 * with the plugins' own phase patterns (engines/cold_start_patterns.ts)
 * through the supervisor's receipt builder: a cold vLLM start compiles and
 * records its key in `$VLLM_CACHE_ROOT`, the next start of the same key
 * loads it (vLLM's warm-cache line) and still captures CUDA graphs, another
 * key compiles again, `--enforce-eager` compiles and captures nothing, and
 * SGLang marks weights, KV cache and graphs.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import {
  freePort,
  sglangArgv,
  vllmArgv,
  WAIT_MS,
  withEngine,
} from "../../tests/fake_engine_harness.ts";
import {
  SGLANG_COLD_START_PHASES,
  VLLM_COLD_START_PHASES,
} from "../../engines/cold_start_patterns.ts";
import type { PhasePattern } from "../../engines/cold_start_phases.ts";
import {
  compilePhasePatterns,
  newReceipt,
  receiptLine,
  receiptReady,
} from "../../supervisor/cold_start_receipt.ts";
import type { ColdStartReceipt, PhaseReceipt } from "../../protocol/cold_start_receipt.ts";
import { CACHE_FILE } from "./fake_engine_compile.ts";

/** The receipt of one start's whole output (stdout then stderr, split on `\n` and `\r` like the supervisor). */
function receiptOf(patterns: readonly PhasePattern[], log: string): ColdStartReceipt {
  const compiled = compilePhasePatterns(patterns);
  let r = newReceipt(0, compiled);
  let i = 0;
  for (const line of log.split(/[\r\n]/)) r = receiptLine(r, compiled, line, ++i);
  return receiptReady(r, ++i);
}

function phase(r: ColdStartReceipt, name: PhaseReceipt["phase"]): PhaseReceipt {
  const p = r.phases.find((x) => x.phase === name);
  assertOk(p !== undefined, `${name} in ${JSON.stringify(r)}`);
  return p;
}

/** Runs a vLLM start to "init engine" and returns its log. */
async function vllmStart(env: Record<string, string>, extra: string[] = []): Promise<string> {
  const port = freePort();
  let log = "";
  await withEngine(
    vllmArgv(port, extra),
    { FAKE_ENGINE_LOAD_SECONDS: "0.5", ...env },
    port,
    async (e) => {
      await e.waitForLog("init engine (profile, create kv cache, warmup model) took", WAIT_MS);
      log = `${e.out}\n${e.err}`;
    },
  );
  return log;
}

Deno.test("vLLM: cold compiles and records its key, warm loads it, another key compiles", async () => {
  const root = await Deno.makeTempDir();
  try {
    const env = { VLLM_CACHE_ROOT: root };
    const cold = await vllmStart(env);
    assertStringIncludes(cold, "Compiling a graph for dynamic shape takes");
    assertOk(!cold.includes("Directly load the compiled graph(s)"), cold);
    const coldReceipt = receiptOf(VLLM_COLD_START_PHASES, cold);
    for (const name of ["weights", "compile", "kv_cache", "graph_capture", "ready"] as const) {
      const p = phase(coldReceipt, name);
      assertOk(p.start_ms !== null && p.end_ms !== null && !p.skipped, JSON.stringify(p));
    }
    assertEquals(phase(coldReceipt, "compile").warm, false);
    assertOk(phase(coldReceipt, "compile").engine_seconds !== null);
    const files = [...Deno.readDirSync(`${root}/torch_compile_cache`)];
    assertEquals(files.length, 1);
    const key = files[0].name;
    assertOk(/^[0-9a-f]{10}$/.test(key), key);
    assertStringIncludes(
      Deno.readTextFileSync(`${root}/torch_compile_cache/${key}/rank_0_0/backbone/${CACHE_FILE}`),
      key,
    );

    const warm = await vllmStart(env);
    assertStringIncludes(
      warm,
      "Directly load the compiled graph(s) for dynamic shape from the cache, took",
    );
    assertOk(!warm.includes("Compiling a graph for"), warm);
    // Graphs are captured on every start, as vLLM does.
    assertStringIncludes(warm, "Graph capturing finished in");
    const warmReceipt = receiptOf(VLLM_COLD_START_PHASES, warm);
    assertEquals(phase(warmReceipt, "compile").warm, true);
    assertEquals(phase(warmReceipt, "graph_capture").warm, false);

    // Another parallelism is another key: compiled again, beside the first.
    const other = await vllmStart(env, ["--max-model-len", "4096"]);
    assertStringIncludes(other, "Compiling a graph for dynamic shape takes");
    assertEquals([...Deno.readDirSync(`${root}/torch_compile_cache`)].length, 2);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("vLLM without VLLM_CACHE_ROOT or with the cache disabled compiles every time", async () => {
  const root = await Deno.makeTempDir();
  try {
    const envs: Record<string, string>[] = [
      { VLLM_CACHE_ROOT: "" },
      { VLLM_CACHE_ROOT: root, VLLM_DISABLE_COMPILE_CACHE: "1" },
    ];
    for (const env of envs) {
      for (let i = 0; i < 2; i++) {
        const log = await vllmStart(env);
        assertStringIncludes(log, "Compiling a graph for dynamic shape takes");
      }
    }
    assertEquals([...Deno.readDirSync(root)], []);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("vLLM --enforce-eager: no compile, no graphs; the receipt skips both", async () => {
  const root = await Deno.makeTempDir();
  try {
    const log = await vllmStart({ VLLM_CACHE_ROOT: root }, ["--enforce-eager"]);
    assertOk(!log.includes("torch.compile") && !log.includes("Capturing CUDA graphs"), log);
    const r = receiptOf(VLLM_COLD_START_PHASES, log);
    assertEquals([phase(r, "compile").skipped, phase(r, "graph_capture").skipped], [true, true]);
    assertEquals(phase(r, "kv_cache").skipped, false);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("vLLM: a cache root that cannot be created fails the start", async () => {
  const root = await Deno.makeTempDir();
  try {
    Deno.writeTextFileSync(`${root}/file`, "");
    const port = freePort();
    await withEngine(
      vllmArgv(port),
      { FAKE_ENGINE_LOAD_SECONDS: "0.3", VLLM_CACHE_ROOT: `${root}/file` },
      port,
      async (e) => {
        assertOk((await e.exit()).code !== 0, e.log);
        assertOk(!e.log.includes("init engine"), e.log);
        assertStringIncludes(e.log, "EngineCore failed to start.");
        assertStringIncludes(e.log, `OSError: `);
      },
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("SGLang: weights, KV cache and graph capture from its lines", async () => {
  const port = freePort();
  await withEngine(sglangArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "0.5" }, port, async (e) => {
    await e.waitForLog("Capture cuda graph end", WAIT_MS);
    const r = receiptOf(SGLANG_COLD_START_PHASES, `${e.out}\n${e.err}`);
    assertEquals(r.phases.map((p) => p.phase), ["weights", "kv_cache", "graph_capture", "ready"]);
    for (const p of r.phases) assertOk(p.end_ms !== null && !p.skipped, JSON.stringify(p));
    assertEquals(phase(r, "graph_capture").engine_seconds, 1);
  });
});
