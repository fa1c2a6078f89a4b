/**
 * `llmgw control serve`: the control plane (plan §3, §11).
 *
 * @module
 */
import { join } from "node:path";
import { parseFlags, parseListen, UsageError } from "../cli/usage_error.ts";
import { EngineRegistry, pluginDirsFromEnv } from "../engines/registry.ts";
import { createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import { MemoryStore } from "./memory_store.ts";
import { SqliteStore } from "./sqlite_store.ts";
import { type ControlStore, StoreError } from "./store.ts";
import { hashToken, newToken } from "./tokens.ts";
import { ApiKeyTable } from "../gateway/api_keys.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { followControlPlane } from "../gateway/follow.ts";
import { openNotice, startGateway } from "../gateway/serve_command.ts";

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

Tokens come from the environment, never from flags (flags show in ps):
  LLMGW_ADMIN_TOKEN   admin token(s), comma-separated
  LLMGW_JOIN_TOKEN    join token(s) for agents, comma-separated
A missing token is generated and printed once at start.
`;

/** A running control plane, for tests and `llmgw dev`. */
export interface RunningControl {
  /** The API's base URL. */
  url: string;
  /** The control plane. */
  cp: ControlPlane;
  /** Stops the server, the loop and the store. */
  close(): Promise<void>;
}

/** Settings of {@link startControl}. */
export interface StartControlOptions {
  /** Host to listen on. */
  hostname: string;
  /** Port (0: any free one). */
  port: number;
  /** The store. */
  store: ControlStore;
  /** Admin tokens. */
  adminTokens: string[];
  /** Join tokens. */
  joinTokens: string[];
  /** Liveness thresholds in ms. */
  thresholds?: {
    heartbeat_interval_ms?: number;
    unreachable_after_ms?: number;
    lost_after_ms?: number;
  };
  /** Engine names deployments may use. */
  knownEngines?: ReadonlySet<string>;
  /** Reconcile period in ms. */
  reconcileMs?: number;
}

/** Starts a control plane and its API. */
export async function startControl(o: StartControlOptions): Promise<RunningControl> {
  const thresholds = Object.fromEntries(
    Object.entries(o.thresholds ?? {}).filter(([, v]) => v !== undefined),
  );
  const cp = await ControlPlane.open({
    store: o.store,
    thresholds,
    knownEngines: o.knownEngines,
    reconcileMs: o.reconcileMs,
  });
  const app = createControlApi(cp, {
    adminTokenHashes: await Promise.all(o.adminTokens.map(hashToken)),
    joinTokenHashes: await Promise.all(o.joinTokens.map(hashToken)),
  });
  cp.start();
  const server = Deno.serve({ hostname: o.hostname, port: o.port, onListen: () => {} }, app.fetch);
  const addr = server.addr as Deno.NetAddr;
  return {
    url: `http://${
      addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname
    }:${addr.port}`,
    cp,
    async close() {
      cp.stop();
      await server.shutdown();
      o.store.close();
    },
  };
}

function seconds(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const s = Number(value);
  if (!Number.isFinite(s) || s <= 0) {
    throw new UsageError(`${flag} must be a positive number of seconds, got "${value}"`);
  }
  return Math.round(s * 1000);
}

/** Runs `llmgw control serve` until SIGINT/SIGTERM. */
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
  const listen = parseListen(values.listen ?? "127.0.0.1:7070");
  const dir = values.store ?? "llmgw-state";
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
  const tokens = (name: string, kind: string): string[] => {
    const v = Deno.env.get(name)?.split(",").map((t) => t.trim()).filter((t) => t !== "") ?? [];
    if (v.length > 0) return v;
    const t = newToken(kind);
    out(`${name} was not set; generated one for this run: ${t}\n`);
    return [t];
  };
  const registry = await EngineRegistry.load([
    ...pluginDirsFromEnv(),
    ...(values["engine-plugins"] ?? []),
  ]);
  for (const p of registry.problems) err(`llmgw: warning: ${p}\n`);
  const adminTokens = tokens("LLMGW_ADMIN_TOKEN", "llmgw_admin");
  const running = await startControl({
    ...listen,
    store,
    adminTokens,
    joinTokens: tokens("LLMGW_JOIN_TOKEN", "llmgw_join"),
    knownEngines: registry.names(),
    thresholds: {
      heartbeat_interval_ms: seconds(values["heartbeat-interval"], "--heartbeat-interval"),
      unreachable_after_ms: seconds(values["unreachable-after"], "--unreachable-after"),
      lost_after_ms: seconds(values["lost-after"], "--lost-after"),
    },
  });
  out(`llmgw control plane listening on ${running.url} (store: ${dir})\n`);
  // The gateway runs inside the control plane by default (plan §12), following
  // its ready endpoints over the same API a separate gateway uses.
  const gatewayListen = values["gateway-listen"] ?? "127.0.0.1:8080";
  let gateway: { close(): Promise<void> } | null = null;
  let follower: { stop(): Promise<void> } | null = null;
  if (gatewayListen !== "off") {
    const g = parseListen(gatewayListen, "--gateway-listen");
    const table = new EndpointTable();
    const keys = new ApiKeyTable();
    follower = followControlPlane(running.url, adminTokens[0], table, { intervalMs: 1_000, keys });
    const started = startGateway(table, { ...g, keys });
    gateway = started;
    out(`llmgw gateway (OpenAI-compatible) listening on ${started.url}/v1\n${openNotice(false)}`);
  }
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    Deno.addSignalListener("SIGINT", stop);
    Deno.addSignalListener("SIGTERM", stop);
  });
  await follower?.stop();
  await gateway?.close();
  await running.close();
  return 0;
}
