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
import { hashToken } from "../http/tokens.ts";
import type { ClusterTls } from "./cluster_tls.ts";
import { issuedCertificate, watchCertificate } from "../tls/certificate_source.ts";
import { type KeyPairPem, notAfter } from "../tls/authority.ts";
import { type HttpsServer, serveHttps } from "../tls/https_server.ts";
import { RenewableFetch } from "../tls/trust.ts";

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
  /** Gateway tokens kept in memory only (the embedded gateway's). */
  gatewayTokens?: string[];
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
  /** Serve HTTPS with certificates from this cluster CA; absent: plain HTTP (`--insecure-http`). */
  tls?: ClusterTls;
  /** Called with one line when the control plane's own certificate is renewed or cannot be. */
  log?: (line: string) => void;
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
  const tls = o.tls;
  // The control plane's own certificate, renewed two thirds into its life.
  const source = tls === undefined
    ? null
    : issuedCertificate("the cluster CA", () => tls.controlCertificate(Date.now()));
  const own = source === null ? null : await source.load() as KeyPairPem;
  // Calls to agents verify them against the CA and present the control plane's certificate.
  const agentFetch = o.tls === undefined || own === null
    ? undefined
    : new RenewableFetch(o.tls.ca.certPem, own);
  const cp = await ControlPlane.open({
    store: o.store,
    thresholds,
    engines: o.engines,
    reconcileMs: o.reconcileMs,
    tls: o.tls,
    fetch: agentFetch?.fetch,
  });
  const app = createControlApi(cp, {
    adminTokenHashes: await Promise.all(o.adminTokens.map(hashToken)),
    joinTokenHashes: await Promise.all(o.joinTokens.map(hashToken)),
    gatewayTokenHashes: await Promise.all((o.gatewayTokens ?? []).map(hashToken)),
    caHash: o.tls?.caHash ?? null,
  });
  let server: { addr: Deno.NetAddr; shutdown(): Promise<void> };
  let https: HttpsServer | null = null;
  try {
    if (own === null) {
      server = Deno.serve({ hostname: o.hostname, port: o.port, onListen: () => {} }, app.fetch);
    } else {
      https = await serveHttps(
        { hostname: o.hostname, port: o.port, ...own },
        (req) => app.fetch(req),
      );
      server = https;
    }
  } catch (e) {
    agentFetch?.close();
    await o.store.close();
    throw bindErrorFrom(e, "the control API", o.hostname, o.port);
  }
  const log = o.log ?? (() => {});
  const stopRenewal = source === null || own === null || https === null || tls === undefined
    ? null
    : watchCertificate(
      source,
      own,
      Math.max(1_000, Math.min(tls.lifetimeMs / 20, 600_000)),
      (c) => {
        https!.setCertificate(c);
        agentFetch?.update(tls.ca.certPem, c as KeyPairPem);
        log(
          `renewed the control plane's certificate; it expires ${
            new Date(notAfter(c.cert)).toISOString()
          }`,
        );
      },
      log,
    );
  // The loop starts only once the API listens: a failed bind leaves nothing running.
  cp.start();
  const addr = server.addr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return {
    url: `${own === null ? "http" : "https"}://${host}:${addr.port}`,
    cp,
    async close() {
      stopRenewal?.();
      await cp.stop();
      await server.shutdown();
      agentFetch?.close();
      await o.store.close();
    },
  };
}
