/**
 * Table tests of the receipt builder against the plugins' own patterns and
 * engine log lines as the engines print them. Sources of the recorded lines:
 *
 * - VLLM_COLD: a vLLM v0.11 (V1 engine) start of mistral-7b in Docker, cold
 *   compile cache (a public DGX Spark tutorial's recorded log; the lines'
 *   `[file.py:line]` tags are v0.11.0's: default_loader.py:267,
 *   gpu_model_runner.py:2653, backends.py:548/559/197/218, monitor.py:34);
 * - VLLM_WARM: a vLLM v0.10.2 start of llava-v1.6-mistral-7b with a warm
 *   compile cache (a public user log: "Initializing a V1 LLM engine
 *   (v0.10.2)", backends.py:161 "Directly load the compiled graph(s)");
 * - SGLANG: SGLang lines as model_runner.py and memory_pool.py format them,
 *   with a tensor-parallel rank prefix as in a public 4-GPU log
 *   ("[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s.
 *   avail mem=0.53 GB. mem usage=0.93 GB.").
 */
import { assertEquals } from "../tests/assert.ts";
import {
  SGLANG_COLD_START_PHASES,
  VLLM_COLD_START_PHASES,
} from "../engines/cold_start_patterns.ts";
import type { ColdStartReceipt, PhaseReceipt } from "../protocol/cold_start_receipt.ts";
import { ColdStartReceiptSchema, phaseSeconds } from "../protocol/cold_start_receipt.ts";
import {
  compilePhasePatterns,
  newReceipt,
  receiptDownload,
  receiptLine,
  receiptReady,
  ReceiptRecorder,
} from "./cold_start_receipt.ts";

const VLLM = compilePhasePatterns(VLLM_COLD_START_PHASES);
const SGLANG = compilePhasePatterns(SGLANG_COLD_START_PHASES);

/** Lines with the ms after the spawn at which each arrived. */
type Timed = [number, string];

const VLLM_COLD: Timed[] = [
  [
    1_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model /models/mistral-7b...",
  ],
  [
    2_000,
    "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:19<00:00, 19.47s/it]",
  ],
  [
    21_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:07 [default_loader.py:267] Loading weights took 19.62 seconds",
  ],
  [
    22_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:08 [gpu_model_runner.py:2653] Model loading took 3.8844 GiB and 20.442057 seconds",
  ],
  [
    25_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:11 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/d865434b5b/rank_0_0/backbone for vLLM's torch.compile",
  ],
  [
    25_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:11 [backends.py:559] Dynamo bytecode transform time: 3.29 s",
  ],
  [
    27_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:13 [backends.py:197] Cache the graph for dynamic shape for later use",
  ],
  [
    36_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:22 [backends.py:218] Compiling a graph for dynamic shape takes 10.00 s",
  ],
  [
    55_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:49:41 [monitor.py:34] torch.compile takes 13.29 s in total",
  ],
  [
    79_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:50:05 [gpu_worker.py:298] Available KV cache memory: 102.56 GiB",
  ],
  [
    80_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:50:06 [kv_cache_utils.py:1087] GPU KV cache size: 840,160 tokens",
  ],
  [
    84_000,
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]",
  ],
  [
    96_000,
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:12<00:00,  5.43it/s]",
  ],
  [
    103_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:50:29 [gpu_model_runner.py:3480] Graph capturing finished in 18 secs, took -0.03 GiB",
  ],
  [
    103_000,
    "(EngineCore_DP0 pid=164) INFO 01-23 15:50:29 [core.py:210] init engine (profile, create kv cache, warmup model) took 81.30 seconds",
  ],
];

const VLLM_WARM: Timed[] = [
  [
    1_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:10 [gpu_model_runner.py:2338] Starting to load model llava-hf/llava-v1.6-mistral-7b-hf...",
  ],
  [
    12_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:21 [gpu_model_runner.py:2392] Model loading took 14.0786 GiB and 10.247948 seconds",
  ],
  [
    18_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:27 [backends.py:539] Using cache directory: /home/esp/.cache/vllm/torch_compile_cache/e33390f0f5/rank_0_0/backbone for vLLM's torch.compile",
  ],
  [
    18_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:27 [backends.py:550] Dynamo bytecode transform time: 4.99 s",
  ],
  [
    21_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:30 [backends.py:161] Directly load the compiled graph(s) for dynamic shape from the cache, took 2.810 s",
  ],
  [
    22_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:31 [monitor.py:34] torch.compile takes 4.99 s in total",
  ],
  [
    25_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:34 [kv_cache_utils.py:864] GPU KV cache size: 451,744 tokens",
  ],
  [
    30_000,
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|█| 67/67 [00:02<00:00, 23",
  ],
  [
    30_000,
    "(EngineCore_DP0 pid=3021) INFO 09-23 18:12:39 [gpu_model_runner.py:3118] Graph capturing finished in 5 secs, took 0.67 GiB",
  ],
];

const SGLANG_LINES: Timed[] = [
  [
    2_000,
    "[2025-03-08 12:27:40 TP0] Load weight begin. avail mem=78.50 GB",
  ],
  [
    30_000,
    "[2025-03-08 12:28:08 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.50 GB, mem usage=15.00 GB.",
  ],
  [
    31_000,
    "[2025-03-08 12:28:09 TP0] KV Cache is allocated. #tokens: 393216, K size: 24.00 GB, V size: 24.00 GB",
  ],
  [
    32_000,
    "[2025-03-08 12:29:21 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB",
  ],
  [
    40_000,
    "[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.",
  ],
];

function build(
  patterns: typeof VLLM,
  lines: Timed[],
  readyAt: number | null,
): ColdStartReceipt {
  let r = newReceipt(1_700_000_000_000, patterns);
  for (const [at, line] of lines) r = receiptLine(r, patterns, line, at);
  if (readyAt !== null) r = receiptReady(r, readyAt);
  // Whatever the builder makes, the wire takes.
  ColdStartReceiptSchema.parse(r);
  return r;
}

function phase(r: ColdStartReceipt, name: PhaseReceipt["phase"]): PhaseReceipt | undefined {
  return r.phases.find((p) => p.phase === name);
}

const p = (
  phase: PhaseReceipt["phase"],
  start_ms: number | null,
  end_ms: number | null,
  engine_seconds: number | null,
  warm = false,
  skipped = false,
): PhaseReceipt => ({ phase, start_ms, end_ms, engine_seconds, warm, skipped });

Deno.test("a cold vLLM start: every phase, the engine's own figures, nothing warm", () => {
  const r = build(VLLM, VLLM_COLD, 105_000);
  assertEquals(r.phases, [
    p("weights", 1_000, 22_000, 20.442057),
    p("compile", 25_000, 55_000, 13.29),
    // No start line of its own: it begins where torch.compile ended.
    p("kv_cache", 55_000, 80_000, null),
    p("graph_capture", 84_000, 103_000, 18),
    p("ready", 103_000, 105_000, null),
  ]);
  assertEquals(r.download, null);
  assertEquals(phaseSeconds(phase(r, "compile")!), 30);
});

Deno.test("a warm vLLM start: compile is marked warm, graphs are captured all the same", () => {
  const r = build(VLLM, VLLM_WARM, 31_000);
  assertEquals(phase(r, "compile"), p("compile", 18_000, 22_000, 4.99, true));
  assertEquals(phase(r, "graph_capture"), p("graph_capture", 30_000, 30_000, 5));
  assertEquals(phase(r, "kv_cache"), p("kv_cache", 22_000, 25_000, null));
});

Deno.test("vLLM with --enforce-eager: compile and graph capture are skipped at ready", () => {
  const eager = VLLM_COLD.filter(([, l]) =>
    !/torch\.compile|Dynamo|graph|CUDA graphs|Graph capturing/.test(l)
  );
  const r = build(VLLM, eager, 90_000);
  assertEquals(phase(r, "compile"), p("compile", null, null, null, false, true));
  assertEquals(phase(r, "graph_capture"), p("graph_capture", null, null, null, false, true));
  // The KV cache then begins where the weights ended.
  assertEquals(phase(r, "kv_cache"), p("kv_cache", 22_000, 80_000, null));
});

Deno.test("SGLang: weights, KV cache and graphs; no compile phase is declared", () => {
  const r = build(SGLANG, SGLANG_LINES, 45_000);
  assertEquals(r.phases, [
    p("weights", 2_000, 30_000, null),
    p("kv_cache", 30_000, 31_000, null),
    p("graph_capture", 32_000, 40_000, 7.23),
    p("ready", 40_000, 45_000, null),
  ]);
  // Newer versions give their own figure.
  const newer = receiptLine(
    newReceipt(0, SGLANG),
    SGLANG,
    "[2026-05-15 09:09:00 TP0] Load weight end. elapsed=8.01 s, type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=62.08 GB, mem usage=16.41 GB.",
    9_000,
  );
  assertEquals(phase(newer, "weights")?.engine_seconds, 8.01);
});

Deno.test("the last end line counts (a draft model's weights after the target's); the first start", () => {
  const lines: Timed[] = [
    [1_000, "Load weight begin. avail mem=78.50 GB"],
    [5_000, "Load weight end. type=LlamaForCausalLM, avail mem=60 GB, mem usage=15.00 GB."],
    [6_000, "Load weight begin. avail mem=60 GB"],
    [8_000, "Load weight end. type=LlamaForCausalLMEagle3, avail mem=58 GB, mem usage=2.21 GB."],
  ];
  assertEquals(phase(build(SGLANG, lines, null), "weights"), p("weights", 1_000, 8_000, null));
});

Deno.test("before ready nothing is skipped; after ready lines change nothing", () => {
  const half = build(VLLM, VLLM_COLD.slice(0, 4), null);
  assertEquals(half.phases.every((x) => !x.skipped), true);
  assertEquals(phase(half, "ready"), p("ready", null, null, null));
  const done = receiptReady(half, 30_000);
  // The KV cache line of a version we do not know came after ready: ignored.
  const after = receiptLine(done, VLLM, VLLM_COLD[10][1], 40_000);
  assertEquals(after, done);
  assertEquals(receiptReady(done, 50_000), done);
});

Deno.test("a phase begun whose end line never came ran until ready", () => {
  const r = build(VLLM, VLLM_COLD.slice(0, 1), 9_000);
  assertEquals(phase(r, "weights"), p("weights", 1_000, 9_000, null));
});

Deno.test("no patterns: the receipt is the first ready probe only; a bad pattern is skipped", () => {
  const none = compilePhasePatterns(undefined);
  const r = build(none, VLLM_COLD, 2_000);
  assertEquals(r.phases, [p("ready", 0, 2_000, null)]);
  const bad = compilePhasePatterns([{ phase: "weights", marks: "start", regex: "(" }]);
  assertEquals(bad, []);
});

Deno.test("lines that match nothing leave the receipt as it was", () => {
  const r = newReceipt(0, VLLM);
  assertEquals(
    receiptLine(r, VLLM, 'INFO:     127.0.0.1:43210 - "GET /health HTTP/1.1" 200 OK', 5),
    r,
  );
});

Deno.test("the download slot takes the model cache's figures", () => {
  const r = receiptDownload(newReceipt(0, VLLM), { seconds: 12.5, bytes: 16_000_000_000 });
  assertEquals(r.download, { seconds: 12.5, bytes: 16_000_000_000 });
  ColdStartReceiptSchema.parse(r);
});

Deno.test("the recorder: a receipt per spawn, the download that preceded it, none when adopted", () => {
  const r = new ReceiptRecorder();
  r.downloaded({ seconds: 1, bytes: 1 });
  assertEquals(r.receipt, null);
  r.spawned(1_000, VLLM_COLD_START_PHASES);
  r.downloaded({ seconds: 42, bytes: 16_000_000_000 });
  r.line(VLLM_COLD[0][1], 2_000);
  assertEquals(r.receipt?.download, { seconds: 42, bytes: 16_000_000_000 });
  assertEquals(phase(r.receipt!, "weights")?.start_ms, 1_000);
  const settled = r.ready(9_000);
  assertEquals(phase(settled!, "ready")?.end_ms, 8_000);
  // Told once: a second ready gives nothing.
  assertEquals(r.ready(10_000), null);
  // The next spawn starts over, with no download (a restart fetches nothing).
  r.spawned(20_000, VLLM_COLD_START_PHASES);
  assertEquals([r.receipt?.spawned_at, r.receipt?.download], [20_000, null]);
  r.forget();
  assertEquals(r.receipt, null);
  assertEquals(r.ready(30_000), null);
});

Deno.test("an engine figure too big to be a number is left out, so the report stays valid", () => {
  const pats = compilePhasePatterns([
    { phase: "weights", marks: "end", regex: String.raw`took (?<seconds>\d+) s` },
  ]);
  const r = receiptLine(newReceipt(0, pats), pats, `took ${"9".repeat(400)} s`, 5);
  assertEquals(phase(r, "weights")?.engine_seconds, null);
  assertEquals(phase(r, "weights")?.end_ms, 5);
  ColdStartReceiptSchema.parse(receiptReady(r, 6));
});
