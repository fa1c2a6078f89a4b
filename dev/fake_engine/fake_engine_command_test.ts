/**
 * Tests of the fake engine's command line (dev/fake_engine/fake_engine_command.ts,
 * fake_engine_argparse.ts, fake_engine_flags.ts): its argparse imitation
 * against the exact argv the vLLM and SGLang plugins build, and its refusals.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { VLLM_QUANTIZATIONS, vllmPlugin } from "../../engines/vllm.ts";
import { SGLANG_QUANTIZATIONS, sglangPlugin } from "../../engines/sglang.ts";
import { UsageError } from "./fake_engine_argparse.ts";
import { ConfigError, type EngineConfig, parseCommandLine } from "./fake_engine_command.ts";
import { FAKE_SGLANG_QUANTIZATIONS, FAKE_VLLM_QUANTIZATIONS } from "./fake_engine_flags.ts";
import { fakeArgv, launch } from "../../tests/fake_engine_harness.ts";

function serveConfig(argv: string[]): EngineConfig {
  const c = parseCommandLine(argv);
  assertOk(c.kind === "serve", `expected a serve command from ${argv.join(" ")}`);
  return c.config;
}

function usageError(argv: string[]): UsageError {
  try {
    parseCommandLine(argv);
  } catch (e) {
    assertOk(e instanceof UsageError, `expected a UsageError, got ${e}`);
    return e;
  }
  throw new Error(`expected ${argv.join(" ")} to be refused`);
}

Deno.test("the fake accepts the exact argv the vLLM plugin builds", () => {
  const single = vllmPlugin.command(launch({ port: 8000, tp: 2 })).argv;
  const c = serveConfig(fakeArgv(single));
  assertEquals(
    [
      c.engine,
      c.model,
      c.served_names,
      c.host,
      c.port,
      c.tp,
      c.pp,
      c.nnodes,
      c.node_rank,
      c.headless,
    ],
    ["vllm", "org/fake-model-8b", ["fake-model"], "127.0.0.1", 8000, 2, 1, 1, 0, false],
  );
  for (const rank of [0, 1]) {
    const multi = vllmPlugin.command(launch({ port: 8010, tp: 4, nodes: 2, rank })).argv;
    const m = serveConfig(fakeArgv(multi));
    assertEquals([m.nnodes, m.node_rank, m.headless, m.rendezvous], [
      2,
      rank,
      rank > 0,
      "127.0.0.1:29500",
    ]);
  }
  for (const q of VLLM_QUANTIZATIONS.filter((q) => q !== "none")) {
    assertOk(FAKE_VLLM_QUANTIZATIONS.includes(q), `fake vLLM lacks quantization ${q}`);
    const argv = vllmPlugin.command(launch({ port: 8000, quantization: q })).argv;
    assertEquals(serveConfig(fakeArgv(argv)).quantization, q);
  }
  const extras = [
    "--max-model-len",
    "32K",
    "--gpu-memory-utilization",
    "0.85",
    "--enforce-eager",
    "--no-enable-prefix-caching",
    "--dtype=bfloat16",
    "--trust-remote-code",
    "--max-num-seqs",
    "64",
    "--kv-cache-dtype",
    "fp8",
    "--max_num_batched_tokens",
    "8192",
    "--disable-log-stats",
  ];
  const e = serveConfig(
    fakeArgv(vllmPlugin.command(launch({ port: 8000, engineArgs: extras })).argv),
  );
  assertEquals([e.max_model_len, e.max_running], [32 * 1024, 64]);
  assertEquals(e.flags.get("--enable-prefix-caching"), false);
  assertEquals(e.flags.get("--max-num-batched-tokens"), "8192");
});

Deno.test("the fake accepts the exact argv the SGLang plugin builds, and argparse abbreviations", () => {
  const single = sglangPlugin.command(launch({ port: 8000, tp: 2 })).argv;
  const c = serveConfig(fakeArgv(single));
  assertEquals(
    [c.engine, c.model, c.served_names, c.host, c.port, c.tp, c.metrics],
    ["sglang", "org/fake-model-8b", ["fake-model"], "127.0.0.1", 8000, 2, true],
  );
  const m = serveConfig(
    fakeArgv(sglangPlugin.command(launch({ port: 8010, tp: 4, nodes: 2, rank: 1 })).argv),
  );
  assertEquals([m.nnodes, m.node_rank, m.rendezvous], [2, 1, "127.0.0.1:29500"]);
  for (const q of SGLANG_QUANTIZATIONS.filter((q) => q !== "none")) {
    assertOk(FAKE_SGLANG_QUANTIZATIONS.includes(q), `fake SGLang lacks quantization ${q}`);
    assertEquals(
      serveConfig(fakeArgv(sglangPlugin.command(launch({ port: 8000, quantization: q })).argv))
        .quantization,
      q,
    );
  }
  const abbrev = serveConfig([
    "sglang",
    "--model",
    "m",
    "--tp",
    "8",
    "--context-len=4096",
    "--mem-frac",
    "0.8",
  ]);
  assertEquals([abbrev.model, abbrev.tp, abbrev.max_model_len, abbrev.host, abbrev.port], [
    "m",
    8,
    4096,
    "127.0.0.1",
    30000,
  ]);
  assertEquals(abbrev.flags.get("--mem-fraction-static"), "0.8");
});

Deno.test("argparse-style refusals: unknown flags, missing values, bad types and choices", () => {
  const unknown = usageError(["vllm", "serve", "m", "--bogus", "--port", "1"]);
  // Real vLLM reports extras from its top-level parser: "vllm: error: …".
  assertEquals(
    unknown.render(),
    `usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\nvllm: error: unrecognized arguments: --bogus\n`,
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "extra-positional"]).message,
    "unrecognized arguments: extra-positional",
  );
  const missing = usageError(["vllm", "serve", "m", "--port"]);
  assertEquals([missing.prog, missing.message], [
    "vllm serve",
    "argument --port: expected one argument",
  ]);
  assertEquals(
    usageError(["vllm", "serve", "m", "--port", "--host", "h"]).message,
    "argument --port: expected one argument",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "-tp", "two"]).message,
    "argument --tensor-parallel-size/-tp: invalid int value: 'two'",
  );
  assertStringIncludes(
    usageError(["vllm", "serve", "m", "-q", "none"]).message,
    "argument --quantization/-q: invalid choice: 'none' (choose from 'fp8', ",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "--headless=1"]).message,
    "argument --headless: ignored explicit argument '1'",
  );
  assertEquals(
    usageError(["vllm", "serve", "m", "--no-headless"]).message,
    "unrecognized arguments: --no-headless",
  );
  // vLLM does not take abbreviations; SGLang does, unless ambiguous.
  assertEquals(
    usageError(["vllm", "serve", "m", "--tensor-parallel", "2"]).message,
    "unrecognized arguments: --tensor-parallel 2",
  );
  const sgUnknown = usageError(["sglang", "--model-path", "m", "--bogus"]);
  assertEquals(
    sgUnknown.render(),
    "usage: launch_server.py [-h] --model-path MODEL_PATH [options]\nlaunch_server.py: error: unrecognized arguments: --bogus\n",
  );
  assertStringIncludes(
    usageError(["sglang", "--model-path", "m", "--t", "2"]).message,
    "ambiguous option: --t could match",
  );
  assertEquals(
    usageError(["sglang", "--tp-size", "2"]).message,
    "the following arguments are required: --model-path/--model",
  );
  assertEquals(
    usageError(["sglang", "--model-path", "m", "--port"]).message,
    "argument --port: expected one argument",
  );
  assertEquals(
    usageError(["other"]).message,
    "argument engine: invalid choice: 'other' (choose from 'vllm', 'sglang')",
  );
  try {
    parseCommandLine(["vllm", "serve", "m", "--nnodes", "2", "--node-rank", "2"]);
    throw new Error("node rank 2 of 2 must be refused");
  } catch (e) {
    assertOk(e instanceof ConfigError, String(e));
  }
});
