/**
 * SGLang's `--config FILE` for the fake engine (dev/fake_engine/fake_engine.ts),
 * as strict as the real one (engine reference §6.2): SGLang ≥ 0.5.3's
 * `prepare_server_args` merges the file when the literal token `--config`
 * is in argv (sglang `ConfigArgumentMerger.merge_config_with_args`): the
 * file's values become `--key value` arguments placed before the command
 * line's, so the command line wins, and argparse then parses the lot. Its
 * refusals are Python ValueErrors with SGLang's own messages.
 *
 * The fake reads only the YAML llmgw writes (engines/api_key.ts): a flat
 * mapping of `key: value` lines whose values are double-quoted strings (with
 * `\"` and `\\` escapes) or `true`/`false`. Anything else is refused with a
 * message saying so: stricter than SGLang, never more lenient. So are a
 * `--config=PATH` or an abbreviation of `--config`, which real SGLang's
 * argparse takes and then ignores (the merge looks for the literal token).
 *
 * A key whose flag's argparse action is neither store nor store_true is
 * refused as SGLang refuses it ("Unsupported config option"), from the
 * actions the fake's flag table records (fake_engine_flags.ts: its
 * BooleanOptionalAction flags and SGLang's deprecated ones). Like SGLang,
 * it looks the key up by each flag's `dest` only: `cuda-graph-max-bs`
 * (dest `cuda_graph_max_bs_decode`) is passed on to argparse, which takes it.
 *
 * @module
 */

import type { FlagSpec } from "./fake_engine_argparse.ts";
import { ConfigError } from "./fake_engine_config_error.ts";

/** A refusal of the fake's own, where real SGLang would do something the fake does not imitate. */
export class FakeConfigFileError extends Error {
  /** `message` says what the fake refused and why. */
  constructor(message: string) {
    super(message);
    this.name = "FakeConfigFileError";
  }
}

/** How the fake reads a config file; injectable for tests. */
export interface ConfigFiles {
  /** Python's `Path.exists()`: follows links; false when it cannot tell. */
  exists(path: string): boolean;
  /** The file's text; throws Deno's errors. */
  read(path: string): string;
}

/** The real file system. */
export const DENO_FILES: ConfigFiles = {
  exists(path) {
    try {
      Deno.statSync(path);
      return true;
    } catch {
      return false;
    }
  },
  read: (path) => Deno.readTextFileSync(path),
};

/** A YAML value of the subset the fake reads. */
type ConfigValue = string | boolean;

/** A command line with its config file read: SGLang parses `[...file, ...cli]`. */
export interface MergedArgs {
  /** The file's values as arguments (empty without `--config`). */
  file: string[];
  /** The command line without `--config FILE`. */
  cli: string[];
}

/**
 * `argv` with its `--config FILE` read as SGLang reads it: the file's
 * arguments go before the rest of the command line.
 *
 * @throws {ConfigError} SGLang's ValueErrors (and the OSError of a file it cannot open).
 * @throws {FakeConfigFileError} For a file or spelling the fake does not imitate.
 */
export function mergeConfigFile(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  files: ConfigFiles = DENO_FILES,
): MergedArgs {
  refuseIgnoredSpellings(argv, specs);
  const at = argv.flatMap((a, i) => a === "--config" ? [i] : []);
  if (at.length > 1) throw new ConfigError("Multiple config files specified! Only one allowed.");
  if (at.length === 0) return { file: [], cli: [...argv] };
  if (at[0] === argv.length - 1) {
    throw new ConfigError("No config file specified after --config flag!");
  }
  const path = argv[at[0] + 1];
  const suffix = pythonSuffix(path).toLowerCase();
  if (suffix !== ".yaml" && suffix !== ".yml") {
    throw new ConfigError(`Config file must be YAML format, got: ${pythonSuffix(path)}`);
  }
  if (!files.exists(path)) throw new ConfigError(`Config file not found: ${path}`);
  let text: string;
  try {
    text = files.read(path);
  } catch (e) {
    // SGLang logs this line, then Python's `open()` error ends the process.
    const [type, errno, why] = e instanceof Deno.errors.PermissionDenied
      ? ["PermissionError", 13, "Permission denied"]
      : e instanceof Deno.errors.IsADirectory
      ? ["IsADirectoryError", 21, "Is a directory"]
      : ["OSError", 5, "Input/output error"];
    const error = `[Errno ${errno}] ${why}: '${path}'`;
    throw new ConfigError(error, type, [`Failed to read config file ${path}: ${error}`]);
  }
  const config = parseConfigYaml(text, path);
  return {
    file: configArgs(config, specs),
    cli: [...argv.slice(0, at[0]), ...argv.slice(at[0] + 2)],
  };
}

/** `--config=PATH` and `--conf PATH` parse in SGLang, but its merge never sees them. */
function refuseIgnoredSpellings(argv: readonly string[], specs: readonly FlagSpec[]): void {
  const names = specs.flatMap((s) => s.names);
  for (const arg of argv) {
    const flag = arg.split("=")[0];
    const abbreviates = flag !== "--config" && flag.length > 2 && "--config".startsWith(flag) &&
      names.filter((n) => n.startsWith(flag)).length === 1;
    if (arg.startsWith("--config=") || abbreviates) {
      throw new FakeConfigFileError(
        `${arg}: real SGLang merges a config file only when given as the two arguments "--config PATH", and would ignore this one; the fake refuses it`,
      );
    }
  }
}

/** Python's `PurePath.suffix`: the last component's final `.ext`, or "" (also for `.hidden`). */
function pythonSuffix(path: string): string {
  const name = path.split("/").filter((p) => p !== "").pop() ?? "";
  const dot = name.lastIndexOf(".");
  return dot > 0 && dot < name.length - 1 ? name.slice(dot) : "";
}

const QUOTED = String.raw`"(?:[^"\\]|\\["\\])*"`;
const PLAIN_KEY = "[A-Za-z][A-Za-z0-9_-]*";
const LINE = new RegExp(
  `^(?<key>${QUOTED}|${PLAIN_KEY})[ \\t]*:[ \\t]+(?<value>${QUOTED}|true|false)[ \\t]*$`,
);
/** Plain keys YAML 1.1 (PyYAML) reads as booleans or null, not strings. */
const NOT_STRINGS = /^(?:y|n|yes|no|true|false|on|off|null)$/i;

/**
 * The mapping in `text`, from the subset of YAML llmgw writes; SGLang's
 * error when the document is a list or a scalar, not a mapping.
 *
 * @throws {ConfigError} "Config file must contain a dictionary at root level".
 * @throws {FakeConfigFileError} For YAML outside the subset, naming the line.
 */
export function parseConfigYaml(text: string, path: string): Map<string, ConfigValue> {
  const lines = text.split(/\r?\n/).map((l, i) => ({ l, n: i + 1 }))
    .filter(({ l }) => l.trim() !== "" && !l.trimStart().startsWith("#"));
  const config = new Map<string, ConfigValue>();
  if (lines.length === 0) return config; // PyYAML reads an empty document as None: no values.
  const first = lines[0].l.trim();
  const scalar = lines.length === 1 && !/:(?:\s|$)/.test(first);
  if (first === "-" || first.startsWith("- ") || scalar) {
    throw new ConfigError("Config file must contain a dictionary at root level");
  }
  for (const { l, n } of lines) {
    const m = LINE.exec(l);
    const key = m === null ? null : unquote(m.groups!.key);
    if (m === null || (!m.groups!.key.startsWith('"') && NOT_STRINGS.test(key!))) {
      throw new FakeConfigFileError(
        `cannot read config file ${path} line ${n}: the fake reads only flat "key": "string" and key: true/false lines (llmgw writes "api-key": "KEY")`,
      );
    }
    if (config.has(key!)) {
      // PyYAML keeps the last; the fake will not guess which one was meant.
      throw new FakeConfigFileError(
        `cannot read config file ${path} line ${n}: ${key} is repeated`,
      );
    }
    const value = m.groups!.value;
    config.set(key!, value === "true" ? true : value === "false" ? false : unquote(value));
  }
  return config;
}

function unquote(token: string): string {
  return token.startsWith('"') ? token.slice(1, -1).replace(/\\(["\\])/g, "$1") : token;
}

/** argparse's `dest` of a flag: the table's, else its first long name, dashes as underscores. */
function dest(spec: FlagSpec): string {
  return spec.dest ?? spec.names[0].replace(/^-+/, "").replaceAll("-", "_");
}

/** The Python class of a flag's argparse action. */
function actionOf(spec: FlagSpec): string {
  if (spec.action !== undefined) return spec.action;
  if (spec.kind === "store_true") return "_StoreTrueAction";
  return spec.kind === "bool_optional" ? "BooleanOptionalAction" : "_StoreAction"; // nargs="+" too
}

/** The actions SGLang's config merge handles; it refuses a key of any other. */
const MERGED_ACTIONS: ReadonlySet<string> = new Set(["_StoreAction", "_StoreTrueAction"]);

/**
 * The file's values as arguments, in its order, as SGLang's
 * `_convert_config_to_args` writes them: `--KEY value` with KEY as written;
 * `true` for a store_true flag is the bare flag and `false` nothing, other
 * booleans `--KEY true|false`; a flag of another action is a ValueError.
 */
function configArgs(config: Map<string, ConfigValue>, specs: readonly FlagSpec[]): string[] {
  const args: string[] = [];
  for (const [key, value] of config) {
    const norm = key.replaceAll("-", "_");
    const spec = specs.find((s) => dest(s) === norm);
    const action = spec === undefined ? null : actionOf(spec);
    if (action !== null && !MERGED_ACTIONS.has(action) && !spec!.names.includes("--config")) {
      throw new ConfigError(`Unsupported config option '${norm}' with action '${action}'`);
    }
    if (typeof value === "boolean" && action === "_StoreTrueAction") {
      if (value) args.push(`--${key}`);
    } else {
      args.push(`--${key}`, String(value));
    }
  }
  return args;
}
