/**
 * Serving one of the agent's listeners (the local API, the engine proxy) and
 * the URL peers reach it on: the management address when it listens on a
 * wildcard address.
 *
 * @module
 */
import { bindErrorFrom } from "../http/bind_error.ts";
import {
  type HttpsHandler,
  type HttpsServer,
  serveHttps,
  type ServingCertificate,
} from "../tls/https_server.ts";

/** Where a listener binds. */
export interface ListenAddress {
  /** Host, e.g. 0.0.0.0 or 127.0.0.1. */
  hostname: string;
  /** Port; 0 for any free one. */
  port: number;
}

/** The URL peers reach a listener on, given the address it bound and the node's management address. */
export function listenerUrl(
  hostname: string,
  port: number,
  mgmtAddr: string,
  scheme: "http" | "https" = "http",
): string {
  const wildcard = ["0.0.0.0", "::", "[::]", ""].includes(hostname);
  const host = wildcard ? mgmtAddr : hostname;
  return `${scheme}://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
}

/** A listener either way: plain (`Deno.serve`) or TLS (`node:https`). */
export interface AgentListener {
  /** Where it listens. */
  readonly addr: Deno.NetAddr;
  /**
   * Stops accepting, and closes once the requests in flight are answered
   * (a TLS listener closes what is left after `graceMs`).
   */
  shutdown(graceMs?: number): Promise<void>;
}

/**
 * Serves `handler` over HTTPS with `tls`; with `tls.ca`, peers may present
 * client certificates and `handler` learns whether one verified. A failure
 * to bind is a `BindError`.
 */
export async function serveTlsListener(
  what: string,
  listen: ListenAddress,
  tls: ServingCertificate,
  handler: HttpsHandler,
  onListen: (addr: Deno.NetAddr) => void,
): Promise<HttpsServer> {
  try {
    const server = await serveHttps({ ...listen, ...tls }, handler);
    onListen(server.addr);
    return server;
  } catch (e) {
    throw bindErrorFrom(e, what, listen.hostname, listen.port);
  }
}

/**
 * Serves `handler` on `listen`; a failure to bind is a `BindError` naming
 * the address and, where /proc tells, the process holding it.
 */
export function serveListener(
  what: string,
  listen: ListenAddress,
  handler: (req: Request) => Response | Promise<Response>,
  onListen: (addr: Deno.NetAddr) => void,
): Deno.HttpServer<Deno.NetAddr> {
  try {
    return Deno.serve({ hostname: listen.hostname, port: listen.port, onListen }, handler);
  } catch (e) {
    throw bindErrorFrom(e, what, listen.hostname, listen.port);
  }
}
