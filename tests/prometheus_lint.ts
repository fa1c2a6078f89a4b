/**
 * Test tooling: a checker of Prometheus text exposition format 0.0.4, so
 * every `/metrics` renderer can be held to the format and to Prometheus'
 * naming conventions on any machine, and a runner of `promtool check
 * metrics` for where promtool is installed (CI installs it).
 *
 * {@link parseExposition} refuses what a Prometheus server would fail to
 * ingest or would ingest wrongly (syntax, bad escapes, a family's samples
 * split up, a series twice); {@link lintExposition} adds the conventions
 * promtool's linter checks (help text, `_total` on counters and only there,
 * snake_case, base units) and consistent histograms.
 *
 * @module
 */

/** The metric types of text format 0.0.4. */
export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

/** One sample line. */
export interface ExpositionSample {
  /** The sample's name, e.g. `x_bucket` of histogram `x`. */
  name: string;
  /** Its labels, unescaped. */
  labels: Record<string, string>;
  /** Its value. */
  value: number;
  /** Its line number (1-based). */
  line: number;
}

/** One metric family: its metadata and its samples, in order. */
export interface ExpositionFamily {
  /** The family's name. */
  name: string;
  /** From its TYPE line; `untyped` without one. */
  type: MetricType;
  /** From its HELP line, unescaped; null without one. */
  help: string | null;
  /** Its samples. */
  samples: ExpositionSample[];
}

/** Text that is not valid exposition format. */
export class ExpositionError extends Error {
  /** Creates the error; `line` is 1-based. */
  constructor(line: number, message: string) {
    super(`Cannot parse metrics: line ${line}: ${message}`);
    this.name = "ExpositionError";
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const TYPES: readonly string[] = ["counter", "gauge", "histogram", "summary", "untyped"];
const FLOAT = /^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)$/;

/**
 * The families of `text`, in the order they appear.
 *
 * @throws {ExpositionError} Naming the line, for anything Prometheus would
 * refuse or misread.
 */
export function parseExposition(text: string): ExpositionFamily[] {
  if (text !== "" && !text.endsWith("\n")) {
    throw new ExpositionError(text.split("\n").length, "the text does not end in a line feed");
  }
  const families = new Map<string, ExpositionFamily>();
  const ordered: ExpositionFamily[] = [];
  const series = new Set<string>();
  const typed = new Set<string>();
  /** Families whose samples ended: more samples of theirs later would split them. */
  const closed = new Set<string>();
  let current: ExpositionFamily | null = null;
  const family = (name: string): ExpositionFamily => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: "untyped", help: null, samples: [] };
      families.set(name, f);
      ordered.push(f);
    }
    return f;
  };
  const lines = text.split("\n").slice(0, -1);
  lines.forEach((raw, i) => {
    const n = i + 1;
    const line = raw.replace(/^[ \t]+/, "");
    if (line === "") return;
    if (line.startsWith("#")) {
      const m = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(line);
      if (m === null) return; // A plain comment.
      const [, keyword, name, rest = ""] = m;
      if (!METRIC_NAME.test(name)) throw new ExpositionError(n, `invalid metric name "${name}"`);
      const f = family(name);
      if (keyword === "HELP") {
        if (f.help !== null) throw new ExpositionError(n, `a second HELP line for ${name}`);
        f.help = unescape(rest, n, false);
      } else {
        const type = rest.trim();
        if (!TYPES.includes(type)) throw new ExpositionError(n, `unknown metric type "${type}"`);
        if (f.samples.length > 0 || typed.has(name) || closed.has(name)) {
          throw new ExpositionError(n, `a TYPE line for ${name} after its samples or TYPE`);
        }
        typed.add(name);
        f.type = type as MetricType;
      }
      return;
    }
    const sample = parseSample(line, n);
    const f = family(familyName(sample.name, families));
    if (current !== f) {
      if (closed.has(f.name)) {
        throw new ExpositionError(n, `samples of ${f.name} are split by other families`);
      }
      if (current !== null) closed.add(current.name);
      current = f;
    }
    const key = `${sample.name}{${
      Object.entries(sample.labels).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) =>
        `${k}=${JSON.stringify(v)}`
      ).join(",")
    }}`;
    if (series.has(key)) throw new ExpositionError(n, `series ${key} appears twice`);
    series.add(key);
    f.samples.push(sample);
  });
  return ordered;
}

/** The family a sample belongs to: its own name's, or the histogram or summary it is part of. */
function familyName(sample: string, families: ReadonlyMap<string, ExpositionFamily>): string {
  if (families.has(sample)) return sample;
  for (const [suffix, types] of SUFFIXES) {
    if (!sample.endsWith(suffix)) continue;
    const base = families.get(sample.slice(0, -suffix.length));
    if (base !== undefined && types.includes(base.type)) return base.name;
  }
  return sample;
}

const SUFFIXES: [string, MetricType[]][] = [
  ["_bucket", ["histogram"]],
  ["_sum", ["histogram", "summary"]],
  ["_count", ["histogram", "summary"]],
];

function parseSample(line: string, n: number): ExpositionSample {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (m === null) throw new ExpositionError(n, "a sample line must start with a metric name");
  const name = m[1];
  let pos = name.length;
  const labels: Record<string, string> = {};
  if (line[pos] === "{") {
    pos++;
    while (true) {
      pos = skipBlanks(line, pos);
      if (line[pos] === "}") {
        pos++;
        break;
      }
      const ln = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(pos));
      if (ln === null) throw new ExpositionError(n, `invalid label name at column ${pos + 1}`);
      const label = ln[0];
      pos = skipBlanks(line, pos + label.length);
      if (line[pos] !== "=") throw new ExpositionError(n, `expected "=" after label ${label}`);
      pos = skipBlanks(line, pos + 1);
      if (line[pos] !== '"') throw new ExpositionError(n, `label ${label}'s value is not quoted`);
      let end = pos + 1;
      while (end < line.length && line[end] !== '"') end += line[end] === "\\" ? 2 : 1;
      if (end >= line.length) throw new ExpositionError(n, `label ${label}'s value is not closed`);
      if (label in labels) throw new ExpositionError(n, `label ${label} appears twice`);
      labels[label] = unescape(line.slice(pos + 1, end), n, true);
      pos = skipBlanks(line, end + 1);
      if (line[pos] === ",") pos++;
      else if (line[pos] !== "}") {
        throw new ExpositionError(n, `expected "," or "}" after label ${label}`);
      }
    }
  }
  const rest = line.slice(pos);
  const parts = rest.trim().split(/[ \t]+/);
  if (!/^[ \t]/.test(rest) || parts.length > 2 || parts[0] === "") {
    throw new ExpositionError(n, `expected a value and an optional timestamp after ${name}`);
  }
  const value = parseValue(parts[0]);
  if (value === null) throw new ExpositionError(n, `invalid value "${parts[0]}"`);
  if (parts.length === 2 && !/^-?\d+$/.test(parts[1])) {
    throw new ExpositionError(n, `invalid timestamp "${parts[1]}"`);
  }
  return { name, labels, value, line: n };
}

function skipBlanks(s: string, pos: number): number {
  while (s[pos] === " " || s[pos] === "\t") pos++;
  return pos;
}

function parseValue(s: string): number | null {
  if (s === "NaN") return NaN;
  if (s === "+Inf" || s === "Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  return FLOAT.test(s) ? Number(s) : null;
}

/** Undoes the format's escapes: `\\` and `\n`, and `\"` in label values. */
function unescape(s: string, n: number, quoted: boolean): string {
  return s.replace(/\\(.?)/g, (_, c: string) => {
    if (c === "\\") return "\\";
    if (c === "n") return "\n";
    if (c === '"' && quoted) return '"';
    throw new ExpositionError(n, `invalid escape sequence "\\${c}"`);
  });
}

/** Units Prometheus wants in base form, and the base form to use. */
const NON_BASE_UNITS: Record<string, string> = {
  milliseconds: "seconds",
  microseconds: "seconds",
  nanoseconds: "seconds",
  minutes: "seconds",
  hours: "seconds",
  days: "seconds",
  ms: "seconds",
  us: "seconds",
  ns: "seconds",
  sec: "seconds",
  secs: "seconds",
  kilobytes: "bytes",
  megabytes: "bytes",
  gigabytes: "bytes",
  kb: "bytes",
  mb: "bytes",
  gb: "bytes",
  kib: "bytes",
  mib: "bytes",
  gib: "bytes",
  percent: "ratio",
  pct: "ratio",
  fahrenheit: "celsius",
};

/**
 * Problems of `text`, each naming its family or line; empty when it is
 * valid and follows the conventions. A syntax error is the one problem.
 */
export function lintExposition(text: string): string[] {
  let families: ExpositionFamily[];
  try {
    families = parseExposition(text);
  } catch (e) {
    if (e instanceof ExpositionError) return [e.message];
    throw e;
  }
  const problems: string[] = [];
  for (const f of families) {
    const say = (p: string) => problems.push(`${f.name}: ${p}`);
    if (f.help === null || f.help.trim() === "") say("no help text");
    if (/[A-Z]/.test(f.name)) say("metric names should be snake_case, not camelCase");
    if (f.name.includes(":")) say("metric names should not contain ':' (recording rules use it)");
    if (f.type === "counter" && !f.name.endsWith("_total")) say('a counter should end in "_total"');
    if (f.type !== "counter" && f.name.endsWith("_total")) {
      say('only counters end in "_total"');
    }
    if (f.type !== "histogram" && f.type !== "summary" && /_(bucket|sum|count)$/.test(f.name)) {
      say("only histograms and summaries have _bucket, _sum and _count samples");
    }
    for (const part of f.name.split("_")) {
      const base = NON_BASE_UNITS[part.toLowerCase()];
      if (base !== undefined) say(`use the base unit "${base}", not "${part}"`);
    }
    for (const s of f.samples) {
      for (const l of Object.keys(s.labels)) {
        if (/[A-Z]/.test(l)) say(`line ${s.line}: label ${l} should be snake_case`);
        if (l.startsWith("__")) say(`line ${s.line}: label names starting "__" are reserved`);
      }
      if (s.labels.le !== undefined && !(f.type === "histogram" && s.name === `${f.name}_bucket`)) {
        say(`line ${s.line}: only histogram buckets have an "le" label`);
      }
      if (f.type === "counter" && !(s.value >= 0)) {
        say(`line ${s.line}: a counter's value ${s.value} is not a number of at least 0`);
      }
    }
    if (f.type === "histogram") problems.push(...histogramProblems(f));
  }
  return problems;
}

/** A histogram's series: buckets rising to +Inf, never falling, `_count` equal to +Inf's. */
function histogramProblems(f: ExpositionFamily): string[] {
  const problems: string[] = [];
  const groups = new Map<string, { buckets: ExpositionSample[]; count: ExpositionSample | null }>();
  for (const s of f.samples) {
    const rest = Object.entries(s.labels).filter(([k]) => k !== "le").sort(([a], [b]) =>
      a < b ? -1 : 1
    );
    const key = JSON.stringify(rest);
    let g = groups.get(key);
    if (g === undefined) groups.set(key, g = { buckets: [], count: null });
    if (s.name === `${f.name}_bucket`) g.buckets.push(s);
    else if (s.name === `${f.name}_count`) g.count = s;
  }
  for (const [key, g] of groups) {
    const say = (p: string) => problems.push(`${f.name}${key === "[]" ? "" : ` ${key}`}: ${p}`);
    const bounds = g.buckets.map((b) => parseValue(b.labels.le ?? ""));
    if (bounds.some((b) => b === null || Number.isNaN(b))) {
      say('every bucket needs a numeric "le" label');
      continue;
    }
    if (bounds.at(-1) !== Infinity) say('the last bucket must be le="+Inf"');
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(bounds[i]! > bounds[i - 1]!)) say(`line ${g.buckets[i].line}: bucket bounds must rise`);
      if (g.buckets[i].value < g.buckets[i - 1].value) {
        say(`line ${g.buckets[i].line}: bucket counts are cumulative and never fall`);
      }
    }
    if (g.count === null) say("no _count sample");
    else if (g.buckets.length > 0 && g.count.value !== g.buckets.at(-1)!.value) {
      say(`_count ${g.count.value} differs from the +Inf bucket's ${g.buckets.at(-1)!.value}`);
    }
  }
  return problems;
}

/** The promtool executable on PATH, or null when there is none. */
export function promtoolPath(): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir === "") continue;
    const path = `${dir}/promtool`;
    try {
      const info = Deno.statSync(path);
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return path;
    } catch {
      // Not in this directory.
    }
  }
  return null;
}

/** What `promtool check metrics` said about a text. */
export interface PromtoolResult {
  /** Its exit code: 0 valid and clean, 1 unparsable, 3 lint problems. */
  code: number;
  /** Its stdout and stderr. */
  output: string;
}

/** Runs `promtool check metrics` on `text` (given on stdin). */
export async function promtoolCheckMetrics(
  text: string,
  promtool: string,
): Promise<PromtoolResult> {
  const child = new Deno.Command(promtool, {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, output: (dec.decode(out.stdout) + dec.decode(out.stderr)).trim() };
}
