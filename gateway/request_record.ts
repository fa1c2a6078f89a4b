/**
 * One request's record (design §12): what it came to, how long it took, its
 * time to first byte, the replica attempts it made (each in flight from
 * dispatch until it ends) and the tokens its engine reported, each counted
 * exactly once whichever way the request ends: refused, retried, answered
 * whole or relayed. The proxy's steps report to it instead of counting at
 * each exit.
 *
 * O(1) per request: nothing here runs per chunk of a relayed body.
 *
 * @module
 */
import type { GatewayMetrics, Outcome } from "./metrics.ts";
import type { TokenUsage } from "./usage.ts";

/** The outcome an answer's status stands for, when nothing more precise is known. */
export function outcomeOf(status: number): Outcome {
  if (status < 400) return "ok";
  if (status === 401 || status === 403) return "unauthorized";
  if (status === 404) return "model_not_found";
  if (status === 503) return "no_ready_replica";
  if (status === 502) return "upstream_unreachable";
  if (status === 499) return "client_closed";
  return status < 500 ? "bad_request" : "upstream_error";
}

/** An attempt in flight on one replica. */
interface OpenAttempt {
  readonly replica: string;
  /** Ends the endpoint table's count of it. */
  readonly release: () => void;
  readonly start: number;
}

/** The record of one request through the gateway. */
export class RequestRecord {
  readonly #metrics: GatewayMetrics;
  readonly #now: () => number;
  readonly #start: number;
  /** "" until the request names a deployed model: a client's made-up names never become labels. */
  #model = "";
  #apiKey = "none";
  #attempt: OpenAttempt | null = null;
  #deferred = false;
  #finished = false;

  /** Starts the record of a request arriving now; `now` is in ms (default `performance.now`). */
  constructor(metrics: GatewayMetrics, now: () => number = () => performance.now()) {
    this.#metrics = metrics;
    this.#now = now;
    this.#start = now();
  }

  /** Whether the request was counted already. */
  get finished(): boolean {
    return this.#finished;
  }

  /**
   * The request names a deployed model; its caller's key id is `apiKey`
   * ("none" on an open gateway). Its metrics carry the model from now on.
   */
  routed(model: string, apiKey: string): void {
    this.#model = model;
    this.#apiKey = apiKey;
  }

  /**
   * An attempt on `replica` starts: counted in flight until it ends;
   * `release` ends the endpoint table's count of it. An attempt still open
   * ends first, as a failure before any answer.
   */
  attempt(replica: string, release: () => void): void {
    this.attemptEnded("upstream_unreachable");
    this.#attempt = { replica, release, start: this.#now() };
    this.#metrics.inflight(this.#model, replica, 1);
  }

  /**
   * The open attempt ended with `outcome`: released, out of flight, counted
   * per replica. Nothing when none is open.
   */
  attemptEnded(outcome: Outcome): void {
    const a = this.#attempt;
    if (a === null) return;
    this.#attempt = null;
    a.release();
    this.#metrics.inflight(this.#model, a.replica, -1);
    this.#metrics.replicaRequest(this.#model, a.replica, outcome, (this.#now() - a.start) / 1000);
  }

  /** The first byte of the engine's body arrived (time to first token). */
  firstByte(): void {
    const a = this.#attempt;
    if (a === null || this.#finished) return;
    this.#metrics.firstToken(this.#model, a.replica, (this.#now() - this.#start) / 1000);
  }

  /** The answer ends later (a relayed body): {@link settle} leaves it to {@link finish}. */
  defer(): void {
    this.#deferred = true;
  }

  /**
   * The request ended with `outcome`: the open attempt ends with it, the
   * request is counted and the tokens its engine reported are added. Only
   * the first call counts.
   */
  finish(outcome: Outcome, usage: TokenUsage | null = null): void {
    if (this.#finished) return;
    this.#finished = true;
    this.attemptEnded(outcome);
    this.#metrics.request(this.#model, outcome, (this.#now() - this.#start) / 1000);
    if (usage !== null && this.#model !== "") {
      this.#metrics.tokens(this.#model, this.#apiKey, usage.prompt, usage.completion);
    }
  }

  /**
   * Counts `res` by its status, unless the request was counted already or its
   * body will count it when it ends; returns `res`.
   */
  settle(res: Response): Response {
    if (!this.#deferred) this.finish(outcomeOf(res.status));
    return res;
  }
}
