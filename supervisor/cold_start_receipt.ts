/**
 * Builds a cold-start receipt (issue #25 item 7) from an engine's log lines
 * and its first ready probe: pure, one line at a time, at the time the
 * supervisor's clock gave the line's arrival (ms since the spawn). The
 * patterns are the engine plugin's (`EngineProbes.cold_start_phases`); the
 * phase names are engines/cold_start_phases.ts's.
 *
 * Rules:
 * - a phase begins at its first `start` line and ends at its last `end` line
 *   (a draft model's weights after the target's end the phase again);
 * - a phase whose engine prints no start line (vLLM's KV cache) begins where
 *   the latest phase that ended before it ended, or at the spawn;
 * - the named group `seconds` of the last matching line that has one is the
 *   engine's own figure;
 * - a `warm` line marks the phase's work as taken from a persistent cache;
 * - at the first ready probe, a declared phase never seen is `skipped`
 *   (vLLM with `--enforce-eager` compiles nothing and captures no graph);
 *   lines after that change nothing.
 *
 * @module
 */
import { COLD_START_PHASES, type PhasePattern } from "../engines/cold_start_phases.ts";
import type { LogPhase } from "../engines/cold_start_phases.ts";
import type { ColdStartReceipt, PhaseReceipt } from "../protocol/cold_start_receipt.ts";

/** A plugin's phase pattern, compiled. */
export interface CompiledPhasePattern {
  /** The phase. */
  phase: LogPhase;
  /** The expression. */
  re: RegExp;
  /** What a match says. */
  marks: PhasePattern["marks"];
}

/** Compiles a plugin's patterns once; one that does not compile is skipped (it costs the receipt that line, never the shard). */
export function compilePhasePatterns(
  patterns: readonly PhasePattern[] | undefined,
): CompiledPhasePattern[] {
  const out: CompiledPhasePattern[] = [];
  for (const p of patterns ?? []) {
    try {
      out.push({ phase: p.phase, re: new RegExp(p.regex), marks: p.marks });
    } catch {
      // A plugin's bad pattern costs the receipt, never the shard.
    }
  }
  return out;
}

/** An empty receipt for a spawn at `spawnedAt`: the phases `patterns` declare, then `ready`. */
export function newReceipt(
  spawnedAt: number,
  patterns: readonly CompiledPhasePattern[],
): ColdStartReceipt {
  const declared = new Set<string>(patterns.map((p) => p.phase));
  const phases = COLD_START_PHASES.filter((p) => declared.has(p) || p === "ready").map((
    phase,
  ): PhaseReceipt => ({
    phase,
    start_ms: null,
    end_ms: null,
    engine_seconds: null,
    warm: false,
    skipped: false,
  }));
  return { spawned_at: spawnedAt, download: null, phases };
}

/** Whether the receipt's first ready probe has been seen. */
export function isSettled(receipt: ColdStartReceipt): boolean {
  return receipt.phases.some((p) => p.phase === "ready" && p.end_ms !== null);
}

/** The receipt after one log line that arrived `atMs` after the spawn (the same object when nothing matched). */
export function receiptLine(
  receipt: ColdStartReceipt,
  patterns: readonly CompiledPhasePattern[],
  line: string,
  atMs: number,
): ColdStartReceipt {
  if (isSettled(receipt)) return receipt;
  let next = receipt;
  for (const p of patterns) {
    const m = p.re.exec(line);
    if (m === null) continue;
    const seconds = parseSeconds(m.groups?.seconds);
    next = update(next, p.phase, (r) => {
      const out = { ...r };
      if (p.marks === "start" && out.start_ms === null) out.start_ms = atMs;
      if (p.marks === "end") {
        out.end_ms = atMs;
        if (out.start_ms === null) out.start_ms = implicitStart(next, p.phase, atMs);
      }
      if (p.marks === "warm") out.warm = true;
      if (seconds !== null && p.marks !== "warm") out.engine_seconds = seconds;
      return out;
    });
  }
  return next;
}

/**
 * The receipt after the first ready probe `atMs` after the spawn: `ready`
 * ends there, and each declared phase never seen is skipped. Later calls
 * change nothing.
 */
export function receiptReady(receipt: ColdStartReceipt, atMs: number): ColdStartReceipt {
  if (isSettled(receipt)) return receipt;
  const lastEnd = Math.max(0, ...receipt.phases.map((p) => p.end_ms ?? 0));
  return {
    ...receipt,
    phases: receipt.phases.map((p) => {
      if (p.phase === "ready") return { ...p, start_ms: Math.min(lastEnd, atMs), end_ms: atMs };
      if (p.start_ms === null && p.end_ms === null) return { ...p, skipped: true };
      // Begun but its end line never came (a version that words it otherwise): it ran until ready.
      if (p.end_ms === null) return { ...p, end_ms: atMs };
      return p;
    }),
  };
}

/** The receipt with the agent's download (its model cache's figures) filled in. */
export function receiptDownload(
  receipt: ColdStartReceipt,
  download: NonNullable<ColdStartReceipt["download"]>,
): ColdStartReceipt {
  return { ...receipt, download: { ...download } };
}

function update(
  receipt: ColdStartReceipt,
  phase: LogPhase,
  f: (p: PhaseReceipt) => PhaseReceipt,
): ColdStartReceipt {
  return {
    ...receipt,
    phases: receipt.phases.map((p) => (p.phase === phase ? f(p) : p)),
  };
}

/** Where a phase without a start line began: the latest end of another phase up to `atMs`, else the spawn. */
function implicitStart(receipt: ColdStartReceipt, phase: LogPhase, atMs: number): number {
  let start = 0;
  for (const p of receipt.phases) {
    if (p.phase === phase || p.end_ms === null || p.end_ms > atMs) continue;
    start = Math.max(start, p.end_ms);
  }
  return start;
}

function parseSeconds(v: string | undefined): number | null {
  if (v === undefined || !/^\d+(\.\d+)?$/.test(v)) return null;
  // 400 digits parse to Infinity, which the wire refuses: a figure too big to be true is no figure.
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

/**
 * One shard's receipt across its runs, for the runner: a fresh receipt at
 * each spawn, lines and the first ready probe fed at the supervisor's clock,
 * none for an adopted engine (its start was not seen).
 */
export class ReceiptRecorder {
  #patterns: CompiledPhasePattern[] = [];
  #receipt: ColdStartReceipt | null = null;

  /** The current run's receipt; null before a spawn or for an adopted engine. */
  get receipt(): ColdStartReceipt | null {
    return this.#receipt;
  }

  /** A run was spawned at `at` (ms since epoch) with its plugin's phase patterns. */
  spawned(at: number, patterns: readonly PhasePattern[] | undefined): void {
    this.#patterns = compilePhasePatterns(patterns);
    this.#receipt = newReceipt(at, this.#patterns);
  }

  /** The agent's download before this run (its model cache's figures). */
  downloaded(download: NonNullable<ColdStartReceipt["download"]>): void {
    if (this.#receipt !== null) this.#receipt = receiptDownload(this.#receipt, download);
  }

  /** A line of the run's log arrived at `now`. */
  line(line: string, now: number): void {
    if (this.#receipt === null) return;
    this.#receipt = receiptLine(
      this.#receipt,
      this.#patterns,
      line,
      now - this.#receipt.spawned_at,
    );
  }

  /** The run passed its first ready probe at `now`: the settled receipt, or null when there is none or it was settled already. */
  ready(now: number): ColdStartReceipt | null {
    if (this.#receipt === null || isSettled(this.#receipt)) return null;
    this.#receipt = receiptReady(this.#receipt, now - this.#receipt.spawned_at);
    return this.#receipt;
  }

  /** No receipt for this run (an adopted engine). */
  forget(): void {
    this.#receipt = null;
  }
}
