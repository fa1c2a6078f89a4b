/**
 * What systemd would run for an installed llmgw unit, for the multi-host
 * rehearsal (issue #14), which runs units as plain processes in a lab host
 * whose files live under a root directory of its own: the unit's
 * `ExecStart` split into argv, its `Environment=`, `EnvironmentFile=`,
 * `StateDirectory=`, `CacheDirectory=` and `WorkingDirectory=`, with every
 * absolute path the unit names moved under that root, and nothing else
 * changed.
 *
 * Only what llmgw's units use is understood; anything else that changes what
 * runs (`$VAR` expansion, `%` specifiers, `ExecStart` prefixes, several
 * `ExecStart` lines) is refused by name rather than run differently.
 *
 * @module
 */

/** Thrown for a unit or environment file the rehearsal cannot run as systemd would. */
export class UnitFileError extends Error {
  override name = "UnitFileError";
}

/** A unit file's settings: `Section.Key` → the values in order. */
export type UnitSettings = Map<string, string[]>;

/** Parses unit file text; comments (`#`, `;`) and blank lines are dropped. */
export function parseUnit(text: string, where: string): UnitSettings {
  const settings: UnitSettings = new Map();
  let section = "";
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    if (line.endsWith("\\")) {
      throw new UnitFileError(`Cannot read ${where}:${i + 1}: continued lines are not supported`);
    }
    const header = /^\[([A-Za-z]+)\]$/.exec(line);
    if (header !== null) {
      section = header[1];
      continue;
    }
    const eq = line.indexOf("=");
    if (eq <= 0 || section === "") {
      throw new UnitFileError(
        `Cannot read ${where}:${i + 1}: expected "Key=value" inside a [Section], got ${
          JSON.stringify(line)
        }`,
      );
    }
    const key = `${section}.${line.slice(0, eq).trim()}`;
    settings.set(key, [...(settings.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return settings;
}

/**
 * Splits a command line or an `Environment=` value into words as systemd
 * does for what llmgw's units contain: whitespace separates words, double or
 * single quotes group them, a backslash escapes the next character.
 *
 * @throws {UnitFileError} For an unterminated quote, or `$`/`%`, which
 * systemd would expand and this runner does not.
 */
export function splitWords(text: string, where: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === null && (c === "$" || c === "%")) {
      throw new UnitFileError(
        `Cannot run ${where}: "${c}" expansion is not supported by the rehearsal's unit runner`,
      );
    }
    if (c === "\\") {
      if (i + 1 >= text.length) throw new UnitFileError(`Cannot run ${where}: a trailing "\\"`);
      word = (word ?? "") + text[++i];
    } else if (quote !== null) {
      if (c === quote) quote = null;
      else word = (word ?? "") + c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word ??= "";
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote !== null) throw new UnitFileError(`Cannot run ${where}: an unterminated ${quote}`);
  if (word !== null) words.push(word);
  return words;
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses an `EnvironmentFile=`: `KEY=VALUE` lines, `#` and `;` comments,
 * blank lines; a value wholly in double or single quotes loses them.
 *
 * @throws {UnitFileError} Naming the file and line of anything else.
 */
export function parseEnvironmentFile(text: string, where: string): Record<string, string> {
  const env: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const eq = line.indexOf("=");
    const key = eq < 0 ? line : line.slice(0, eq).trim();
    if (eq < 0 || !ENV_KEY.test(key)) {
      throw new UnitFileError(
        `Cannot read ${where}:${i + 1}: expected KEY=VALUE, got ${JSON.stringify(line)}`,
      );
    }
    let value = line.slice(eq + 1).trim();
    const q = value[0];
    if (value.length >= 2 && (q === '"' || q === "'") && value.endsWith(q)) {
      value = value.slice(1, -1);
    }
    env[key] = value;
  }
  return env;
}

/** What systemd would run for a service unit, its paths under a host's root. */
export interface ServiceSpec {
  /** The unit, for messages. */
  unit: string;
  /** `ExecStart`, split, absolute paths rooted. */
  argv: string[];
  /** `Environment=` assignments, absolute-path values rooted. */
  environment: Record<string, string>;
  /** `EnvironmentFile=` paths, rooted; `optional` for a `-` prefix. */
  environmentFiles: { path: string; optional: boolean }[];
  /** `StateDirectory=` as absolute paths under the root's /var/lib. */
  stateDirectories: string[];
  /** `StateDirectoryMode=` (default 0755). */
  stateDirectoryMode: number;
  /** `CacheDirectory=` as absolute paths under the root's /var/cache. */
  cacheDirectories: string[];
  /** `WorkingDirectory=`, rooted; "/" under the root when unset, as for system services. */
  workingDirectory: string;
  /** `User=`, or null (root). The rehearsal runs as root and says so. */
  user: string | null;
  /** `KillMode=` (default control-group). */
  killMode: string;
}

/** `root` + `path` for an absolute `path`; anything else as it is. */
export function rooted(root: string, path: string): string {
  return path.startsWith("/") ? `${root.replace(/\/+$/, "")}${path}` : path;
}

function only(settings: UnitSettings, key: string, where: string): string | undefined {
  const values = settings.get(key);
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw new UnitFileError(`Cannot run ${where}: ${key} is set ${values.length} times`);
  }
  return values[0];
}

function directories(settings: UnitSettings, key: string, base: string, where: string) {
  return (settings.get(key) ?? []).flatMap((v) => splitWords(v, `${where} ${key}`)).map((d) => {
    if (d.startsWith("/") || d.split("/").includes("..")) {
      throw new UnitFileError(`Cannot run ${where}: ${key}=${d} must be a relative path`);
    }
    return `${base}/${d}`;
  });
}

/**
 * The service `unitText` describes, as systemd would run it on a host whose
 * `/` is `root`: every absolute path in `ExecStart`, `Environment=` values,
 * `EnvironmentFile=` and `WorkingDirectory=` is moved under `root`.
 *
 * @throws {UnitFileError} For what the rehearsal cannot run as systemd would.
 */
export function serviceSpec(unitText: string, unit: string, root: string): ServiceSpec {
  const settings = parseUnit(unitText, unit);
  const type = only(settings, "Service.Type", unit) ?? "simple";
  if (type !== "exec" && type !== "simple") {
    throw new UnitFileError(`Cannot run ${unit}: Type=${type} is not supported (exec or simple)`);
  }
  const exec = settings.get("Service.ExecStart") ?? [];
  if (exec.length !== 1) {
    throw new UnitFileError(`Cannot run ${unit}: it needs one ExecStart line, has ${exec.length}`);
  }
  if (/^[@\-:+!]/.test(exec[0])) {
    throw new UnitFileError(
      `Cannot run ${unit}: ExecStart prefix "${exec[0][0]}" is not supported`,
    );
  }
  const argv = splitWords(exec[0], `${unit} ExecStart`).map((a) => rooted(root, a));
  if (argv.length === 0 || !argv[0].startsWith("/")) {
    throw new UnitFileError(`Cannot run ${unit}: ExecStart must start with an absolute path`);
  }
  const environment: Record<string, string> = {};
  for (const line of settings.get("Service.Environment") ?? []) {
    for (const word of splitWords(line, `${unit} Environment`)) {
      const eq = word.indexOf("=");
      const key = word.slice(0, eq);
      if (eq <= 0 || !ENV_KEY.test(key)) {
        throw new UnitFileError(`Cannot run ${unit}: Environment "${word}" is not KEY=VALUE`);
      }
      environment[key] = rooted(root, word.slice(eq + 1));
    }
  }
  const environmentFiles = (settings.get("Service.EnvironmentFile") ?? []).map((v) => {
    const optional = v.startsWith("-");
    return { path: rooted(root, optional ? v.slice(1) : v), optional };
  });
  const modeText = only(settings, "Service.StateDirectoryMode", unit) ?? "0755";
  if (!/^[0-7]{3,4}$/.test(modeText)) {
    throw new UnitFileError(`Cannot run ${unit}: StateDirectoryMode=${modeText} is not octal`);
  }
  const workingDirectory = only(settings, "Service.WorkingDirectory", unit) ?? "/";
  if (!workingDirectory.startsWith("/")) {
    throw new UnitFileError(
      `Cannot run ${unit}: WorkingDirectory=${workingDirectory} must be absolute`,
    );
  }
  return {
    unit,
    argv,
    environment,
    environmentFiles,
    stateDirectories: directories(
      settings,
      "Service.StateDirectory",
      rooted(root, "/var/lib"),
      unit,
    ),
    stateDirectoryMode: parseInt(modeText, 8),
    cacheDirectories: directories(
      settings,
      "Service.CacheDirectory",
      rooted(root, "/var/cache"),
      unit,
    ),
    workingDirectory: rooted(root, workingDirectory),
    user: only(settings, "Service.User", unit) ?? null,
    killMode: only(settings, "Service.KillMode", unit) ?? "control-group",
  };
}

/** systemd's PATH for system services. */
export const SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * The environment systemd would give the service: its PATH, the
 * `Environment=` assignments, then each environment file's (later wins, as
 * in systemd), and `STATE_DIRECTORY`/`CACHE_DIRECTORY` for the directories
 * it creates. `files` maps each environment file's path to its text; a
 * missing one that is not optional is an error.
 */
export function serviceEnvironment(
  spec: ServiceSpec,
  files: ReadonlyMap<string, string>,
): Record<string, string> {
  const env: Record<string, string> = { PATH: SYSTEMD_PATH, ...spec.environment };
  for (const f of spec.environmentFiles) {
    const text = files.get(f.path);
    if (text === undefined) {
      if (f.optional) continue;
      throw new UnitFileError(`Cannot run ${spec.unit}: EnvironmentFile ${f.path} is missing`);
    }
    Object.assign(env, parseEnvironmentFile(text, f.path));
  }
  if (spec.stateDirectories.length > 0) env.STATE_DIRECTORY = spec.stateDirectories.join(":");
  if (spec.cacheDirectories.length > 0) env.CACHE_DIRECTORY = spec.cacheDirectories.join(":");
  return env;
}
