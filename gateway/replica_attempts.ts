/**
 * Which replica one request tries next, and when it waits instead (design
 * §12, docs/gateway.md):
 * - a failure before any response byte (no connection, a connection closed
 *   before the head, or a refusal the engine proxy made itself) tries another
 *   replica, at most `maxRetries` more per round;
 * - a refused connection marks that node's engine proxy down
 *   (gateway/proxy_health.ts), so later requests skip every replica behind
 *   it while another replica of the model is up;
 * - when every replica of the model failed behind an engine proxy (its
 *   agent is restarting; the engines run on), the request is held
 *   (gateway/hold_queue.ts) and tries them all again as they come back;
 *   when the hold runs out it is a 503 with `Retry-After`;
 * - a replica reached directly (no proxy) that fails ends the request with a
 *   502, as before: nothing suggests it comes back soon.
 *
 * Nothing here sees a response byte: once an engine answered, the caller
 * never asks for another attempt.
 *
 * @module
 */
import type { Endpoint, EndpointTable } from "./endpoints.ts";
import { HoldQueue, type HoldResult, type HoldSettings } from "./hold_queue.ts";
import {
  clientClosed,
  modelNotReady,
  replicaUnreachable,
  upstreamUnreachable,
} from "./refusals.ts";
import { ProxyHealth } from "./proxy_health.ts";
import { UpstreamConnectFailed } from "./upstream_client.ts";
import { errorMessage } from "../text/error_message.ts";

/** Rounds of tries one request makes at most, whatever its hold: a bound in count beside the one in time. */
const MAX_ROUNDS = 200;

/** The gateway's settings of attempts (part of its options). */
export interface AttemptOptions {
  /** Further endpoints tried after a connection failure (default 2). */
  maxRetries?: number;
  /** How requests wait while every replica of their model is behind a down engine proxy. */
  hold?: HoldSettings;
  /** The engine proxies' down marks (a fresh table by default). */
  proxyHealth?: ProxyHealth;
}

/**
 * The policy a gateway's requests share, from its options and its
 * `Retry-After` seconds; `onHeld` hears how many requests are held.
 */
export function attemptPolicy(
  options: AttemptOptions,
  retryAfter: string,
  onHeld?: (count: number) => void,
): AttemptPolicy {
  return {
    maxRetries: options.maxRetries ?? 2,
    retryAfter,
    health: options.proxyHealth ?? new ProxyHealth(),
    holds: new HoldQueue(options.hold, onHeld),
  };
}

/** What every request's attempts share. */
export interface AttemptPolicy {
  /** Further endpoints tried per round after a failure. */
  maxRetries: number;
  /** The engine proxies' down marks. */
  health: ProxyHealth;
  /** Where requests wait for a proxy to come back. */
  holds: HoldQueue;
  /** `Retry-After` seconds of the final 503. */
  retryAfter: string;
}

/** One request's attempts at the replicas of its model. */
export class ReplicaAttempts {
  readonly #table: EndpointTable;
  readonly #model: string;
  readonly #affinity: string | null;
  readonly #policy: AttemptPolicy;
  readonly #tried = new Set<string>();
  #inRound = 0;
  #rounds = 1;
  /** Whether every failure of this round was behind an engine proxy: then the request may wait. */
  #holdable = true;
  #deadline: number | null = null;
  #ended: HoldResult | null = null;
  #lastError = "";

  /** Attempts for a request for `model`, with its affinity key (or null). */
  constructor(
    table: EndpointTable,
    model: string,
    affinity: string | null,
    policy: AttemptPolicy,
  ) {
    this.#table = table;
    this.#model = model;
    this.#affinity = affinity;
    this.#policy = policy;
  }

  /**
   * The next endpoint to try, waiting first when every one failed behind a
   * down proxy; null when there is none left to try (then {@link giveUp}).
   */
  async next(signal?: AbortSignal): Promise<Endpoint | null> {
    const { maxRetries, holds, health } = this.#policy;
    for (;;) {
      const e = this.#inRound <= maxRetries ? this.#choose() : null;
      if (e !== null) {
        this.#tried.add(e.key);
        this.#inRound++;
        return e;
      }
      if (!this.#holdable || this.#tried.size === 0 || this.#rounds >= MAX_ROUNDS) return null;
      this.#deadline ??= holds.deadline();
      const r = await holds.wait(this.#deadline, health, signal);
      if (r !== "retry") {
        this.#ended = r;
        return null;
      }
      this.#tried.clear();
      this.#inRound = 0;
      this.#rounds++;
    }
  }

  /**
   * Records that `e` failed, with the error or reason, and marks it suspect
   * in the table; a refused connection marks its proxy down too. Returns the
   * reason's text when `e` was not suspect yet, else null: one log line per
   * endpoint until its mark clears, whatever held requests retry it.
   */
  failed(e: Endpoint, why: unknown): string | null {
    this.#lastError = errorMessage(why);
    if (e.shard === undefined) this.#holdable = false;
    else if (why instanceof UpstreamConnectFailed) this.#policy.health.markDown(e.url);
    const news = e.suspectSince === null;
    this.#table.markSuspect(e);
    return news ? this.#lastError : null;
  }

  /** The last failure's reason ("" before any). */
  get lastError(): string {
    return this.#lastError;
  }

  /** Records that `e`'s node answered: its proxy is up. */
  answered(e: Endpoint): void {
    this.#policy.health.markUp(e.url);
  }

  /**
   * The answer when no replica answered: 499 when the client left; 503 with
   * `Retry-After` when every replica was behind a down proxy (held first),
   * or when none is left in the table; else 502.
   */
  giveUp(signal?: AbortSignal): Response {
    const model = this.#model;
    if (signal?.aborted || this.#ended === "aborted") return clientClosed();
    const { retryAfter } = this.#policy;
    if (this.#table.endpoints(model).length === 0) return modelNotReady(model, retryAfter);
    if (this.#holdable) {
      const seconds = this.#policy.holds.holdMs / 1000;
      const held = this.#ended === "full"
        ? "the gateway holds as many requests as it may already"
        : `none came back within ${seconds} s`;
      return replicaUnreachable(model, held, retryAfter);
    }
    return upstreamUnreachable(model, this.#lastError, retryAfter);
  }

  /** The next endpoint of this round: not tried yet, and not behind a down proxy while another is up. */
  #choose(): Endpoint | null {
    const { health } = this.#policy;
    let exclude: ReadonlySet<string> = this.#tried;
    if (health.anyDown) {
      const open = this.#table.endpoints(this.#model).filter((e) => !this.#tried.has(e.key));
      const down = open.filter((e) => e.shard !== undefined && health.isDown(e.url));
      if (down.length > 0 && down.length < open.length) {
        exclude = new Set([...this.#tried, ...down.map((e) => e.key)]);
      }
    }
    return this.#table.choose(this.#model, exclude, this.#affinity);
  }
}
