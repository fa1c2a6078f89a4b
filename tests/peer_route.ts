/**
 * A peer route served as an agent serves it (agent/listener.ts): over mTLS
 * on a free loopback port with node `a`'s certificate from
 * {@link clusterPki}, asked with node `b`'s pinned fetch. Both are closed
 * after the test's body, even when it fails.
 *
 * @module
 */
import type { PeerServer } from "../agent/peer_server.ts";
import { serveTlsListener } from "../agent/listener.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { clusterPki } from "./cluster_pki.ts";

/** The served peer route as node `b` sees it. */
export interface ServedPeerRoute {
  /** The route's base URL (`https://127.0.0.1:<port>`). */
  url: string;
  /** Node `b`'s fetch: its client certificate, the cluster CA pinned. */
  fetch: typeof fetch;
}

/**
 * Runs `body` with `peer` served over mTLS; the listener is shut after it
 * with `graceMs` (the listener's default when absent) for requests in flight.
 */
export async function withPeerRoute(
  peer: PeerServer,
  body: (route: ServedPeerRoute) => Promise<void>,
  graceMs?: number,
): Promise<void> {
  const p = await clusterPki();
  const server = await serveTlsListener(
    "the peer route",
    { hostname: "127.0.0.1", port: 0 },
    { ...p.server, ca: p.caPem },
    (req, info) => peer.handle(req, info),
    () => {},
  );
  try {
    const http = pinnedFetch(p.caPem, p.nodeB);
    try {
      await body({ url: `https://127.0.0.1:${server.addr.port}`, fetch: http.fetch });
    } finally {
      http.close();
    }
  } finally {
    await server.shutdown(graceMs);
  }
}
