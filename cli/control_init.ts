/**
 * `llmgw control init` (design §11.2): prepares a control plane's state
 * directory before its service first starts: the store, the cluster CA, the
 * first admin token (in a file readable by its owner only) and, when asked,
 * a config file for `control serve --config`. Running it again changes
 * nothing that exists: the CA, a live admin token and a config file are kept.
 *
 * @module
 */
import { dirname, join, resolve } from "node:path";
import { ControlPlane } from "../control/control_plane.ts";
import { loadClusterTls } from "../control/cluster_tls.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { StoreError } from "../control/store/store.ts";
import { TlsMaterialError } from "../tls/authority.ts";
import { writeSecretFile } from "../http/secret_file.ts";
import { parseFlags, parseListen, UsageError } from "./usage_error.ts";

/** Usage of the command. */
export const CONTROL_INIT_USAGE = `Usage: llmgw control init --store DIR [options]

Prepares a control plane's state directory: the store, the cluster CA
(DIR/tls/ca.crt, ca.key), the first admin token (DIR/admin.token, 0600) and,
with --config-out, a config file for "llmgw control serve --config FILE".
Run again, it keeps what exists.

Options:
  --store DIR          the state directory (created 0700)
  --listen HOST:PORT   written to the config file (default 0.0.0.0:7070)
  --tls-san NAME       a DNS name or IP agents, gateways and the CLI use to
                       reach the control plane (repeatable; config file)
  --config-out FILE    write the config file here unless it exists
`;

/** Runs `llmgw control init`; returns the exit code. */
export async function controlInitCommand(
  args: string[],
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const { values, positionals } = parseFlags("control init", args, {
    store: { type: "string" },
    listen: { type: "string" },
    "tls-san": { type: "string", multiple: true },
    "config-out": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(CONTROL_INIT_USAGE);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(`control init: unexpected argument "${positionals[0]}"`);
  }
  const dir = values.store;
  if (dir === undefined || dir === "" || dir === ":memory:") {
    throw new UsageError("control init: --store DIR is required (a directory, not :memory:)");
  }
  if (/^postgres(ql)?:\/\//i.test(dir)) {
    throw new UsageError(
      "control init: prepares a directory store; with a postgres:// store, start the first " +
        "control plane with control serve (LLMGW_STORE_URL, --state-dir) as docs/ha.md shows",
    );
  }
  const listen = values.listen ?? "0.0.0.0:7070";
  parseListen(listen);
  const sans = values["tls-san"] ?? [];
  try {
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const { tls, created, certPath } = await loadClusterTls(dir, sans);
    out(
      `${created ? "created" : "kept"} the cluster CA ${certPath}; key hash sha256:${tls.caHash}\n`,
    );
    const store = SqliteStore.open(join(dir, "llmgw.db"));
    try {
      const cp = await ControlPlane.open({ store, reconcileMs: 60_000 });
      const tokenPath = join(dir, "admin.token");
      if (cp.tokens.hasLive("admin")) {
        out(`kept the admin token(s) in the store (${tokenPath} if the first is still there)\n`);
      } else {
        const t = await cp.tokens.create({ kind: "admin", description: "created by control init" });
        writeSecretFile(tokenPath, t.token + "\n");
        out(`first admin token written to ${tokenPath} (readable by its owner only)\n`);
      }
    } finally {
      store.close();
    }
  } catch (e) {
    if (e instanceof StoreError || e instanceof TlsMaterialError) {
      err(`llmgw: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  const configOut = values["config-out"];
  if (configOut !== undefined) {
    let exists = false;
    try {
      Deno.statSync(configOut);
      exists = true;
    } catch {
      // Not there: written below.
    }
    if (exists) out(`kept the existing config ${configOut}\n`);
    else {
      Deno.mkdirSync(dirname(configOut), { recursive: true });
      const config = { listen, store: resolve(dir), gateway_listen: "off", tls_san: sans };
      Deno.writeTextFileSync(configOut, JSON.stringify(config, null, 2) + "\n");
      out(`wrote ${configOut}\n`);
    }
  }
  return 0;
}
