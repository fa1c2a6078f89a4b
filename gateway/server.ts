/**
 * The gateway served over HTTP (design §3, §12): over an endpoint table
 * something else fills ({@link startGateway}), or following a control plane's
 * ready endpoints and API keys ({@link startFollowingGateway}). Flags, the
 * admin token's source and what is printed at start belong to the commands
 * (`cli/gateway_serve.ts`, `cli/control_serve.ts`); these take plain options.
 *
 * @module
 */
import { clientMetrics, fetchMetrics, scrapeEngineLoads } from "./engine_load.ts";
import { bindErrorFrom } from "../http/bind_error.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { EndpointTable } from "./endpoints.ts";
import { followControlPlane } from "./follow.ts";
import { createGateway, type GatewayOptions } from "./app.ts";
import { type CertificateSource, watchCertificate } from "../tls/certificate_source.ts";
import { type HttpsServer, serveHttps } from "../tls/https_server.ts";

/** A running gateway, for the commands, tests and `llmgw dev`. */
export interface RunningGateway {
  /** The gateway's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Stops listening (in-flight responses are ended). */
  close(): Promise<void>;
}

/** Settings of {@link startGateway}. */
export interface StartGatewayOptions extends GatewayOptions {
  /** Host to listen on. */
  hostname: string;
  /** Port (0: any free one). */
  port: number;
}

/** HTTPS for the gateway's own listener. */
export interface GatewayTls {
  /** Where the certificate comes from: an operator's files, or the cluster CA. */
  source: CertificateSource;
  /** How often the source is asked again, ms (default 60 000): a renewed certificate is swapped in. */
  checkMs?: number;
  /** Told when a renewal cannot be read; the gateway keeps serving the certificate it has. */
  log?: (line: string) => void;
}

/**
 * Serves the gateway over HTTPS: on `node:https`, so a renewed certificate is
 * swapped in at the next handshake without a restart (tls/certificate_source.ts).
 *
 * @throws {BindError} When it cannot listen.
 * @throws {TlsMaterialError} When the certificate cannot be read.
 */
export async function startGatewayTls(
  table: EndpointTable,
  o: StartGatewayOptions & { tls: GatewayTls },
): Promise<RunningGateway> {
  const first = await o.tls.source.load();
  const app = createGateway(table, o);
  let server: HttpsServer;
  try {
    server = await serveHttps(
      { hostname: o.hostname, port: o.port, cert: first.cert, key: first.key },
      (req, info) =>
        app.fetch(
          req,
          { remoteAddr: { transport: "tcp", ...info.remoteAddr } } as Deno.ServeHandlerInfo,
        ),
    );
  } catch (e) {
    app.close();
    throw bindErrorFrom(e, "the gateway", o.hostname, o.port);
  }
  const stop = watchCertificate(
    o.tls.source,
    first,
    o.tls.checkMs ?? 60_000,
    (c) => server.setCertificate(c),
    o.tls.log ?? (() => {}),
  );
  const host = server.addr.hostname.includes(":")
    ? `[${server.addr.hostname}]`
    : server.addr.hostname;
  return {
    url: `https://${host}:${server.addr.port}`,
    async close() {
      stop();
      await server.shutdown();
      app.close();
    },
  };
}

/**
 * Serves the gateway over `table` (which something else keeps up to date).
 *
 * @throws {BindError} When it cannot listen, naming the address, the port and its holder.
 */
export function startGateway(table: EndpointTable, o: StartGatewayOptions): RunningGateway {
  const app = createGateway(table, o);
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve(
      { hostname: o.hostname, port: o.port, onListen: () => {} },
      (req, info) => app.fetch(req, info),
    );
  } catch (e) {
    app.close();
    throw bindErrorFrom(e, "the gateway", o.hostname, o.port);
  }
  const addr = server.addr as Deno.NetAddr;
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return {
    url: `http://${host}:${addr.port}`,
    async close() {
      await server.shutdown();
      app.close();
    },
  };
}

/** Settings of {@link startFollowingGateway}. */
export interface FollowingGatewayOptions extends StartGatewayOptions {
  /** The control plane's base URL. */
  controlUrl: string;
  /** A gateway token (or an admin token) for the control plane. */
  token: string;
  /** Poll the control plane every `intervalMs` (default 2 000). */
  intervalMs?: number;
  /** The fetch polls use: over TLS, one that trusts the cluster CA (tls/trust.ts). */
  controlFetch?: typeof fetch;
}

/** Settings of {@link startFollowingGatewayTls}. */
export interface FollowingGatewayTlsOptions extends FollowingGatewayOptions {
  /** HTTPS for the gateway's listener. */
  tls: GatewayTls;
}

/** A gateway following a control plane. */
export interface FollowingGateway extends RunningGateway {
  /** Resolves after the first successful poll of the control plane (never rejects). */
  readonly synced: Promise<void>;
}

/**
 * Serves the gateway over the ready endpoints and API keys of the control
 * plane at `controlUrl`, polled every `intervalMs`; `close` stops the polling,
 * then the server. `log` gets the follower's and the gateway's notes.
 *
 * @throws {BindError} When it cannot listen; nothing polls then.
 */
export function startFollowingGateway(o: FollowingGatewayOptions): FollowingGateway {
  const table = new EndpointTable();
  const keys = o.keys ?? new ApiKeyTable();
  // Listen first: when that fails (the port is taken) there is no poller to stop.
  return follow(startGateway(table, { ...o, keys }), table, keys, o);
}

/**
 * {@link startFollowingGateway} over HTTPS.
 *
 * @throws {BindError} When it cannot listen; nothing polls then.
 * @throws {TlsMaterialError} When the certificate cannot be read.
 */
export async function startFollowingGatewayTls(
  o: FollowingGatewayTlsOptions,
): Promise<FollowingGateway> {
  const table = new EndpointTable();
  const keys = o.keys ?? new ApiKeyTable();
  return follow(await startGatewayTls(table, { ...o, keys }), table, keys, o);
}

function follow(
  running: RunningGateway,
  table: EndpointTable,
  keys: ApiKeyTable,
  o: FollowingGatewayOptions,
): FollowingGateway {
  const follower = followControlPlane(o.controlUrl, o.token, table, {
    intervalMs: o.intervalMs,
    log: o.log,
    keys,
    fetch: o.controlFetch,
  });
  // Engines' own load, read beside the requests, never in their way (gateway/engine_load.ts).
  const stopScraping = scrapeEngineLoads(table, {
    get: o.client === undefined ? fetchMetrics : clientMetrics(o.client),
  });
  return {
    url: running.url,
    synced: follower.synced,
    async close() {
      stopScraping();
      await follower.stop();
      await running.close();
    },
  };
}
