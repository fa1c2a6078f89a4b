/**
 * How one agent asks another for bytes of a model file it holds (issue #25
 * item 3, docs/models.md "Sources"): `GET` on the serving agent's local API
 * listener, which over TLS asks for the cluster's client certificates, with
 * a plain `Range`:
 *
 * ```
 * GET /peer/v1/blobs/<org>/<name>/<blob key>?size=<file size>
 * Range: bytes=<first>-<last>
 * → 206, Content-Range: bytes first-last/size
 * → 404 X-Llmgw-Peer: not_held       (no such blob here: ask someone else)
 * → 503 X-Llmgw-Peer: range_pending  (fetching it, not these bytes yet)
 * → 503 X-Llmgw-Peer: busy           (too many uploads now)
 * ```
 *
 * Files are named by content hash (the cache's blob key: SHA-256 of an LFS
 * file, the git blob id of a small one) within their repository, so a peer serves exactly the bytes the hub would, and the asker
 * verifies the whole file as it does any source's. Shared by the server
 * (agent/peer_server.ts) and the client (models/peer_byte_source.ts).
 *
 * @module
 */

/** The route's prefix. */
export const PEER_BLOBS_PATH = "/peer/v1/blobs/";

/** The header naming why a peer did not serve a range. */
export const PEER_REFUSAL_HEADER = "x-llmgw-peer";

/** Why a peer did not serve a range. */
export type PeerRefusal =
  /** No blob and no download of it here: ask another source. */
  | "not_held"
  /** A download of it is under way here, without these bytes yet: ask again shortly. */
  | "range_pending"
  /** Its uploads are all taken: ask again shortly, or another source. */
  | "busy";

/** The status each refusal is sent with. */
export const PEER_REFUSAL_STATUS: Readonly<Record<PeerRefusal, number>> = {
  not_held: 404,
  range_pending: 503,
  busy: 503,
};

/** The path asking for blob `key` of repository `repo` (`org/name`), of a file of `size` bytes. */
export function peerBlobPath(repo: string, key: string, size: number): string {
  const parts = [...repo.split("/"), key].map(encodeURIComponent);
  return `${PEER_BLOBS_PATH}${parts.join("/")}?size=${size}`;
}

/** A closed byte range `first` … `last`. */
export interface ByteRange {
  /** First byte. */
  first: number;
  /** Last byte (inclusive). */
  last: number;
}

/**
 * One `bytes=first-last` range (the only form a peer answers: the asker
 * always knows both ends), or null for anything else.
 */
export function parsePeerRange(header: string | null): ByteRange | null {
  const m = /^bytes=(\d{1,15})-(\d{1,15})$/.exec(header?.trim() ?? "");
  if (m === null) return null;
  const first = Number(m[1]);
  const last = Number(m[2]);
  return last >= first ? { first, last } : null;
}
