/**
 * What a `llmgw dev` directory keeps between starts, and with which modes:
 * the control plane's directory (0700), its SQLite store (0600: it holds
 * token and API-key hashes and every deployment), the admin token (0600,
 * kept across restarts so shells and dashboard sessions signed in with it
 * keep working), `dev.env` (0600, it holds that token) and the `--port` the
 * cluster was made with (its agents are registered at that URL).
 *
 * @module
 */
import { join } from "node:path";
import { newToken } from "../http/tokens.ts";
import { readSecretFile, writeSecretFile } from "../http/secret_file.ts";

/** The paths of a dev directory's state. */
export interface DevStatePaths {
  /** The control plane's state: store, CA, admin token. */
  control: string;
  /** The SQLite store. */
  store: string;
  /** The admin token, one line. */
  adminToken: string;
  /** The environment file for the CLI and scripts. */
  env: string;
  /** The `--port` the directory's cluster was made with. */
  port: string;
}

/** Where dev keeps its state under `dir`. */
export function devStatePaths(dir: string): DevStatePaths {
  const control = join(dir, "control");
  return {
    control,
    store: join(control, "llmgw.db"),
    adminToken: join(control, "admin.token"),
    env: join(dir, "dev.env"),
    port: join(dir, "dev.port"),
  };
}

/**
 * Creates the control directory (0700) and the store file (0600) before
 * SQLite opens it: SQLite creates a new database, and its `-wal` and `-shm`
 * files, with the mode of the file it opens, which is 0644 under the usual
 * umask. Files left 0644 by an older dev are narrowed too.
 */
export function prepareDevState(paths: DevStatePaths): void {
  Deno.mkdirSync(paths.control, { recursive: true, mode: 0o700 });
  Deno.chmodSync(paths.control, 0o700);
  Deno.openSync(paths.store, { create: true, append: true, mode: 0o600 }).close();
  for (const file of [paths.store, `${paths.store}-wal`, `${paths.store}-shm`]) {
    try {
      Deno.chmodSync(file, 0o600);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
}

/**
 * The admin token of this directory: the one kept from an earlier start, or
 * a new one written 0600. `kept` says which, for the banner.
 */
export function loadOrCreateDevAdminToken(paths: DevStatePaths): { token: string; kept: boolean } {
  const existing = readSecretFile(paths.adminToken);
  if (existing !== null && /^llmgw_admin_\S+$/.test(existing)) {
    return { token: existing, kept: true };
  }
  const token = newToken("llmgw_admin");
  writeSecretFile(paths.adminToken, token + "\n");
  return { token, kept: false };
}

/** What `dev.env` says. */
export interface DevEnvFile {
  /** The control plane's URL. */
  url: string;
  /** The admin token. */
  token: string;
  /** The gateway's URL. */
  gatewayUrl: string;
  /** The cluster CA certificate's path. */
  caPath: string;
}

/** Writes `dev.env` (0600, atomically: a shell sourcing it never sees half). */
export function writeDevEnv(paths: DevStatePaths, env: DevEnvFile): void {
  writeSecretFile(
    paths.env,
    `LLMGW_URL=${env.url}\nLLMGW_TOKEN=${env.token}\n` +
      `LLMGW_GATEWAY_URL=${env.gatewayUrl}\nLLMGW_CA=${env.caPath}\n`,
  );
}

/**
 * A `--port` other than the one a directory's cluster was made with: its
 * agents hold node credentials for the control plane at the first port's URL,
 * so under another one they could not register again (`node_taken`) and every
 * node went lost.
 */
export class DevPortError extends Error {
  /** Creates the error: `recorded` is the directory's port, `asked` the flag's. */
  constructor(readonly recorded: number, readonly asked: number) {
    super(
      `this directory's cluster runs on --port ${recorded}, not ${asked}: its nodes are registered ` +
        `with the control plane at https://127.0.0.1:${recorded}; start it with --port ${recorded} ` +
        `(or without --port), or give --port ${asked} another --dir`,
    );
    this.name = "DevPortError";
  }
}

/** The `--port` a directory's cluster was made with, or null (a new or older directory). */
export function readDevPort(paths: DevStatePaths, min = 1, max = 65535): number | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(paths.port).trim();
  } catch {
    return null;
  }
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  return port >= min && port <= max ? port : null;
}

/** Records the `--port` of a directory's cluster. */
export function writeDevPort(paths: DevStatePaths, port: number): void {
  Deno.writeTextFileSync(paths.port, `${port}\n`);
}

/**
 * The port a dev runs on: the one asked for, else the directory's, else
 * `fallback`.
 *
 * @throws {DevPortError} When both are known and differ.
 */
export function chooseDevPort(asked: number | null, recorded: number | null, fallback: number) {
  if (asked !== null && recorded !== null && asked !== recorded) {
    throw new DevPortError(recorded, asked);
  }
  return asked ?? recorded ?? fallback;
}
