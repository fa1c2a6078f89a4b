/**
 * How a follower of an HA control plane answers a request (design §11.1,
 * control/ha_control.ts): about itself from its own state; otherwise
 * forwarded to the leader with the answer streamed back; with no leader
 * reachable, a read from its last known state marked read-only; else 503
 * `not_leader`, after which clients try their next URL.
 *
 * Why forward rather than refuse: the live view (heartbeats, shard reports,
 * readiness) exists only on the leader, and a forwarded request needs no
 * client to know who leads; refusing would make every client learn the
 * leader after every failover. A request already forwarded once is never
 * forwarded again. The agent API and the gateways' endpoint feed are never
 * answered from old state: agents keep their engines and gateways their
 * endpoints meanwhile.
 *
 * @module
 */
import { errorMessage } from "./errors.ts";
import {
  FORWARDED_BY_HEADER,
  LEADER_HEADER,
  type Leadership,
  READ_ONLY_HEADER,
} from "../protocol/leadership.ts";

/** Paths a follower answers itself: about this instance, not the cluster's state. */
const LOCAL_PATHS = new Set(["/healthz", "/v1/leader", "/v1/ca", "/metrics"]);

/** Paths never answered from old state: they would steer agents or gateways by it. */
function liveOnly(path: string): boolean {
  return path.startsWith("/v1/agent/") || path === "/v1/endpoints" ||
    path.startsWith("/v1/endpoints/");
}

/** What a follower knows when a request comes in. */
export interface FollowerView {
  /** The API over its last known state, or null before the first load. */
  local: { fetch(req: Request): Response | Promise<Response> } | null;
  /** The leader's URL while a leader is known and live, else null. */
  leaderUrl(): string | null;
  /** Who leads, as this instance sees it. */
  leadership(): Leadership;
}

/** A follower's answers, and the requests it has forwarded to the leader. */
export class Follower {
  readonly #holder: string;
  readonly #client: Deno.HttpClient | null;
  readonly #log: (line: string) => void;
  /** Aborts the requests forwarded to the current leader when it changes or is gone. */
  #forwarding = new AbortController();

  /**
   * A follower named `holder` (sent with each forwarded request, so none is
   * forwarded twice); `client` trusts the cluster CA, or null on plain HTTP.
   */
  constructor(holder: string, client: Deno.HttpClient | null, log: (line: string) => void) {
    this.#holder = holder;
    this.#client = client;
    this.#log = log;
  }

  /**
   * Ends the requests in flight to the previous leader: one frozen with
   * connections open would hold them until each client's own timeout.
   */
  abort(): void {
    this.#forwarding.abort();
    this.#forwarding = new AbortController();
  }

  /** The answer to `req` on an instance that does not lead. */
  async answer(req: Request, view: FollowerView): Promise<Response> {
    const path = new URL(req.url).pathname;
    const local = view.local;
    if (LOCAL_PATHS.has(path)) {
      if (local !== null) return local.fetch(req);
      if (path === "/v1/leader" || path === "/healthz") {
        return Response.json(path === "/healthz" ? { status: "ok" } : view.leadership());
      }
    }
    const leaderUrl = view.leaderUrl();
    if (leaderUrl !== null && !req.headers.has(FORWARDED_BY_HEADER)) {
      const forwarded = await this.#forward(req, leaderUrl, view);
      if (forwarded !== null) return forwarded;
    }
    const readable = req.method === "GET" || req.method === "HEAD";
    const reason = () => view.leadership().reason ?? "the leader is unreachable";
    if (readable && local !== null && !liveOnly(path)) {
      const res = await local.fetch(req);
      const headers = new Headers(res.headers);
      headers.set(READ_ONLY_HEADER, reason());
      return new Response(res.body, { status: res.status, headers });
    }
    return Response.json({
      error: {
        code: "not_leader",
        message: leaderUrl === null
          ? `this control plane is not the leader and knows of none: ${reason()}`
          : `this control plane is not the leader and cannot reach the leader at ${leaderUrl}`,
        path: null,
        leader: leaderUrl,
      },
    }, { status: 503 });
  }

  /** Sends `req` on to the leader; null when the leader cannot be reached. */
  async #forward(req: Request, leaderUrl: string, view: FollowerView): Promise<Response | null> {
    const url = new URL(req.url);
    const target = new URL(url.pathname + url.search, leaderUrl);
    const headers = new Headers(req.headers);
    headers.delete("host");
    headers.set(FORWARDED_BY_HEADER, this.#holder);
    // The host the client used: the dashboard checks a form's Origin against it.
    if (!headers.has("x-forwarded-host")) headers.set("x-forwarded-host", url.host);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const replaced = this.#forwarding.signal;
    try {
      const res = await fetch(target, {
        method: req.method,
        headers,
        body: hasBody ? await req.arrayBuffer() : undefined,
        redirect: "manual",
        signal: AbortSignal.any([req.signal, replaced]),
        ...(this.#client === null ? {} : { client: this.#client }),
      });
      const answer = new Headers(res.headers);
      answer.set(LEADER_HEADER, leaderUrl);
      return new Response(res.body, { status: res.status, headers: answer });
    } catch (e) {
      if (req.signal.aborted) return new Response(null, { status: 499 });
      if (replaced.aborted) {
        // The leader changed while this was in flight: the client may send it again.
        return Response.json({
          error: {
            code: "not_leader",
            message: `the leader at ${leaderUrl} was replaced while this request was forwarded`,
            path: null,
            leader: view.leaderUrl(),
          },
        }, { status: 503 });
      }
      this.#log(`follower: cannot reach the leader at ${leaderUrl}: ${errorMessage(e)}`);
      return null;
    }
  }
}
