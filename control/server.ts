/**
 * The control plane served over HTTP (design §3, §11): opens a
 * {@link ControlPlane} on a store, mounts its API and starts its reconciler.
 * Flags, tokens from the environment and the embedded gateway belong to the
 * command (`cli/control_serve.ts`); this takes plain options.
 *
 * @module
 */
import { bindErrorFrom } from "../http/bind_error.ts";
import { createControlApi } from "./api.ts";
import { ControlPlane } from "./control_plane.ts";
import type { EngineCatalog } from "./deployments.ts";
import type { ControlStore } from "./store.ts";
import { hashToken } from "./tokens.ts";

/** A running control plane, for the command, tests and `llmgw dev`. */
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
  /** The store; {@link RunningControl.close} closes it. */
  store: ControlStore;
  /** Admin tokens. */
  adminTokens: string[];
  /** Join tokens. */
  joinTokens: string[];
  /** Liveness thresholds in ms; an undefined one keeps its default. */
  thresholds?: {
    heartbeat_interval_ms?: number;
    unreachable_after_ms?: number;
    lost_after_ms?: number;
  };
  /** The engines deployments may use, and their checks (default: the built-in engines). */
  engines?: EngineCatalog;
  /** Reconcile period in ms. */
  reconcileMs?: number;
}

/**
 * Starts a control plane and its API.
 *
 * @throws {BindError} When the API cannot listen (naming the address, the
 *   port and its holder); the store is closed then and nothing runs.
 */
export async function startControl(o: StartControlOptions): Promise<RunningControl> {
  const thresholds = Object.fromEntries(
    Object.entries(o.thresholds ?? {}).filter(([, v]) => v !== undefined),
  );
  const cp = await ControlPlane.open({
    store: o.store,
    thresholds,
    engines: o.engines,
    reconcileMs: o.reconcileMs,
  });
  const app = createControlApi(cp, {
    adminTokenHashes: await Promise.all(o.adminTokens.map(hashToken)),
    joinTokenHashes: await Promise.all(o.joinTokens.map(hashToken)),
  });
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({ hostname: o.hostname, port: o.port, onListen: () => {} }, app.fetch);
  } catch (e) {
    o.store.close();
    throw bindErrorFrom(e, "the control API", o.hostname, o.port);
  }
  // The loop starts only once the API listens: a failed bind leaves nothing running.
  cp.start();
  const addr = server.addr as Deno.NetAddr;
  return {
    url: `http://${
      addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname
    }:${addr.port}`,
    cp,
    async close() {
      await cp.stop();
      await server.shutdown();
      o.store.close();
    },
  };
}
