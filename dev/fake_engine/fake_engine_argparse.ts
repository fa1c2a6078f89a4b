/**
 * A small argparse for the fake engine (dev/fake_engine/fake_engine.ts): flags,
 * values, `choices`, `required`, `nargs="+"`, `store_true` and
 * `BooleanOptionalAction`, with Python's error messages, so that a bad
 * command line fails as the real vLLM or SGLang would (exit 2).
 *
 * @module
 */

/** How a flag takes its value, in argparse's terms. */
export type FlagKind =
  /** One value (`--port 8000`, `--port=8000`). */
  | "value"
  /** One or more values (`nargs="+"`). */
  | "multi"
  /** `store_true`: no value, no `--no-` form. */
  | "store_true"
  /** `BooleanOptionalAction`: `--x` and `--no-x`. */
  | "bool_optional";

/** One flag of a parser. */
export interface FlagSpec {
  /** Option strings, the canonical long one first (e.g. `--tensor-parallel-size`, `-tp`). */
  names: readonly string[];
  /** How it takes values. */
  kind: FlagKind;
  /** The value type argparse would convert to (default str). */
  type?: "int" | "float" | "str" | "human_int";
  /** Allowed values, when argparse has `choices`. */
  choices?: readonly string[];
  /** argparse's `required=True`. */
  required?: boolean;
  /**
   * The Python class of its argparse action where it is not its kind's own
   * (`_StoreAction`, `_StoreTrueAction`, `BooleanOptionalAction`): SGLang's
   * deprecated flags, e.g. `DeprecatedStoreTrueAction`. Parsed as its kind;
   * SGLang's `--config` file refuses it (fake_engine_config_file.ts).
   */
  action?: string;
  /** argparse's `dest` where it is not the first long name's (`--x-y` → `x_y`). */
  dest?: string;
}

/** A parsed value: a string, true/false for booleans, a list for `multi`. */
export type FlagValue = string | boolean | string[];

/** An argparse error: the caller prints usage and `PROG: error: MESSAGE` and exits 2. */
export class UsageError extends Error {
  /** The program name argparse would print (`vllm`, `vllm serve`, `launch_server.py`). */
  readonly prog: string;
  /** The usage line printed before the error. */
  readonly usage: string;
  /** `message` is what follows `PROG: error: `. */
  constructor(prog: string, usage: string, message: string) {
    super(message);
    this.name = "UsageError";
    this.prog = prog;
    this.usage = usage;
  }
  /** Exactly what argparse writes to stderr. */
  render(): string {
    return `usage: ${this.usage}\n${this.prog}: error: ${this.message}\n`;
  }
}

/** Options of {@link parseFlags}. */
export interface ParserOptions {
  /** argparse `prog` for errors. */
  prog: string;
  /** The program that reports unrecognized arguments (argparse's top-level parser). */
  extrasProg: string;
  /** Usage line. */
  usage: string;
  /** Usage line of the top-level parser. */
  extrasUsage: string;
  /** argparse `allow_abbrev` (unambiguous prefixes of long flags). */
  allowAbbrev: boolean;
  /** vLLM's FlexibleArgumentParser: `--flag_name` means `--flag-name`. */
  underscoresAsDashes: boolean;
  /** Positional arguments accepted (vLLM's model_tag: 1; SGLang: 0). */
  maxPositionals: number;
}

/** The result of {@link parseFlags}: values by canonical flag name (`--port`). */
export interface ParsedFlags {
  /** Values by the canonical (first) option string of each flag given. */
  values: Map<string, FlagValue>;
  /** Positional arguments. */
  positionals: string[];
}

function looksLikeOption(arg: string): boolean {
  // argparse treats "-1" and "-0.5" as values when no option looks like a negative number.
  return arg.startsWith("-") && arg !== "-" && !/^-\d+$|^-\d*\.\d+$/.test(arg);
}

/** How argparse names a flag in messages: its option strings joined with `/`. */
export function display(spec: FlagSpec): string {
  return spec.names.join("/");
}

function checkValue(spec: FlagSpec, value: string, prog: string, usage: string): void {
  const fail = (msg: string) => {
    throw new UsageError(prog, usage, `argument ${display(spec)}: ${msg}`);
  };
  switch (spec.type) {
    case "int":
      if (!/^[+-]?\d+$/.test(value.trim())) fail(`invalid int value: '${value}'`);
      break;
    case "float":
      if (value.trim() === "" || !Number.isFinite(Number(value))) {
        fail(`invalid float value: '${value}'`);
      }
      break;
    case "human_int":
      if (parseHumanInt(value) === null) fail(`invalid human_readable_int value: '${value}'`);
      break;
  }
  if (spec.choices !== undefined && !spec.choices.includes(value)) {
    fail(
      `invalid choice: '${value}' (choose from ${spec.choices.map((c) => `'${c}'`).join(", ")})`,
    );
  }
}

/**
 * Parses `argv` the way Python's argparse would with these flags, or throws
 * {@link UsageError}. Like argparse, value errors stop at the first one, and
 * unknown arguments are collected and reported together at the end.
 */
export function parseFlags(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  o: ParserOptions,
): ParsedFlags {
  const exact = new Map<string, { spec: FlagSpec; negated: boolean }>();
  for (const spec of specs) {
    for (const name of spec.names) exact.set(name, { spec, negated: false });
    if (spec.kind === "bool_optional") {
      for (const name of spec.names) {
        if (name.startsWith("--")) exact.set(`--no-${name.slice(2)}`, { spec, negated: true });
      }
    }
  }
  const values = new Map<string, FlagValue>();
  const positionals: string[] = [];
  const unrecognized: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      for (const rest of argv.slice(i + 1)) {
        if (positionals.length < o.maxPositionals) positionals.push(rest);
        else unrecognized.push(rest);
      }
      break;
    }
    if (!looksLikeOption(arg)) {
      if (positionals.length < o.maxPositionals) positionals.push(arg);
      else unrecognized.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    let name = eq < 0 ? arg : arg.slice(0, eq);
    const inline = eq < 0 ? undefined : arg.slice(eq + 1);
    if (o.underscoresAsDashes && name.startsWith("--")) name = name.replaceAll("_", "-");
    let hit = exact.get(name);
    if (hit === undefined && o.allowAbbrev && name.startsWith("--") && name.length > 2) {
      const matches = [...exact.entries()].filter(([n]) => n.startsWith(name));
      const distinct = new Set(matches.map(([, h]) => `${h.spec.names[0]}/${h.negated}`));
      if (distinct.size > 1) {
        throw new UsageError(
          o.prog,
          o.usage,
          `ambiguous option: ${arg} could match ${matches.map(([n]) => n).join(", ")}`,
        );
      }
      if (matches.length > 0) hit = matches[0][1];
    }
    if (hit === undefined) {
      unrecognized.push(arg);
      continue;
    }
    const { spec, negated } = hit;
    const key = spec.names[0];
    if (spec.kind === "store_true" || spec.kind === "bool_optional") {
      if (inline !== undefined) {
        throw new UsageError(
          o.prog,
          o.usage,
          `argument ${display(spec)}: ignored explicit argument '${inline}'`,
        );
      }
      values.set(key, !negated);
      continue;
    }
    if (spec.kind === "value") {
      let value = inline;
      if (value === undefined) {
        if (i + 1 >= argv.length || looksLikeOption(argv[i + 1])) {
          throw new UsageError(o.prog, o.usage, `argument ${display(spec)}: expected one argument`);
        }
        value = argv[++i];
      }
      checkValue(spec, value, o.prog, o.usage);
      values.set(key, value);
      continue;
    }
    // multi (nargs="+")
    const list: string[] = [];
    if (inline !== undefined) list.push(inline);
    else {
      while (i + 1 < argv.length && !looksLikeOption(argv[i + 1]) && argv[i + 1] !== "--") {
        list.push(argv[++i]);
      }
    }
    if (list.length === 0) {
      throw new UsageError(
        o.prog,
        o.usage,
        `argument ${display(spec)}: expected at least one argument`,
      );
    }
    for (const v of list) checkValue(spec, v, o.prog, o.usage);
    values.set(key, list);
  }
  const missing = specs.filter((s) => s.required === true && !values.has(s.names[0]));
  if (missing.length > 0) {
    throw new UsageError(
      o.prog,
      o.usage,
      `the following arguments are required: ${missing.map(display).join(", ")}`,
    );
  }
  if (unrecognized.length > 0) {
    throw new UsageError(
      o.extrasProg,
      o.extrasUsage,
      `unrecognized arguments: ${unrecognized.join(" ")}`,
    );
  }
  return { values, positionals };
}

/** vLLM's `human_readable_int`: `32768`, `32k` (×1000), `32K` (×1024), `-1`/`auto`; null when invalid. */
export function parseHumanInt(value: string): number | null {
  if (value === "-1" || value === "auto") return -1;
  const m = /^(\d+(?:\.\d+)?)([kmgKMG]?)$/.exec(value.trim());
  if (m === null) return null;
  const mult: Record<string, number> = {
    "": 1,
    k: 1e3,
    m: 1e6,
    g: 1e9,
    K: 1024,
    M: 1024 ** 2,
    G: 1024 ** 3,
  };
  const n = Number(m[1]) * mult[m[2]];
  return Number.isInteger(n) ? n : null;
}
