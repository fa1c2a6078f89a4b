/**
 * The agent's two listeners (design §11.2): the local API (status, logs,
 * metrics) and the engine proxy, the one door to this node's engines.
 * Plain HTTP for an http:// control plane, else TLS with the agent's
 * certificate, swapped in place on every renewal.
 *
 * @module
 */
import {
  type AgentListener,
  type ListenAddress,
  listenerUrl,
  serveListener,
  serveTlsListener,
} from "./listener.ts";
import { type AgentTls, requireClientCertificate } from "./agent_tls.ts";
import { engineProxy, type EngineProxyOptions } from "./engine_proxy.ts";
import { localApi, type LocalApiView } from "./local_api.ts";
import { PeerServer } from "./peer_server.ts";
import type { Logger } from "../log/log.ts";

/** Where a listener listens and how it is reached. */
export interface ListenerPlacement {
  /** Where it listens. */
  listen: ListenAddress;
  /** The URL others reach it on; default: its port at the management address. */
  url?: string;
  /** The management address. */
  mgmtAddr: string;
  /** The agent's TLS; null serves plain HTTP. */
  tls: AgentTls | null;
  /** Where "… listening" goes. */
  log: Logger;
}

/** A listener that is up, and the URL others reach it on. */
export interface ServedListener {
  /** The listener. */
  server: AgentListener;
  /** Its URL, as registered. */
  url: string;
}

/** The agent's listeners as it holds them: each up or not (null), with the URL it registers. */
export class AgentListeners {
  /** The local API; null when it does not listen. */
  localApi: ServedListener | null = null;
  /** The engine proxy; null when it does not listen. */
  proxy: ServedListener | null = null;

  /** Shuts both down together: a local API client still reading must not keep the proxy open. */
  async shutdown(): Promise<void> {
    await Promise.all([this.localApi?.server.shutdown(), this.proxy?.server.shutdown()]);
    this.localApi = this.proxy = null;
  }
}

/**
 * Serves the local API with `token`. Over TLS the control plane presents a
 * certificate from the CA: `/v1` needs it besides the token. With `peer`,
 * the same listener serves model bytes to the cluster's other agents
 * (agent/peer_server.ts: a node certificate, no token).
 */
export async function serveLocalApi(
  view: LocalApiView,
  token: string,
  at: ListenerPlacement,
  peer?: PeerServer,
): Promise<ServedListener> {
  const app = localApi(view, token);
  const server = await serve("the agent's local API", "local API", app.fetch, true, at, peer);
  return { server, url: at.url ?? urlOf(server, at) };
}

/**
 * How long a stopping agent lets proxied requests and streams run on
 * (design §9.2): long enough for most answers, and short enough that the
 * next agent is up before the gateways' hold (30 s, gateway/hold_queue.ts)
 * runs out for the requests waiting for it.
 */
export const PROXY_DRAIN_MS = 25_000;

/**
 * Serves the engine proxy. Its shutdown stops accepting at once (gateways
 * then hold or reroute, docs/gateway.md) and lets the requests in flight
 * finish, returning once they have or after `drainMs`: a TLS listener then
 * closes what is left; a plain one leaves it to end with the agent's process,
 * which exits next. (Cutting plain streams from here would mean relaying
 * every stream through JS; bodies are handed to Deno's server as they come.)
 */
export async function serveEngineProxy(
  proxy: EngineProxyOptions,
  at: ListenerPlacement,
  drainMs: number = PROXY_DRAIN_MS,
): Promise<ServedListener> {
  const server = await serve("the engine proxy", "engine proxy", engineProxy(proxy), false, at);
  const drained: AgentListener = {
    addr: server.addr,
    async shutdown() {
      const closed = server.shutdown(drainMs);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), drainMs));
      if (await Promise.race([closed, late]) === "late") {
        at.log.warn("engine proxy: requests still running after the drain; not waiting for them", {
          drain_ms: drainMs,
        });
      }
      clearTimeout(timer);
    },
  };
  return { server: drained, url: at.url ?? urlOf(server, at) };
}

/** Serves a listener plain or, with TLS, with the agent's certificate, swapped on renewal. */
async function serve(
  what: string,
  name: string,
  handler: (req: Request) => Response | Promise<Response>,
  clientCertificates: boolean,
  at: ListenerPlacement,
  peer?: PeerServer,
): Promise<AgentListener> {
  const tls = at.tls;
  const onListen = (addr: Deno.NetAddr) =>
    at.log.info(`${name} listening`, {
      hostname: addr.hostname,
      port: addr.port,
      tls: tls !== null,
    });
  const isPeer = (req: Request) =>
    peer !== undefined && PeerServer.handles(new URL(req.url).pathname);
  if (tls === null) {
    return serveListener(
      what,
      at.listen,
      (req) => isPeer(req) ? peer!.handle(req, null) : handler(req),
      onListen,
    );
  }
  const ca = clientCertificates ? tls.caPem : undefined;
  const server = await serveTlsListener(
    what,
    at.listen,
    { ...tls.serving, ca },
    (req, info) =>
      isPeer(req)
        ? peer!.handle(req, info)
        : clientCertificates
        ? requireClientCertificate(req, info, handler)
        : handler(req),
    onListen,
  );
  tls.onCertificate((c) => server.setCertificate({ ...c, ca }));
  return server;
}

function urlOf(server: AgentListener, at: ListenerPlacement): string {
  const scheme = at.tls === null ? "http" : "https";
  return listenerUrl(at.listen.hostname, server.addr.port, at.mgmtAddr, scheme);
}
