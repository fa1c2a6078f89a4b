/**
 * `llmgw control serve` (design §3, §11): the control plane and, by default,
 * the OpenAI-compatible gateway embedded beside it (design §12). Composing the
 * two roles is the command's job; each is started by its own role's function
 * ({@link startControl}, {@link startFollowingGateway}).
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { z } from "zod";
import { expandConfig } from "./config_file.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl, type StartControlOptions } from "../control/server.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import { startHaControl } from "../control/ha_control.ts";
import { isPostgresUrl, PostgresStore } from "../control/store/postgres_store.ts";
import { agreeOnCa, assertCaPresentFor, recordedCaHash } from "../control/shared_ca.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";
import { type ControlStore, StoreError } from "../control/store/store.ts";
import { newToken } from "../http/tokens.ts";
import { EngineRegistry, pluginDirsFromEnv } from "../engines/registry.ts";
import { assertBindable, BindError } from "../http/bind_error.ts";
import { writeSecretFile } from "../http/secret_file.ts";
import { caPaths, type ClusterTls, loadClusterTls } from "../control/cluster_tls.ts";
import { TlsMaterialError } from "../tls/authority.ts";
import { startEmbeddedGateway } from "./embedded_gateway.ts";
import { openNotice } from "./gateway_serve.ts";
import { uiApp } from "../ui/mod.ts";
import { createLogger, lineSink } from "../log/log.ts";
import { parseFlags, parseListen, UsageError } from "./usage_error.ts";
import { type ControlHub, controlHub } from "../models/hub_facts.ts";
import { HubConfigError } from "../models/hub_config.ts";
import { stopSignal } from "./stop_signals.ts";

/**
 * Creates the first admin token and writes it to `dir/admin.token` (0600;
 * a fresh temporary directory for a store in memory); returns the path.
 * The token itself is never printed: terminals and logs keep what they see.
 */
export async function writeFirstAdminToken(
  cp: ControlPlane,
  dir: string | null,
): Promise<string> {
  const created = await cp.tokens.create({
    kind: "admin",
    description: "first admin token, written at the first start",
  });
  const path = join(dir ?? await Deno.makeTempDir({ prefix: "llmgw-control-" }), "admin.token");
  writeSecretFile(path, created.token + "\n");
  return path;
}

/** `control serve --config FILE`: the flags' settings, snake_case (cli/config_file.ts). */
export const ControlConfigSchema = z.object({
  listen: z.string(),
  store: z.string(),
  gateway_listen: z.string(),
  tls_san: z.array(z.string()),
  heartbeat_interval: z.number().positive(),
  unreachable_after: z.number().positive(),
  lost_after: z.number().positive(),
  engine_plugins: z.array(z.string()),
  insecure_http: z.boolean(),
  state_dir: z.string(),
  advertise_url: z.string(),
  lease: z.number().positive(),
}).partial().strict();

/** Usage of the command. */
export const CONTROL_USAGE = `Usage: llmgw control serve [options]
       llmgw control init --store DIR [--tls-san NAME]... [--config-out FILE]

Runs the control plane: inventory, deployments, placement, reconciler, API.

Options:
  --listen HOST:PORT       where the API listens (default 127.0.0.1:7070)
  --store DIR|URL          state directory (SQLite, WAL); ":memory:" for none;
                           or postgres://… for several control planes on one
                           database (docs/ha.md); also LLMGW_STORE_URL, which
                           keeps a password out of ps (default ./llmgw-state)
  --state-dir DIR          with a postgres:// store: where the cluster CA
                           (tls/) and the first admin token live
                           (default ./llmgw-state)
  --advertise-url URL      with a postgres:// store: the URL other control
                           planes and clients reach this one at (default:
                           the first --tls-san or the listen address)
  --lease S                with a postgres:// store: the leader's lease; a
                           new leader takes over within about S + 2 seconds
                           of a crash (default 10)
  --heartbeat-interval S   agents heartbeat every S seconds (default 5)
  --unreachable-after S    a node is unreachable after S seconds of silence (default 15)
  --lost-after S           … and lost after S seconds (default 60)
  --engine-plugins DIR     engine plugin directory (repeatable; also LLMGW_ENGINE_PLUGINS)
  --hub-token-file FILE    the hub token (mode 0600 or stricter), for gated models;
                           else HF_TOKEN. The hub is HF_ENDPOINT (default
                           https://huggingface.co): model revisions resolve to
                           commits there at apply, and models' facts are read
  --tls-san NAME           a DNS name or IP clients reach the control plane by,
                           written into its certificate (repeatable; localhost,
                           127.0.0.1 and the listen address are always in it)
  --insecure-http          serve plain HTTP instead of TLS: for a lab only; every
                           token then crosses the network in clear (logged at
                           every start)
  --config FILE            settings as JSON, the flags' names in snake_case
                           (listen, store, gateway_listen, tls_san, …); flags win
  --gateway-listen HOST:PORT  the embedded OpenAI-compatible gateway (default
                           127.0.0.1:8080; "off" to run none). While no API
                           key exists (llmgw apikeys create) it serves
                           loopback clients only.

Tokens: on the first start the control plane creates an admin token and
writes it to STORE/admin.token (with a postgres:// store: to the state
directory of the first instance to lead; readable by its owner only), printing the
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
  argv: string[],
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const args = expandConfig("control serve", argv, ControlConfigSchema, [
    "store",
    "state_dir",
    "engine_plugins",
  ]);
  const { values, positionals } = parseFlags("control serve", args, {
    listen: { type: "string" },
    store: { type: "string" },
    "state-dir": { type: "string" },
    "advertise-url": { type: "string" },
    lease: { type: "string" },
    "heartbeat-interval": { type: "string" },
    "unreachable-after": { type: "string" },
    "lost-after": { type: "string" },
    "engine-plugins": { type: "string", multiple: true },
    "hub-token-file": { type: "string" },
    "gateway-listen": { type: "string" },
    "tls-san": { type: "string", multiple: true },
    "insecure-http": { type: "boolean" },
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
  // The command line first, then LLMGW_STORE_URL, then the config file's "store".
  const store = (argvHasFlag(argv, "--store") ? values.store : undefined) ??
    (Deno.env.get("LLMGW_STORE_URL") || undefined) ?? values.store ?? "llmgw-state";
  const shared = isPostgresUrl(store);
  if (!shared) {
    for (const f of ["state-dir", "advertise-url", "lease"] as const) {
      if (values[f] !== undefined) {
        throw new UsageError(
          `control serve: --${f} is for a postgres:// store; a directory store keeps ` +
            `everything in its directory and runs alone`,
        );
      }
    }
  }
  const tlsSans = values["insecure-http"] ? null : [listen.hostname, ...(values["tls-san"] ?? [])];
  const advertiseUrl = shared ? advertiseUrlOf(values["advertise-url"], listen, tlsSans) : null;
  if (argvHasStorePassword(argv)) {
    err(
      "llmgw: warning: the --store URL holds a password, which every user sees in ps; " +
        "set LLMGW_STORE_URL (or PGPASSWORD, or ~/.pgpass) instead\n",
    );
  }
  const gatewayFlag = values["gateway-listen"] ?? "127.0.0.1:8080";
  const gatewayListen = gatewayFlag === "off" ? null : parseListen(gatewayFlag, "--gateway-listen");
  try {
    return await serve(
      {
        listen,
        gatewayListen,
        thresholds,
        store,
        dir: shared ? values["state-dir"] ?? "llmgw-state" : store,
        pluginDirs: values["engine-plugins"] ?? [],
        hubTokenFile: values["hub-token-file"],
        tlsSans,
        advertiseUrl,
        leaseMs: seconds(values.lease, "--lease"),
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
  /** A directory, ":memory:" or a postgres:// URL. */
  store: string;
  /** The state directory: the store's own, or --state-dir beside a postgres:// store. */
  dir: string;
  /** With a postgres:// store: the URL others reach this instance at. */
  advertiseUrl: string | null;
  /** With a postgres:// store: the lease (ms), or the default. */
  leaseMs: number | undefined;
  pluginDirs: string[];
  /** `--hub-token-file`: the hub token's file, read instead of HF_TOKEN. */
  hubTokenFile: string | undefined;
  /** Names for the control plane's certificate; null: plain HTTP (`--insecure-http`). */
  tlsSans: string[] | null;
}

/** @throws {BindError} When a listener cannot bind; whatever had started is stopped. */
async function serve(
  settings: ServeSettings,
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const { listen, gatewayListen, thresholds, dir, pluginDirs, tlsSans } = settings;
  // Both listeners are checked before the store opens or a token is printed;
  // the binds themselves still report a port taken in between.
  assertBindable("the control API", listen.hostname, listen.port);
  if (gatewayListen !== null) {
    assertBindable("the gateway", gatewayListen.hostname, gatewayListen.port);
  }
  const shared = isPostgresUrl(settings.store);
  // The running service's notes are JSON lines (log/log.ts); start-up messages stay plain text.
  const log = createLogger("control", (line) => err(`${line}\n`));
  let store: ControlStore;
  try {
    if (shared) {
      store = await PostgresStore.open(settings.store, { log: lineSink(log, "warn") });
    } else if (dir === ":memory:") store = new MemoryStore();
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
  const storeName = store instanceof PostgresStore ? store.name : dir;
  const tokens = (name: string): string[] =>
    Deno.env.get(name)?.split(",").map((t) => t.trim()).filter((t) => t !== "") ?? [];
  const registry = await EngineRegistry.load([...pluginDirsFromEnv(), ...pluginDirs]);
  for (const p of registry.problems) err(`llmgw: warning: ${p}\n`);
  // The hub the environment names: model revisions resolve to commits there, and models' facts
  // (memory, heads) come from it and from local paths.
  let hub: ControlHub;
  try {
    hub = await controlHub((name) => Deno.env.get(name), settings.hubTokenFile);
  } catch (e) {
    if (!(e instanceof HubConfigError)) throw e;
    await store.close();
    err(`llmgw: ${e.message}\n`);
    return 1;
  }
  let tls: ClusterTls | undefined;
  if (tlsSans === null) {
    err(
      "llmgw: WARNING: --insecure-http: the control plane serves plain HTTP; admin, join " +
        "and node tokens cross the network in clear. Use this in a lab only.\n",
    );
  } else {
    try {
      if (store instanceof PostgresStore) {
        Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
        assertCaPresentFor(dir, await recordedCaHash(store));
      }
      const loaded = await loadClusterTls(
        dir === ":memory:" ? null : dir,
        settings.advertiseUrl === null ? tlsSans : [
          ...tlsSans,
          new URL(settings.advertiseUrl).hostname.replace(/^\[|\]$/g, ""),
        ],
      );
      const { created, certPath } = loaded;
      tls = loaded.tls;
      if (store instanceof PostgresStore) await agreeOnCa(store, tls.caHash, dir);
      out(
        `${created ? "created the cluster CA" : "cluster CA"}${
          certPath === null ? " (in memory)" : ` ${certPath}`
        }; CA key hash sha256:${tls.caHash}\n`,
      );
    } catch (e) {
      if (!(e instanceof TlsMaterialError) && !(e instanceof StoreError)) throw e;
      await store.close();
      err(`llmgw: ${e.message}\n`);
      return 1;
    }
  }
  const adminTokens = tokens("LLMGW_ADMIN_TOKEN");
  // The embedded gateway's token lives in memory only: nothing to store or leak. On a shared
  // store every instance derives the same one from the CA key they all hold, so the leader
  // accepts the feed requests a follower's embedded gateway sends through it.
  const gatewayToken = shared && tls !== undefined
    ? embeddedGatewayToken(Deno.readTextFileSync(caPaths(dir).key))
    : newToken("llmgw_gateway");
  const common = {
    ...listen,
    adminTokens,
    joinTokens: tokens("LLMGW_JOIN_TOKEN"),
    gatewayTokens: [gatewayToken],
    engines: registry,
    modelFacts: hub.facts,
    commits: hub.commits,
    thresholds,
    tls,
    log: lineSink(log, "info"),
    // The dashboard (ui/), served beside the API.
    pages: uiApp,
  };
  /** The first admin token, once, by whichever instance finds none. */
  const firstAdminToken = async (cp: ControlPlane) => {
    if (adminTokens.length > 0 || cp.tokens.hasLive("admin")) return;
    const path = await writeFirstAdminToken(cp, dir === ":memory:" ? null : dir);
    out(`first admin token written to ${path} (readable by its owner only)\n`);
  };
  let running: { url: string; close(): Promise<void> };
  if (store instanceof PostgresStore) {
    const ha = await startHaControl({
      ...common,
      store,
      advertiseUrl: settings.advertiseUrl ?? undefined,
      leaseMs: settings.leaseMs,
      onLeading: firstAdminToken,
    });
    running = ha;
    out(
      `llmgw control plane listening on ${ha.url} (store: ${storeName}; ` +
        `${ha.leadership().role}, epoch ${ha.leadership().epoch}; advertised as ` +
        `${settings.advertiseUrl ?? ha.url})\n`,
    );
  } else {
    const single = await startControl({ ...common, store });
    running = single;
    out(`llmgw control plane listening on ${single.url} (store: ${storeName})\n`);
    await firstAdminToken(single.cp);
  }
  // The gateway runs inside the control plane by default (design §12).
  let gateway;
  try {
    gateway = gatewayListen === null ? null : await startEmbeddedGateway({
      ...gatewayListen,
      controlUrl: running.url,
      token: gatewayToken,
      intervalMs: EMBEDDED_GATEWAY_POLL_MS,
      tls,
      renewalLog: lineSink(log, "warn"),
    });
  } catch (e) {
    await running.close();
    throw e;
  }
  if (gateway !== null) {
    out(`llmgw gateway (OpenAI-compatible) listening on ${gateway.url}/v1\n${openNotice(false)}`);
  }
  await stopSignal();
  await gateway?.close();
  await running.close();
  return 0;
}

/**
 * The advertised URL of an instance on a shared store: the flag, else the
 * scheme, the first --tls-san (or the listen host) and the port.
 *
 * @throws {UsageError} When it cannot be derived (0.0.0.0 and no name), or does not parse.
 */
function advertiseUrlOf(
  flag: string | undefined,
  listen: { hostname: string; port: number },
  tlsSans: string[] | null,
): string {
  if (flag !== undefined) {
    let u: URL;
    try {
      u = new URL(flag);
    } catch {
      throw new UsageError(`control serve: --advertise-url "${flag}" is not a URL`);
    }
    if (u.protocol !== "https:" && u.protocol !== "http:") {
      throw new UsageError(
        `control serve: --advertise-url must be http(s)://HOST:PORT, got "${flag}"`,
      );
    }
    return u.origin;
  }
  const names = (tlsSans ?? [listen.hostname]).filter((n) => n !== listen.hostname);
  const host = names[0] ?? listen.hostname;
  if (host === "0.0.0.0" || host === "::" || listen.port === 0) {
    throw new UsageError(
      "control serve: --advertise-url is required with a postgres:// store when listening on " +
        "every address or on port 0 (other control planes forward requests to it)",
    );
  }
  const h = host.includes(":") ? `[${host}]` : host;
  return `${tlsSans === null ? "http" : "https"}://${h}:${listen.port}`;
}

/** Whether the command line (not a config file) gives --store a URL with a password. */
function argvHasStorePassword(argv: readonly string[]): boolean {
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i].startsWith("--store=")
      ? argv[i].slice(8)
      : argv[i] === "--store"
      ? argv[i + 1]
      : undefined;
    if (v !== undefined && isPostgresUrl(v)) {
      try {
        if (new URL(v).password !== "") return true;
      } catch {
        // the store open reports it
      }
    }
  }
  return false;
}

/**
 * The embedded gateways' token on a shared store: an HMAC of a fixed label
 * under the cluster CA's key. Whoever can read the CA key can sign any
 * certificate already, so this grants nothing more; nobody else can compute it.
 */
export function embeddedGatewayToken(caKeyPem: string): string {
  const mac = createHmac("sha256", caKeyPem).update("llmgw embedded gateway token v1").digest();
  return `llmgw_gateway_${mac.toString("base64url")}`;
}

/** Whether the command line itself (not a config file) gives `flag`. */
function argvHasFlag(argv: readonly string[], flag: string): boolean {
  return argv.some((a) => a === flag || a.startsWith(`${flag}=`));
}
