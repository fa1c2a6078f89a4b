/**
 * Byte ranges of a model's files from another agent of the cluster (issue
 * #25 item 3): `GET` on its peer route (models/peer_protocol.ts) through a
 * `fetch` that presents this agent's node certificate and trusts only the
 * cluster CA (injected: models/ opens no connection of its own).
 *
 * A peer writing the range's chunks now streams their bytes as they land
 * (agent/peer_server.ts: the answer comes at once, its body as fast as the
 * peer's own source; a try of the peer's that fails cuts it, retryably). A
 * peer that has not begun those chunks answers `range_pending`: the source
 * asks again, backing off from 50 ms to 200 ms, for at most `maxWaitMs`
 * (pipelining: a chain of hosts passes chunks on as they arrive), then gives
 * up with a retryable error so the model cache moves the range to its next
 * source.
 * Every host gets its plan at once, so a peer may not have begun (`not_held`)
 * or not be listening yet: those are asked again too, within `maxWaitMs` and
 * `maxUnreachableMs`; a peer still holding nothing then is a final answer for
 * that file from this peer (the cache asks its next source; only a hub's
 * refusal fails the download for good), one still unreachable a retryable
 * one. A transfer cut midway (the peer killed) errors at once; the
 * cache goes on from the byte it reached, elsewhere.
 *
 * @module
 */
import type { ByteSource, SourceKind } from "./byte_source.ts";
import { byteSlice } from "./byte_slice.ts";
import { parseContentRange } from "./hub_protocol.ts";
import { PEER_REFUSAL_HEADER, peerBlobPath } from "./peer_protocol.ts";
import { blobKey, type RepoFile } from "./repo_snapshot.ts";
import { errorMessage } from "../text/error_message.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/** A peer that did not serve a range; `retryable: false` means it never will (for this file). */
export class PeerSourceError extends Error {
  /** Whether asking again later may succeed. */
  readonly retryable: boolean;
  /** The message names the peer, the file and what happened. */
  constructor(message: string, retryable: boolean) {
    super(message);
    this.name = "PeerSourceError";
    this.retryable = retryable;
  }
}

/** Settings of {@link PeerByteSource}. */
export interface PeerByteSourceOptions {
  /** The peer's node id (the source's name in progress and events). */
  nodeId: string;
  /** The peer's local API URL, as it registered it. */
  url: string;
  /** A fetch presenting this agent's node certificate, trusting the cluster CA. */
  fetch: (input: string, init: RequestInit) => Promise<Response>;
  /** The longest wait for a range the peer is still fetching or has not begun (default 20 s). */
  maxWaitMs?: number;
  /** The longest a peer may refuse connections before the range goes elsewhere (default 5 s). */
  maxUnreachableMs?: number;
  /** Seams for tests. */
  clock?: Clock;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

const FIRST_WAIT_MS = 50;
const LONGEST_WAIT_MS = 200;

/** A {@link ByteSource} reading from another agent. */
export class PeerByteSource implements ByteSource {
  readonly kind: SourceKind = "peer";
  readonly name: string;
  readonly #o: PeerByteSourceOptions;
  readonly #base: string;

  /** A source for the peer `options.nodeId` at `options.url`. */
  constructor(options: PeerByteSourceOptions) {
    this.#o = options;
    this.name = `peer ${options.nodeId}`;
    this.#base = options.url.replace(/\/+$/, "");
  }

  /** Bytes `start` … `end - 1` of `file` of `repo` (any commit holding the same content). */
  async read(
    repo: string,
    commit: string,
    file: RepoFile,
    start: number,
    end: number,
    signal: AbortSignal,
  ): Promise<ReadableStream<Uint8Array>> {
    const what = `bytes ${start}-${end - 1} of ${file.path} of ${repo} revision ${commit}`;
    if (
      !(Number.isSafeInteger(start) && Number.isSafeInteger(end) && start >= 0 &&
        end <= file.size && start <= end)
    ) {
      throw new RangeError(`Cannot read ${what}: the file has ${file.size} bytes`);
    }
    if (start === end) return new ReadableStream({ start: (c) => c.close() });
    const clock = this.#o.clock ?? systemClock;
    const sleep = this.#o.sleep ?? abortableSleep;
    const maxWaitMs = this.#o.maxWaitMs ?? 20_000;
    const maxUnreachableMs = Math.min(maxWaitMs, this.#o.maxUnreachableMs ?? 5_000);
    const url = this.#base + peerBlobPath(repo, blobKey(file), file.size);
    const began = clock.now();
    for (let wait = FIRST_WAIT_MS;; wait = Math.min(wait * 2, LONGEST_WAIT_MS)) {
      let res: Response | null = null;
      let unreachable = "";
      try {
        res = await this.#o.fetch(url, {
          headers: { range: `bytes=${start}-${end - 1}` },
          signal,
        });
      } catch (e) {
        signal.throwIfAborted();
        unreachable = errorMessage(e);
      }
      if (res?.status === 206) return this.#body(res, file, start, end, what);
      const refusal = res?.headers.get(PEER_REFUSAL_HEADER) ?? null;
      await res?.body?.cancel().catch(() => {});
      const waited = clock.now() - began;
      const late = waited + wait > (res === null ? maxUnreachableMs : maxWaitMs);
      if (res === null) {
        // Not up yet (all hosts get their plan at once) or gone: asked again briefly.
        if (late) {
          throw new PeerSourceError(`${this.name} unreachable for ${what}: ${unreachable}`, true);
        }
      } else if (res.status === 404 && refusal === "not_held") {
        // The plan says it fetches this revision: it may not have begun yet.
        if (late) {
          throw new PeerSourceError(
            `${this.name} does not hold ${file.path} of ${repo} (asked for ${
              Math.round(waited / 1000)
            } s)`,
            false,
          );
        }
      } else if (refusal === "range_pending" || refusal === "busy") {
        if (late) {
          throw new PeerSourceError(
            `${this.name} still ${refusal === "busy" ? "busy" : "fetching"} ${what} after ${
              Math.round(waited / 1000)
            } s`,
            true,
          );
        }
      } else {
        throw new PeerSourceError(
          `${this.name} answered ${res.status} for ${what}`,
          res.status >= 500 || res.status === 429,
        );
      }
      await sleep(wait, signal);
      signal.throwIfAborted();
    }
  }

  #body(
    res: Response,
    file: RepoFile,
    start: number,
    end: number,
    what: string,
  ): ReadableStream<Uint8Array> {
    const range = parseContentRange(res.headers.get("content-range"));
    if (
      range === null || range.first !== start || range.last !== end - 1 ||
      range.total !== file.size || res.body === null
    ) {
      res.body?.cancel().catch(() => {});
      throw new PeerSourceError(
        `${this.name} answered ${what} with ${
          res.headers.get("content-range") ?? "no Content-Range"
        } (file of ${file.size} bytes)`,
        true,
      );
    }
    return byteSlice(
      res.body,
      0,
      end - start,
      (got) =>
        new PeerSourceError(
          `transfer of ${what} from ${this.name} ended after ${got} of ${end - start} bytes`,
          true,
        ),
      (e) =>
        new PeerSourceError(
          `transfer of ${what} from ${this.name} broke: ${errorMessage(e)}`,
          true,
        ),
    );
  }
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
