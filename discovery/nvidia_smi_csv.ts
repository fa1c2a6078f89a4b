/**
 * nvidia-smi's `--format=csv` output, read by its header row so that any
 * field order and subset works (design §5.1).
 *
 * @module
 */

/** A header column: the field name and the unit nvidia-smi puts in brackets. */
export interface CsvColumn {
  /** The field as queried, e.g. `memory.total`. */
  field: string;
  /** The unit from the header, e.g. `MiB` from `memory.total [MiB]`; `null` when none. */
  unit: string | null;
}

/** One data row, with its 1-based line number for messages. */
export interface CsvRow {
  /** 1-based line number in the output. */
  line: number;
  /** The trimmed cell texts, one per header column. */
  cells: string[];
}

/** A parsed CSV table: header and rows, plus lines that were not rows. */
export interface CsvTable {
  /** The header columns. */
  columns: CsvColumn[];
  /** The data rows. */
  rows: CsvRow[];
  /** Lines that could not be read as rows, each naming its line; never fatal. */
  problems: string[];
}

/** A value nvidia-smi printed: a real value, "unknown", or an error state. */
export type SmiValue =
  | { kind: "value"; text: string }
  | { kind: "unknown"; text: string }
  | { kind: "error"; text: string };

/** Raised when nvidia-smi's output cannot be read as a CSV table at all. */
export class NvidiaSmiParseError extends Error {
  /** Creates the error; `message` says what was wrong and where. */
  constructor(message: string) {
    super(message);
    this.name = "NvidiaSmiParseError";
  }
}

/** How many unreadable lines are described one by one. */
const MAX_LINE_PROBLEMS = 20;

const HEADER_COLUMN = /^([A-Za-z][A-Za-z0-9_.]*)(?:\s*\[([^\]]+)\])?$/;

/**
 * Values that mean "the driver does not know or will not say". They become
 * `null`, never zero (design §5.1).
 */
const UNKNOWN_VALUES = new Set([
  "[n/a]",
  "n/a",
  "[not supported]",
  "not supported",
  "[insufficient permissions]",
  "[unknown]",
  "",
]);

/** Values that mean the GPU itself is in trouble: a health problem (design §5.1). */
const ERROR_VALUES = new Set([
  "[unknown error]",
  "unknown error",
  "[gpu requires reset]",
  "[gpu is lost]",
  "err!",
  "[err!]",
]);

/** Removes ANSI colour codes, which some nvidia-smi builds emit even into pipes. */
export function stripAnsi(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/\x1b\[[0-9;]*m/g, "");
}

/**
 * Splits nvidia-smi CSV text into header columns and rows.
 *
 * @throws {NvidiaSmiParseError} When there is no header row.
 */
export function parseCsvTable(text: string, what = "nvidia-smi CSV"): CsvTable {
  const lines = stripAnsi(text).split(/\r?\n/);
  const headerAt = lines.findIndex((l) => l.trim() !== "");
  if (headerAt === -1) {
    throw new NvidiaSmiParseError(`Cannot parse ${what}: output is empty`);
  }
  const columns: CsvColumn[] = [];
  for (const raw of lines[headerAt].split(",")) {
    const m = HEADER_COLUMN.exec(raw.trim());
    if (m === null) {
      throw new NvidiaSmiParseError(
        `Cannot parse ${what}: line ${headerAt + 1} is not a header row: ${clip(lines[headerAt])}`,
      );
    }
    columns.push({ field: m[1].toLowerCase(), unit: m[2] ?? null });
  }
  const rows: CsvRow[] = [];
  const problems: string[] = [];
  let unreported = 0;
  for (let i = headerAt + 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim() === "") continue;
    const cells = line.split(",").map((c) => c.trim());
    if (cells.length !== columns.length) {
      // Garbage output can have millions of lines: report a few, count the rest.
      if (problems.length >= MAX_LINE_PROBLEMS) {
        unreported++;
        continue;
      }
      problems.push(
        `${what} line ${i + 1}: expected ${columns.length} values, got ${cells.length}: ${
          clip(line)
        }`,
      );
      continue;
    }
    rows.push({ line: i + 1, cells });
  }
  if (unreported > 0) problems.push(`${what}: ${unreported} more unreadable lines`);
  return { columns, rows, problems };
}

/** Classifies one cell: unknown markers and error states are told apart from values. */
export function smiValue(cell: string): SmiValue {
  const text = cell.trim();
  const lower = text.toLowerCase();
  if (ERROR_VALUES.has(lower)) return { kind: "error", text };
  // Any other bracketed text is nvidia-smi declining to answer
  // ("[Requested functionality has been deprecated]", "[N/A]", …).
  if (UNKNOWN_VALUES.has(lower) || /^\[.*\]$/.test(text)) return { kind: "unknown", text };
  return { kind: "value", text };
}

/**
 * Reads a number from a cell, dropping the unit when it matches the header's
 * (`81559 MiB` under `memory.total [MiB]`) or when the header had none.
 * Returns `null` for a cell that is not a plain number.
 */
export function smiNumber(text: string, unit: string | null): number | null {
  let t = text.trim();
  if (unit !== null && t.toLowerCase().endsWith(unit.toLowerCase())) {
    t = t.slice(0, -unit.length).trim();
  } else {
    t = t.replace(/\s*(MiB|W|C|%|MHz)$/i, "");
  }
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : null;
}

/** Shortens a line for a message, so a huge garbage line cannot flood logs. */
export function clip(line: string, max = 120): string {
  const t = line.trim();
  return t.length > max ? `${t.slice(0, max)}…` : t;
}
