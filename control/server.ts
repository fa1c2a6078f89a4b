/**
 * The control plane served over HTTP (design §3, §11): opens a
 * {@link ControlPlane} on a store, mounts its API and starts its reconciler.
 * Flags, tokens from the environment and the embedded gateway belong to the
 * command (`cli/control_serve.ts`); this takes plain options.
 *
 * @module
 */
import { bindErrorFrom } from "../http/bind_error.ts";
import { type ApiAuth, type ControlPages, createControlApi } from "./api.ts";
import type { LivenessThresholds } from "../inventory/node_state.ts";
import { ControlPlane, type ControlPlaneOptions } from "./control_plane.ts";
import type { ModelFactsSource } from "../models/facts_source.ts";
import type { CommitSource } from "../models/commit_source.ts";
import type { EngineCatalog } from "./deployments.ts";
import type { ControlStore } from "./store/store.ts";
import { hashToken } from "../http/tokens.ts";
import type { ClusterTls } from "./cluster_tls.ts";
import { type CertificateSource, watchCertificate } from "../tls/certificate_source.ts";
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
  /** Pages served beside the API (the dashboard: ui/ `uiApp`); absent: the API only. */
  pages?: ControlPages;
  /** Where models' facts come from (models/facts_source.ts); default: local and shared paths. */
  modelFacts?: ModelFactsSource;
  /** Where model revisions resolve to commits (models/commit_source.ts); absent: none resolve. */
  commits?: CommitSource;
}

/** The control plane's own TLS material: its certificate, kept renewed, and its client to agents. */
export interface ControlTlsParts {
  /** Where its certificate comes from. */
  source: CertificateSource;
  /** Its certificate now. */
  own: KeyPairPem;
  /** Calls to agents: verifies them against the CA, presents the control plane's certificate. */
  agentFetch: RenewableFetch;
  /** The cluster TLS. */
  tls: ClusterTls;
}

/** The control plane's certificate and agent client, or null on plain HTTP. */
export async function controlTlsParts(
  tls: ClusterTls | undefined,
): Promise<ControlTlsParts | null> {
  if (tls === undefined) return null;
  // The control plane's own certificate, renewed two thirds into its life.
  const source = tls.controlCertificateSource();
  const own = await source.load() as KeyPairPem;
  return { source, own, agentFetch: new RenewableFetch(tls.ca.certPem, own), tls };
}

/** A listening control API. */
export interface ControlListener {
  /** Its base URL. */
  url: string;
  /** Stops renewing, stops listening and closes the agent client. */
  close(): Promise<void>;
}

/**
 * Serves `handler` on the control API's address: HTTPS with the control
 * plane's certificate (swapped on renewal, no restart) or plain HTTP.
 *
 * @throws {BindError} When the address cannot be bound; nothing is left running.
 */
export async function listenControl(
  o: { hostname: string; port: number; log?: (line: string) => void },
  parts: ControlTlsParts | null,
  handler: (req: Request) => Response | Promise<Response>,
): Promise<ControlListener> {
  let server: { addr: Deno.NetAddr; shutdown(): Promise<void> };
  let https: HttpsServer | null = null;
  try {
    if (parts === null) {
      server = Deno.serve({ hostname: o.hostname, port: o.port, onListen: () => {} }, handler);
    } else {
      https = await serveHttps({ hostname: o.hostname, port: o.port, ...parts.own }, handler);
      server = https;
    }
  } catch (e) {
    parts?.agentFetch.close();
    throw bindErrorFrom(e, "the control API", o.hostname, o.port);
  }
  const log = o.log ?? (() => {});
  const stopRenewal = parts === null || https === null ? null : watchCertificate(
    parts.source,
    parts.own,
    Math.max(1_000, Math.min(parts.tls.lifetimeMs / 20, 600_000)),
    (c) => {
      https!.setCertificate(c);
      parts.agentFetch.update(parts.tls.ca.certPem, c as KeyPairPem);
      log(
        `renewed the control plane's certificate; it expires ${
          new Date(notAfter(c.cert)).toISOString()
        }`,
      );
    },
    log,
  );
  const addr = server.addr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return {
    url: `${parts === null ? "http" : "https"}://${host}:${addr.port}`,
    async close() {
      stopRenewal?.();
      await server.shutdown();
      parts?.agentFetch.close();
    },
  };
}

/** The operator-set tokens of `o`, hashed, and the CA hash join tokens carry. */
export async function apiAuthOf(
  o: Pick<StartControlOptions, "adminTokens" | "joinTokens" | "gatewayTokens" | "tls">,
): Promise<ApiAuth> {
  return {
    adminTokenHashes: await Promise.all(o.adminTokens.map(hashToken)),
    joinTokenHashes: await Promise.all(o.joinTokens.map(hashToken)),
    gatewayTokenHashes: await Promise.all((o.gatewayTokens ?? []).map(hashToken)),
    caHash: o.tls?.caHash ?? null,
  };
}

/** The liveness thresholds of `o` without the undefined ones. */
export function thresholdsOf(
  o: Pick<StartControlOptions, "thresholds">,
): Partial<LivenessThresholds> {
  return Object.fromEntries(
    Object.entries(o.thresholds ?? {}).filter(([, v]) => v !== undefined),
  );
}

/**
 * What every control plane a start opens takes from its options (a single
 * one, and each term of an HA instance): thresholds, engines, the loop's
 * period, TLS and the agents' fetch, and where models' facts come from.
 */
export function openOptionsOf(
  o: Omit<StartControlOptions, "store">,
  parts: ControlTlsParts | null,
): Omit<ControlPlaneOptions, "store"> {
  return {
    thresholds: thresholdsOf(o),
    engines: o.engines,
    reconcileMs: o.reconcileMs,
    tls: o.tls,
    fetch: parts?.agentFetch.fetch,
    modelFacts: o.modelFacts,
    commits: o.commits,
  };
}

/**
 * Starts a control plane and its API.
 *
 * @throws {BindError} When the API cannot listen (naming the address, the
 *   port and its holder); the store is closed then and nothing runs.
 */
export async function startControl(o: StartControlOptions): Promise<RunningControl> {
  const parts = await controlTlsParts(o.tls);
  const cp = await ControlPlane.open({ ...openOptionsOf(o, parts), store: o.store });
  const app = createControlApi(cp, await apiAuthOf(o), o.pages);
  let listener: ControlListener;
  try {
    listener = await listenControl(o, parts, (req) => app.fetch(req));
  } catch (e) {
    await o.store.close();
    throw e;
  }
  // The loop starts only once the API listens: a failed bind leaves nothing running.
  cp.start();
  return {
    url: listener.url,
    cp,
    async close() {
      await cp.stop();
      await listener.close();
      await o.store.close();
    },
  };
}
