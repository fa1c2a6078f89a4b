/**
 * The peer server's counters on the agent's `/metrics` (issue #25 item 3):
 * bytes and ranges served to other agents (and those streamed while being
 * written), refusals by reason, uploads running now (and those waiting for
 * bytes). An agent without a model cache serves nothing and shows the
 * families with zeros.
 *
 * @module
 */
import type { Exposition } from "../text/prometheus_exposition.ts";
import type { PeerServerStats } from "./peer_server.ts";

export type { PeerServerStats };

/** Nothing served yet. */
export function emptyPeerStats(): PeerServerStats {
  return {
    bytesServed: 0,
    rangesServed: 0,
    rangesStreamed: 0,
    refused: { not_held: 0, range_pending: 0, busy: 0 },
    uploads: 0,
    waiting: 0,
  };
}

/** Writes the peer server's families (zeros without a peer server). */
export function renderPeerServing(out: Exposition, s: PeerServerStats = emptyPeerStats()): void {
  out.family("peer_bytes_served_total", "counter", "Model bytes sent to other agents.");
  out.sample("peer_bytes_served_total", {}, s.bytesServed);
  out.family("peer_ranges_served_total", "counter", "Byte ranges sent to other agents (206).");
  out.sample("peer_ranges_served_total", {}, s.rangesServed);
  out.family(
    "peer_ranges_streamed_total",
    "counter",
    "Of the ranges sent, those touching a chunk still being written here when asked (streamed as written).",
  );
  out.sample("peer_ranges_streamed_total", {}, s.rangesStreamed);
  out.family(
    "peer_ranges_refused_total",
    "counter",
    "Ranges other agents asked for and did not get: not_held, range_pending (still downloading), busy.",
  );
  for (const [reason, n] of Object.entries(s.refused)) {
    out.sample("peer_ranges_refused_total", { reason }, n);
  }
  out.family("peer_uploads", "gauge", "Ranges being sent to other agents now.");
  out.sample("peer_uploads", {}, s.uploads);
  out.family(
    "peer_uploads_waiting",
    "gauge",
    "Of the uploads now, those waiting for bytes this agent is still writing (each holds an upload slot).",
  );
  out.sample("peer_uploads_waiting", {}, s.waiting);
}
