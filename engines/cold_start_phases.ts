/**
 * The phases of an engine's cold start (issue #25 item 7), named once: the
 * closed list every receipt, plugin pattern, report, view and metric label
 * uses. The order is the order an engine goes through them (engine
 * reference §9): the agent's own download of the model's files, then the
 * engine's weights, torch.compile, the KV cache's profile and allocation,
 * CUDA graph capture, and the first ready probe.
 *
 * @module
 */

/** Every phase of a cold start, in the order they happen. */
export const COLD_START_PHASES = [
  "download",
  "weights",
  "compile",
  "kv_cache",
  "graph_capture",
  "ready",
] as const;

/** A phase of a cold start. */
export type ColdStartPhase = typeof COLD_START_PHASES[number];

/**
 * The phases an engine's own log lines mark, so the ones a plugin may
 * declare patterns for. `download` is the agent's (its model cache), `ready`
 * the supervisor's (the first ready probe).
 */
export const LOG_PHASES = ["weights", "compile", "kv_cache", "graph_capture"] as const;

/** A phase an engine's log marks. */
export type LogPhase = typeof LOG_PHASES[number];

/** Whether `name` is one of {@link LOG_PHASES}. */
export function isLogPhase(name: string): name is LogPhase {
  return (LOG_PHASES as readonly string[]).includes(name);
}

/**
 * What a matching line says about its phase:
 * - `start`: the phase began (the first such line counts);
 * - `end`: the phase ended (the last such line counts, so a phase an engine
 *   reports twice — a draft model's weights after the target's — ends with
 *   its last report);
 * - `warm`: the phase's work came from a persistent cache (vLLM's "Directly
 *   load the compiled graph(s) … from the cache").
 */
export type PhaseMark = "start" | "end" | "warm";

/** The marks, for schemas. */
export const PHASE_MARKS = ["start", "end", "warm"] as const satisfies readonly PhaseMark[];

/**
 * A log line pattern that marks a cold-start phase (a plugin declares them
 * in its probes). `regex` is a JavaScript regular expression; its optional
 * named group `seconds` is the engine's own figure for the phase (the last
 * line that carries one counts). A phase whose engine prints no start line
 * starts where the phase before it ended (supervisor/cold_start_receipt.ts).
 */
export interface PhasePattern {
  /** The phase. */
  phase: LogPhase;
  /** The expression's source. */
  regex: string;
  /** What a matching line says. */
  marks: PhaseMark;
}
