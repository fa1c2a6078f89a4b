/**
 * A cold-start receipt on the wire (issue #25 item 7): how one start of an
 * engine spent its time, phase by phase, as the supervisor saw it in the
 * engine's log (supervisor/cold_start_receipt.ts builds it) and the agent
 * reports it with the shard. The phase names are engines/cold_start_phases.ts's.
 *
 * Bounded: one entry per phase of the closed list, numbers and booleans,
 * and the download's sources within protocol/report_bounds.ts (the agent
 * clips them before a heartbeat leaves, agent/reports.ts).
 *
 * @module
 */
import { z } from "zod";
import { COLD_START_PHASES, type ColdStartPhase } from "../engines/cold_start_phases.ts";
import type { Assert, Same } from "./same_type.ts";
import { REPORT_BOUNDS } from "./report_bounds.ts";
import { formatBytes } from "../text/bytes.ts";

/** One phase of a receipt. Times are milliseconds since the engine was spawned. */
export interface PhaseReceipt {
  /** The phase. */
  phase: ColdStartPhase;
  /** When it began; null when not seen. A phase the engine prints no start line for begins where the phase before it ended. */
  start_ms: number | null;
  /** When it ended; null while it runs or when never seen. */
  end_ms: number | null;
  /** The engine's own figure for the phase, in seconds, when its log line gives one. */
  engine_seconds: number | null;
  /** True when the engine said the phase's work came from a persistent cache. */
  warm: boolean;
  /** True when the engine became ready without the phase (e.g. vLLM with `--enforce-eager` compiles nothing). */
  skipped: boolean;
}

/** One source of a download and the bytes it supplied (issue #25 item 3). */
export interface DownloadSource {
  /** What it is: the hub (or a mirror), a peer agent, a shared path. */
  kind: "hub" | "peer" | "path";
  /** Its name: the hub's endpoint (never with a token), `peer <node>`, a path. */
  name: string;
  /** Bytes it streamed for this download (a range cut midway counts what came). */
  bytes: number;
}

/** The agent's own download of the model's files before the engine started. */
export interface DownloadReceipt {
  /** Seconds the download took (0 when every file was already on the host). */
  seconds: number;
  /** Bytes fetched. */
  bytes: number;
  /** Where the bytes came from, most first; absent from older agents and when nothing was fetched. */
  sources?: DownloadSource[];
}

/** A receipt of one engine start. */
export interface ColdStartReceipt {
  /** When the engine was spawned (ms since epoch). */
  spawned_at: number;
  /** The agent's download before the spawn; null until its model cache reports one. */
  download: DownloadReceipt | null;
  /** The engine's phases its plugin declares, then `ready`, in {@link COLD_START_PHASES} order. */
  phases: PhaseReceipt[];
}

const ms = z.number().min(0).nullable();

/** {@link ColdStartReceipt} on the wire. */
export const ColdStartReceiptSchema = z.object({
  spawned_at: z.number(),
  download: z.object({
    seconds: z.number().min(0),
    bytes: z.number().min(0),
    sources: z.array(z.object({
      kind: z.enum(["hub", "peer", "path"]),
      name: z.string().min(1).max(REPORT_BOUNDS.downloadSource),
      bytes: z.number().int().min(0),
    })).max(REPORT_BOUNDS.downloadSources).optional(),
  }).nullable(),
  phases: z.array(z.object({
    phase: z.enum(COLD_START_PHASES),
    start_ms: ms,
    end_ms: ms,
    engine_seconds: z.number().min(0).nullable(),
    warm: z.boolean(),
    skipped: z.boolean(),
  })).max(COLD_START_PHASES.length),
});

// `deno check` fails here when the interface and the schema drift apart.
type _ReceiptMatchesSchema = Assert<
  Same<z.output<typeof ColdStartReceiptSchema>, ColdStartReceipt>
>;

/**
 * Where a download's bytes came from, in words, to follow its size in the
 * event log and `describe replica`: ` from peer h100-a`, ` from the hub
 * http://…`, or `: 48.0 MiB from peer h100-a, 16.0 MiB from the hub
 * http://…`; empty when the receipt names no source (an older agent,
 * nothing fetched).
 */
export function downloadSourcesText(d: Pick<DownloadReceipt, "sources">): string {
  const sources = (d.sources ?? []).filter((s) => s.bytes > 0);
  const said = (s: DownloadSource) => s.kind === "hub" ? `the hub ${s.name}` : s.name;
  if (sources.length === 0) return "";
  if (sources.length === 1) return ` from ${said(sources[0])}`;
  return `: ${sources.map((s) => `${formatBytes(s.bytes)} from ${said(s)}`).join(", ")}`;
}

/** The phase's duration in seconds as the supervisor saw it; null while unknown. */
export function phaseSeconds(p: PhaseReceipt): number | null {
  if (p.start_ms === null || p.end_ms === null) return null;
  return Math.max(0, p.end_ms - p.start_ms) / 1000;
}

/** The columns of {@link coldStartRows}. */
export const COLD_START_COLUMNS = ["PHASE", "SECONDS", "ENGINE SAYS", "NOTE"] as const;

/**
 * A receipt as `describe replica` and the dashboard's replica page show it,
 * one row per phase ({@link COLD_START_COLUMNS}): the download first, with
 * its bytes and where they came from ({@link downloadSourcesText}), then
 * each phase's seconds, the engine's own figure, and whether a persistent
 * cache made it warm or the engine skipped it; last the total to ready.
 */
export function coldStartRows(r: ColdStartReceipt): string[][] {
  const rows: string[][] = [];
  if (r.download !== null) {
    rows.push([
      "download",
      r.download.seconds.toFixed(2),
      "",
      `${formatBytes(r.download.bytes)} fetched${downloadSourcesText(r.download)}`,
    ]);
  }
  for (const p of r.phases) rows.push(phaseRow(p));
  const ready = r.phases.find((p) => p.phase === "ready");
  if (ready?.end_ms != null) {
    rows.push(["total", (ready.end_ms / 1000).toFixed(2), "", "spawn to first ready probe"]);
  }
  return rows;
}

function phaseRow(p: PhaseReceipt): string[] {
  const s = phaseSeconds(p);
  const note = p.skipped
    ? "skipped"
    : p.warm
    ? "warm: from the compile cache"
    : p.start_ms !== null && p.end_ms === null
    ? "under way"
    : s === null
    ? "not seen yet"
    : "";
  return [
    p.phase,
    s === null ? "-" : s.toFixed(2),
    p.engine_seconds === null ? "" : String(p.engine_seconds),
    note,
  ];
}
