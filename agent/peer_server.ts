/**
 * The agent serving model bytes to the other agents of its cluster (issue
 * #25 item 3, docs/models.md "Sources"): `GET /peer/v1/blobs/…` on its local
 * API listener (models/peer_protocol.ts), by content hash and byte range.
 *
 * - **Who:** only a caller whose TLS client certificate chains to the
 *   cluster CA and names a node (`node:<id>`, as the control plane signs
 *   agents' certificates): another agent of this cluster. A plain-HTTP
 *   listener has no such proof, so it serves no bytes at all.
 * - **What:** a verified blob, or the recorded chunks of one still
 *   downloading, or the chunks this agent is writing now, streamed as
 *   their bytes land (agent/model_cache/peer_holdings.ts,
 *   written_chunks.ts); anything else is refused with a status the asker
 *   reads as "ask someone else" or "ask again".
 * - **How much:** at most `maxUploads` ranges of recorded chunks or
 *   verified blobs at once, and apart from them at most `maxWaiting` ranges
 *   touching a chunk being written (which may wait for its bytes); `busy`
 *   beyond either. A wait never takes a slot from bytes that can be served
 *   now. Every byte sent counted. Nothing is buffered in memory: bytes are read from the file
 *   (the page cache holds what was just written), 1 MiB at most at a time.
 * - **A chunk whose try fails** while it is streamed (agent/peer_upload.ts) holds the upload
 *   until the chunk's next try begins (at most `nextTryWaitMs`, the
 *   follower's own `range_pending` budget), which goes on from the byte
 *   where the failed one stopped: the stream goes on too. It ends with an
 *   error (the connection is cut) when none begins in time, or one begins
 *   below the byte already sent (a new round); the follower goes on from
 *   the byte it reached, as from any broken transfer.
 *
 * @module
 */
import type { CacheFs } from "./model_cache/cache_fs.ts";
import { denoCacheFs } from "./model_cache/cache_fs.ts";
import type { CacheLayout } from "./model_cache/cache_layout.ts";
import { holding, requestedBlob } from "./model_cache/peer_holdings.ts";
import type { WrittenChunks } from "./model_cache/written_chunks.ts";
import { peerUpload } from "./peer_upload.ts";
import {
  parsePeerRange,
  PEER_BLOBS_PATH,
  PEER_REFUSAL_HEADER,
  PEER_REFUSAL_STATUS,
  type PeerRefusal,
} from "../models/peer_protocol.ts";
import { errorMessage } from "../text/error_message.ts";

/** What the listener knows of the caller's TLS; null on a plain-HTTP listener. */
export interface PeerCaller {
  /** The client certificate chains to the cluster CA. */
  peerVerified: boolean;
  /** Its common name (`node:<id>` for an agent). */
  peerCommonName: string | null;
}

/** Settings of {@link PeerServer}. */
export interface PeerServerOptions {
  /** The model cache's layout. */
  layout: CacheLayout;
  /** Ranges of recorded or verified bytes sent at once (default 8); more are `busy`. */
  maxUploads?: number;
  /**
   * Ranges touching a chunk being written sent at once, apart from
   * `maxUploads` (default 8: one follower's whole window of chunks); more are `busy`.
   */
  maxWaiting?: number;
  /** The chunks the agent's model cache is writing now: streamed as they land. */
  written?: WrittenChunks;
  /**
   * How long an upload whose chunk's try failed waits for the next try
   * (default 20 s: the follower's own wait for `range_pending`,
   * models/peer_byte_source.ts).
   */
  nextTryWaitMs?: number;
  /** The cache's file system (tests inject one). */
  fs?: CacheFs;
}

/** What the peer server did, for metrics. */
export interface PeerServerStats {
  /** Bytes sent to peers. */
  bytesServed: number;
  /** Ranges answered 206. */
  rangesServed: number;
  /** Of those, ranges touching a chunk still being written when asked for. */
  rangesStreamed: number;
  /** Ranges refused, by reason. */
  refused: Record<PeerRefusal, number>;
  /** Uploads running now. */
  uploads: number;
  /** Of those, uploads waiting now for bytes still to be written. */
  waiting: number;
}

function answer(status: number, code: string, message: string, refusal?: PeerRefusal): Response {
  return Response.json({ error: { code, message: message.slice(0, 4096) } }, {
    status,
    headers: refusal === undefined ? {} : { [PEER_REFUSAL_HEADER]: refusal },
  });
}

/** One agent's peer server. */
export class PeerServer {
  readonly #layout: CacheLayout;
  readonly #fs: CacheFs;
  readonly #maxUploads: number;
  readonly #maxWaiting: number;
  readonly #nextTryWaitMs: number;
  /** Uploads counted against `maxUploads`, and against `maxWaiting`. */
  #reading = 0;
  #streaming = 0;
  readonly #stats: PeerServerStats = {
    bytesServed: 0,
    rangesServed: 0,
    rangesStreamed: 0,
    refused: { not_held: 0, range_pending: 0, busy: 0 },
    uploads: 0,
    waiting: 0,
  };
  readonly #written: WrittenChunks | undefined;

  /** A server over the cache at `options.layout`. */
  constructor(options: PeerServerOptions) {
    this.#layout = options.layout;
    this.#fs = options.fs ?? denoCacheFs;
    this.#maxUploads = options.maxUploads ?? 8;
    this.#maxWaiting = options.maxWaiting ?? 8;
    this.#nextTryWaitMs = options.nextTryWaitMs ?? 20_000;
    this.#written = options.written;
  }

  /** Whether a request is for this server (the listener sends it here). */
  static handles(pathname: string): boolean {
    return pathname.startsWith(PEER_BLOBS_PATH);
  }

  /** A copy of the counters. */
  stats(): PeerServerStats {
    return structuredClone(this.#stats);
  }

  /** Answers one request; never throws. */
  async handle(req: Request, caller: PeerCaller | null): Promise<Response> {
    if (caller === null) {
      return answer(
        403,
        "peer_tls_required",
        "this agent serves model bytes only over the cluster's TLS, to its agents",
      );
    }
    if (!caller.peerVerified) {
      return answer(
        403,
        "client_certificate_required",
        "model bytes go only to a client certificate from the cluster CA",
      );
    }
    if (!(caller.peerCommonName ?? "").startsWith("node:")) {
      return answer(403, "forbidden", "model bytes go only to the cluster's agents (node:<id>)");
    }
    if (req.method !== "GET") {
      return answer(405, "method_not_allowed", `${req.method} is not served; use GET`);
    }
    const url = new URL(req.url);
    const parts = url.pathname.slice(PEER_BLOBS_PATH.length).split("/");
    const sizeText = url.searchParams.get("size") ?? "";
    if (parts.length < 2 || !/^\d{1,15}$/.test(sizeText)) {
      return answer(
        400,
        "bad_request",
        `expected ${PEER_BLOBS_PATH}<org>/<name>/<blob key>?size=<bytes>`,
      );
    }
    let blob: ReturnType<typeof requestedBlob>;
    try {
      const [key, ...repo] = parts.map(decodeURIComponent).reverse();
      blob = requestedBlob(repo.reverse().join("/"), key, Number(sizeText));
    } catch (e) {
      return answer(400, "bad_request", errorMessage(e));
    }
    const { repo, file } = blob;
    const range = parsePeerRange(req.headers.get("range"));
    if (range === null) {
      return answer(400, "bad_range", "the Range header must be one bytes=first-last range");
    }
    if (range.last >= file.size) {
      return new Response(null, {
        status: 416,
        headers: { "content-range": `bytes */${file.size}` },
      });
    }
    // A reading slot bounds the holding check too; a range that streams moves to its own pool.
    if (this.#reading >= this.#maxUploads) {
      return this.#refuse("busy", `${this.#maxUploads} uploads are running here`);
    }
    let release: (() => void) | null = this.#take("reading");
    try {
      const held = await holding(this.#fs, this.#layout, repo, file, range.first, range.last, {
        written: this.#written,
      });
      if (held === "not_held") {
        return this.#refuse(held, `blob ${file.path} of ${repo} is not here`);
      }
      if (held === "range_pending") {
        return this.#refuse(
          held,
          `bytes ${range.first}-${range.last} of blob ${file.path} of ${repo} are still downloading here`,
        );
      }
      if (held.writing.length > 0) {
        release();
        release = null;
        if (this.#streaming >= this.#maxWaiting) {
          return this.#refuse(
            "busy",
            `${this.#maxWaiting} uploads of chunks being written are running here`,
          );
        }
        release = this.#take("streaming");
      }
      let handle: Deno.FsFile;
      try {
        handle = await Deno.open(held.path, { read: true });
      } catch (e) {
        // Renamed or removed between the check and the open: ask again.
        if (e instanceof Deno.errors.NotFound) {
          return this.#refuse("range_pending", `blob ${file.path} of ${repo} is moving into place`);
        }
        throw e;
      }
      const body = peerUpload(handle, range.first, range.last + 1, release, {
        writing: { part: held.path, tries: [...held.writing] },
        written: this.#written,
        nextTryWaitMs: this.#nextTryWaitMs,
        stats: this.#stats,
      });
      release = null;
      this.#stats.rangesServed++;
      if (held.writing.length > 0) this.#stats.rangesStreamed++;
      return new Response(body, {
        status: 206,
        headers: {
          "content-type": "application/octet-stream",
          "content-length": String(range.last + 1 - range.first),
          "content-range": `bytes ${range.first}-${range.last}/${file.size}`,
        },
      });
    } finally {
      release?.();
    }
  }

  /** Counts an upload in `pool`; the function returned uncounts it. */
  #take(pool: "reading" | "streaming"): () => void {
    this.#stats.uploads++;
    if (pool === "reading") this.#reading++;
    else this.#streaming++;
    return () => {
      this.#stats.uploads--;
      if (pool === "reading") this.#reading--;
      else this.#streaming--;
    };
  }

  #refuse(refusal: PeerRefusal, message: string): Response {
    this.#stats.refused[refusal]++;
    return answer(PEER_REFUSAL_STATUS[refusal], refusal, message, refusal);
  }
}
