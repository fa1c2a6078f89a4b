/**
 * The gateway served over HTTP (design §3, §12): over an endpoint table
 * something else fills ({@link startGateway}), or following a control plane's
 * ready endpoints and API keys ({@link startFollowingGateway}). Flags, the
 * admin token's source and what is printed at start belong to the commands
 * (`cli/gateway_serve.ts`, `cli/control_serve.ts`); these take plain options.
 *
 * @module
 */
import { bindErrorFrom } from "../http/bind_error.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { EndpointTable } from "./endpoints.ts";
import { followControlPlane } from "./follow.ts";
import { createGateway, type GatewayOptions } from "./proxy.ts";

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
  const { controlUrl, token, intervalMs, controlFetch, ...serve } = o;
  const table = new EndpointTable();
  const keys = serve.keys ?? new ApiKeyTable();
  // Listen first: when that fails (the port is taken) there is no poller to stop.
  const running = startGateway(table, { ...serve, keys });
  const follower = followControlPlane(controlUrl, token, table, {
    intervalMs,
    log: o.log,
    keys,
    fetch: controlFetch,
  });
  return {
    url: running.url,
    synced: follower.synced,
    async close() {
      await follower.stop();
      await running.close();
    },
  };
}
