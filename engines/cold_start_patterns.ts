/**
 * The log lines that mark vLLM's and SGLang's cold-start phases (issue #25
 * item 7), as their plugins declare them (`EngineProbes.cold_start_phases`).
 * Each line, its format string and its source file are in engine reference
 * §9. Unanchored: vLLM prefixes its lines with the process
 * (`(EngineCore_DP0 pid=…)`, `(Worker_TP0 pid=…)`) and SGLang with the time
 * and rank (`[2025-03-08 12:29:21 TP0]`).
 *
 * @module
 */
import type { PhasePattern } from "./cold_start_phases.ts";

/**
 * vLLM's V1 engine (v0.10 to v0.30): weights from "Starting to load model"
 * to "Model loading took" (v1/worker/gpu_model_runner.py); torch.compile from
 * "Using cache directory … for vLLM's torch.compile" to "torch.compile takes
 * (took) … s in total" (compilation/backends.py, compilation/monitor.py),
 * warm when "Directly load the compiled graph(s) … from the cache"; the KV
 * cache until "GPU KV cache size" (v1/core/kv_cache_utils.py); CUDA graphs
 * from tqdm's "Capturing CUDA graphs" bar to "Graph capturing finished in"
 * (gpu_model_runner.py).
 */
export const VLLM_COLD_START_PHASES: readonly PhasePattern[] = [
  { phase: "weights", marks: "start", regex: String.raw`Starting to load model ` },
  {
    phase: "weights",
    marks: "end",
    regex: String.raw`Model loading took [\d.]+ GiB(?: memory)? and (?<seconds>[\d.]+) seconds`,
  },
  {
    phase: "compile",
    marks: "start",
    regex: String.raw`Using cache directory: .+ for vLLM's torch\.compile`,
  },
  {
    phase: "compile",
    marks: "warm",
    regex: String.raw`Directly load the compiled graph\(s\) for .+ from the cache, took [\d.]+ s`,
  },
  {
    phase: "compile",
    marks: "end",
    regex: String.raw`torch\.compile t(?:akes|ook) (?<seconds>[\d.]+) s in total`,
  },
  { phase: "kv_cache", marks: "end", regex: String.raw`GPU KV cache size: [\d,]+ tokens` },
  { phase: "graph_capture", marks: "start", regex: String.raw`Capturing CUDA graphs` },
  {
    phase: "graph_capture",
    marks: "end",
    regex: String.raw`Graph capturing finished in (?<seconds>\d+) secs`,
  },
];

/**
 * SGLang (model_executor/model_runner.py, mem_cache/memory_pool.py): weights
 * from "Load weight begin" to "Load weight end" (newer versions add
 * `elapsed=… s`), the KV cache until "KV Cache is allocated", CUDA graphs
 * from "Capture cuda graph begin" to "Capture cuda graph end. Time elapsed".
 * SGLang compiles with torch.compile only under `--enable-torch-compile`,
 * inside graph capture, with no lines of its own: no compile phase.
 */
export const SGLANG_COLD_START_PHASES: readonly PhasePattern[] = [
  { phase: "weights", marks: "start", regex: String.raw`Load weight begin\.` },
  {
    phase: "weights",
    marks: "end",
    regex: String.raw`Load weight end\.(?: elapsed=(?<seconds>[\d.]+) s)?`,
  },
  { phase: "kv_cache", marks: "end", regex: String.raw`KV Cache is allocated\. #tokens: \d+` },
  { phase: "graph_capture", marks: "start", regex: String.raw`Capture cuda graph begin\.` },
  {
    phase: "graph_capture",
    marks: "end",
    regex: String.raw`Capture cuda graph end\. Time elapsed: (?<seconds>[\d.]+) s`,
  },
];

/** Fresh copies, so a caller that edits its probes cannot change another shard's. */
export function phasePatterns(patterns: readonly PhasePattern[]): PhasePattern[] {
  return patterns.map((p) => ({ ...p }));
}
