/**
 * Sending one model request to a replica (design §12): choose → acquire →
 * send → retry before the first byte. A connection failure before any
 * response byte, or a refusal the node's engine proxy made itself (it runs
 * no engine of that shard), tries another replica or holds the request
 * (gateway/replica_attempts.ts); once an engine answered, nothing is
 * retried, and the answer goes on to gateway/answer.ts.
 *
 * Every attempt is reported to the request's record, which counts it in
 * flight until it ends (gateway/request_record.ts).
 *
 * @module
 */
import {
  PROXY_REFUSED_HEADER,
  RETRYABLE_REFUSALS,
  SHARD_HEADER,
} from "../protocol/engine_proxy_protocol.ts";
import type { EndpointSpec, EndpointTable } from "./endpoints.ts";
import { brokenUpstream, clientClosed } from "./refusals.ts";
import { type AttemptPolicy, ReplicaAttempts } from "./replica_attempts.ts";
import type { RequestRecord } from "./request_record.ts";
import {
  type UpstreamClient,
  type UpstreamResponse,
  UpstreamUnreachable,
} from "./upstream_client.ts";

/** What a dispatch sends. */
export interface DispatchRequest {
  /** The served model name. */
  model: string;
  /** Path and query, e.g. `/v1/chat/completions`. */
  target: string;
  /** The headers forwarded to the engine (gateway/headers.ts). */
  headers: Headers;
  /** The body, byte for byte as the client sent it. */
  bytes: Uint8Array;
  /** The request's affinity key (prefix-affinity routing), or null. */
  affinity: string | null;
  /** The client's going away: aborts the request until the engine's head arrived. */
  signal: AbortSignal;
}

/** An engine's answer, whose attempt is still open in the request's record. */
export interface Answered {
  /** The engine's response (head read, body not yet). */
  upstream: UpstreamResponse;
  /** The answer broke off after it began: the replica turns suspect, and the log says why. */
  brokeOff(why?: string): void;
}

/**
 * Sends a request to some replica: its answer, or the gateway's own answer
 * when none answered (counted in `record` already).
 */
export type Dispatch = (r: DispatchRequest, record: RequestRecord) => Promise<Answered | Response>;

/** What {@link createDispatch} works with. */
export interface DispatchDeps {
  /** The ready endpoints. */
  table: EndpointTable;
  /** The client for engine requests. */
  client: UpstreamClient;
  /** Retries and holds, shared by all requests. */
  policy: AttemptPolicy;
  /** Where one-line notes go. */
  log: (line: string) => void;
}

/** The gateway's dispatch over its table and engine client. */
export function createDispatch({ table, client, policy, log }: DispatchDeps): Dispatch {
  return async (r, record) => {
    const { model, signal } = r;
    const attempts = new ReplicaAttempts(table, model, r.affinity, policy);
    for (let e; (e = await attempts.next(signal)) !== null;) {
      record.attempt(e.replica_id, table.acquire(e));
      let upstream: UpstreamResponse;
      try {
        // The client going away aborts the request until the engine's head
        // arrives (through the signal); after that, Deno cancels the relayed
        // body, which closes the engine's connection.
        upstream = await client.request({
          origin: e.url,
          method: "POST",
          target: r.target,
          headers: viaProxy(r.headers, e),
          body: r.bytes,
          signal,
        });
      } catch (err) {
        if (signal.aborted) {
          record.finish("client_closed");
          return clientClosed();
        }
        // Marks it suspect; the reason comes back only while it was not (held requests retry often).
        const news = attempts.failed(e, err);
        if (err instanceof UpstreamUnreachable) {
          record.attemptEnded("upstream_unreachable");
          if (news !== null) {
            log(`gateway: ${model}: ${e.url} unreachable (${news}); marked suspect`);
          }
          continue;
        }
        // The engine began an answer and broke it (or sent garbage): not retried.
        record.finish("upstream_error");
        log(`gateway: ${model}: ${e.url} sent a broken response (${attempts.lastError}); suspect`);
        return brokenUpstream(`replica of \`${model}\` sent a broken response`);
      }
      attempts.answered(e);
      const refused = upstream.headers.get(PROXY_REFUSED_HEADER);
      if (refused !== null && RETRYABLE_REFUSALS.includes(refused)) {
        // The node's proxy runs no engine of that shard (stopped by a scale-down
        // this gateway has not heard of yet): nothing was generated, try another.
        await upstream.body?.cancel().catch(() => {});
        record.attemptEnded("upstream_unreachable");
        const why = `the node did not reach an engine of shard ${e.shard ?? "?"} (${refused})`;
        const news = attempts.failed(e, why);
        if (news !== null) log(`gateway: ${model}: ${e.url}: ${news}; marked suspect`);
        continue;
      }
      const endpoint = e;
      return {
        upstream,
        brokeOff(why) {
          table.markSuspect(endpoint);
          const cause = why === undefined ? "" : ` (${why})`;
          log(`gateway: ${model}: ${endpoint.url} died mid-response${cause}; marked suspect`);
        },
      };
    }
    return record.settle(attempts.giveUp(signal));
  };
}

/**
 * The headers of one attempt: through an agent's engine proxy, its
 * credential and the shard's name are added (design §11.2).
 */
function viaProxy(headers: Headers, e: EndpointSpec): Headers {
  if (e.token === undefined || e.shard === undefined) return headers;
  const out = new Headers(headers);
  out.set("authorization", `Bearer ${e.token}`);
  out.set(SHARD_HEADER, e.shard);
  return out;
}
