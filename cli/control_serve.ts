/**
 * `llmgw control serve` (design §3, §11): the control plane and, by default,
 * the OpenAI-compatible gateway embedded beside it (design §12). Composing the
 * two roles is the command's job; each is started by its own role's function
 * ({@link startControl}, {@link startFollowingGateway}).
 *
 * @module
 */
import { join } from "node:path";
import { MemoryStore } from "../control/memory_store.ts";
import { type RunningControl, startControl, type StartControlOptions } from "../control/server.ts";
import { SqliteStore } from "../control/sqlite_store.ts";
import { type ControlStore, StoreError } from "../control/store.ts";
import { newToken } from "../control/tokens.ts";
import { EngineRegistry, pluginDirsFromEnv } from "../engines/registry.ts";
import { startFollowingGateway } from "../gateway/server.ts";
import { assertBindable, BindError } from "../http/bind_error.ts";
import { writeSecretFile } from "../http/secret_file.ts";
import { openNotice } from "./gateway_serve.ts";
import { parseFlags, parseListen, UsageError } from "./usage_error.ts";

/**
 * Creates the first admin token and writes it to `dir/admin.token` (0600;
 * a fresh temporary directory for a store in memory); returns the path.
 * The token itself is never printed: terminals and logs keep what they see.
 */
export async function writeFirstAdminToken(
  running: RunningControl,
  dir: string | null,
): Promise<string> {
  const created = await running.cp.tokens.create({
    kind: "admin",
    description: "first admin token, written at the first start",
  });
  const path = join(dir ?? await Deno.makeTempDir({ prefix: "llmgw-control-" }), "admin.token");
  writeSecretFile(path, created.token + "\n");
  return path;
}

/** Usage of the command. */
export const CONTROL_USAGE = `Usage: llmgw control serve [options]

Runs the control plane: inventory, deployments, placement, reconciler, API.

Options:
  --listen HOST:PORT       where the API listens (default 127.0.0.1:7070)
  --store DIR              state directory (SQLite, WAL); ":memory:" for none
                           (default ./llmgw-state)
  --heartbeat-interval S   agents heartbeat every S seconds (default 5)
  --unreachable-after S    a node is unreachable after S seconds of silence (default 15)
  --lost-after S           … and lost after S seconds (default 60)
  --engine-plugins DIR     engine plugin directory (repeatable; also LLMGW_ENGINE_PLUGINS)
  --gateway-listen HOST:PORT  the embedded OpenAI-compatible gateway (default
                           127.0.0.1:8080; "off" to run none). While no API
                           key exists (llmgw apikeys create) it serves
                           loopback clients only.

Tokens: on the first start the control plane creates an admin token and
writes it to STORE/admin.token (readable by its owner only), printing the
path, never the token. Create the others with llmgw tokens create
gateway|metrics|join|admin. Operator-set tokens may also come from the
environment, never from flags (flags show in ps):
  LLMGW_ADMIN_TOKEN   admin token(s), comma-separated
  LLMGW_JOIN_TOKEN    join token(s) for agents, comma-separated
`;

/** How often the embedded gateway polls the control plane beside it, in ms. */
const EMBEDDED_GATEWAY_POLL_MS = 1_000;

function seconds(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const s = Number(value);
  if (!Number.isFinite(s) || s <= 0) {
    throw new UsageError(`${flag} must be a positive number of seconds, got "${value}"`);
  }
  return Math.round(s * 1000);
}

/**
 * Runs `llmgw control serve` until SIGINT/SIGTERM; returns the exit code
 * (1 when the store cannot be opened or a listener cannot bind: one line
 * naming the address, the port and, from /proc, its holder).
 *
 * @throws {UsageError} Naming the flag that is wrong (exit code 2), before anything starts.
 */
export async function controlServeCommand(
  args: string[],
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const { values, positionals } = parseFlags("control serve", args, {
    listen: { type: "string" },
    store: { type: "string" },
    "heartbeat-interval": { type: "string" },
    "unreachable-after": { type: "string" },
    "lost-after": { type: "string" },
    "engine-plugins": { type: "string", multiple: true },
    "gateway-listen": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(CONTROL_USAGE);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(`control serve: unexpected argument "${positionals[0]}"`);
  }
  // Every flag is checked before anything is opened, printed or listened on.
  const listen = parseListen(values.listen ?? "127.0.0.1:7070");
  const thresholds = {
    heartbeat_interval_ms: seconds(values["heartbeat-interval"], "--heartbeat-interval"),
    unreachable_after_ms: seconds(values["unreachable-after"], "--unreachable-after"),
    lost_after_ms: seconds(values["lost-after"], "--lost-after"),
  };
  const gatewayFlag = values["gateway-listen"] ?? "127.0.0.1:8080";
  const gatewayListen = gatewayFlag === "off" ? null : parseListen(gatewayFlag, "--gateway-listen");
  try {
    return await serve(
      {
        listen,
        gatewayListen,
        thresholds,
        dir: values.store ?? "llmgw-state",
        pluginDirs: values["engine-plugins"] ?? [],
      },
      out,
      err,
    );
  } catch (e) {
    if (!(e instanceof BindError)) throw e;
    err(`llmgw: ${e.message}\n`);
    return 1;
  }
}

/** What the flags asked for, checked. */
interface ServeSettings {
  listen: { hostname: string; port: number };
  gatewayListen: { hostname: string; port: number } | null;
  thresholds: StartControlOptions["thresholds"];
  dir: string;
  pluginDirs: string[];
}

/** @throws {BindError} When a listener cannot bind; whatever had started is stopped. */
async function serve(
  { listen, gatewayListen, thresholds, dir, pluginDirs }: ServeSettings,
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  // Both listeners are checked before the store opens or a token is printed;
  // the binds themselves still report a port taken in between.
  assertBindable("the control API", listen.hostname, listen.port);
  if (gatewayListen !== null) {
    assertBindable("the gateway", gatewayListen.hostname, gatewayListen.port);
  }
  let store: ControlStore;
  try {
    if (dir === ":memory:") store = new MemoryStore();
    else {
      Deno.mkdirSync(dir, { recursive: true });
      store = SqliteStore.open(join(dir, "llmgw.db"));
    }
  } catch (e) {
    if (e instanceof StoreError) {
      err(`llmgw: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  const tokens = (name: string): string[] =>
    Deno.env.get(name)?.split(",").map((t) => t.trim()).filter((t) => t !== "") ?? [];
  const registry = await EngineRegistry.load([...pluginDirsFromEnv(), ...pluginDirs]);
  for (const p of registry.problems) err(`llmgw: warning: ${p}\n`);
  const adminTokens = tokens("LLMGW_ADMIN_TOKEN");
  // The embedded gateway's token lives in this process only: nothing to store or leak.
  const gatewayToken = newToken("llmgw_gateway");
  const running = await startControl({
    ...listen,
    store,
    adminTokens,
    joinTokens: tokens("LLMGW_JOIN_TOKEN"),
    gatewayTokens: [gatewayToken],
    engines: registry,
    thresholds,
  });
  out(`llmgw control plane listening on ${running.url} (store: ${dir})\n`);
  if (adminTokens.length === 0 && !running.cp.tokens.hasLive("admin")) {
    const path = await writeFirstAdminToken(running, dir === ":memory:" ? null : dir);
    out(`first admin token written to ${path} (readable by its owner only)\n`);
  }
  // The gateway runs inside the control plane by default (design §12),
  // following its ready endpoints over the same API a separate gateway uses.
  let gateway;
  try {
    gateway = gatewayListen === null ? null : startFollowingGateway({
      ...gatewayListen,
      controlUrl: running.url,
      token: gatewayToken,
      intervalMs: EMBEDDED_GATEWAY_POLL_MS,
    });
  } catch (e) {
    await running.close();
    throw e;
  }
  if (gateway !== null) {
    out(`llmgw gateway (OpenAI-compatible) listening on ${gateway.url}/v1\n${openNotice(false)}`);
  }
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    Deno.addSignalListener("SIGINT", stop);
    Deno.addSignalListener("SIGTERM", stop);
  });
  await gateway?.close();
  await running.close();
  return 0;
}
