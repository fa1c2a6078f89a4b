/**
 * The composition root of "a control plane with its embedded gateway"
 * (design §12), shared by `llmgw control serve` and `llmgw dev`: the gateway
 * follows the control plane's ready endpoints over the same API a separate
 * gateway uses. Over TLS (design §11.2) it polls with a fetch that trusts
 * only the cluster CA, reaches the agents' engine proxies with a client that
 * trusts it too, and serves HTTPS with a certificate the cluster CA issues,
 * renewed in place.
 *
 * @module
 */
import type { ClusterTls } from "../control/cluster_tls.ts";
import {
  type FollowingGateway,
  startFollowingGateway,
  startFollowingGatewayTls,
} from "../gateway/server.ts";
import { UpstreamClient } from "../gateway/upstream_client.ts";
import { pinnedFetch } from "../tls/trust.ts";

/** Settings of {@link startEmbeddedGateway}. */
export interface EmbeddedGatewayOptions {
  /** The gateway's listen address. */
  hostname: string;
  /** The gateway's port (0: any free one). */
  port: number;
  /** The control plane's base URL. */
  controlUrl: string;
  /** The gateway token the control plane accepts for its endpoint feed. */
  token: string;
  /** How often the gateway polls the control plane (ms). */
  intervalMs: number;
  /** The cluster's TLS; undefined: plain HTTP (`--insecure-http`). */
  tls: ClusterTls | undefined;
  /** Told when a renewal of the gateway's certificate cannot be issued. */
  renewalLog?: (line: string) => void;
}

/**
 * Starts the embedded gateway. `close` stops it and then the CA-pinned
 * fetch it polls with; a start that fails closes what it opened.
 *
 * @throws {BindError} When the gateway cannot listen.
 * @throws {TlsMaterialError} When its certificate cannot be issued.
 */
export async function startEmbeddedGateway(o: EmbeddedGatewayOptions): Promise<FollowingGateway> {
  const settings = {
    hostname: o.hostname,
    port: o.port,
    controlUrl: o.controlUrl,
    token: o.token,
    intervalMs: o.intervalMs,
  };
  const tls = o.tls;
  if (tls === undefined) return startFollowingGateway(settings);
  const trust = pinnedFetch(tls.ca.certPem);
  let gateway: FollowingGateway;
  try {
    gateway = await startFollowingGatewayTls({
      ...settings,
      controlFetch: trust.fetch,
      client: new UpstreamClient({ caCerts: [tls.ca.certPem] }),
      tls: {
        source: tls.controlCertificateSource(),
        log: o.renewalLog,
      },
    });
  } catch (e) {
    trust.close();
    throw e;
  }
  return {
    url: gateway.url,
    synced: gateway.synced,
    async close() {
      try {
        await gateway.close();
      } finally {
        trust.close();
      }
    },
  };
}
