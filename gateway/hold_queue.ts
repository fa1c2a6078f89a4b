/**
 * Holding requests whose model's every replica sits behind a down engine
 * proxy (design §12, docs/gateway.md): an agent restarting takes seconds,
 * and its engines never stopped, so the request waits for the proxy to come
 * back rather than failing. Bounded twice: each request waits at most
 * `holdMs` in all, and at most `maxHeld` requests wait at once (the next
 * ones are answered at once, as if the wait had run out).
 *
 * @module
 */
import type { ProxyHealth } from "./proxy_health.ts";

/** Settings of {@link HoldQueue}. */
export interface HoldSettings {
  /**
   * The longest a request is held, in all, in ms (default 30 000, above a
   * stopping agent's drain, agent/agent_listeners.ts; 0 holds nothing).
   */
  holdMs?: number;
  /** How many requests may be held at once (default 1 024). */
  maxHeld?: number;
  /** How often a held request tries its replicas again, in ms (default 250). */
  retryMs?: number;
  /** Clock in ms (tests inject one). Default `performance.now`. */
  now?: () => number;
}

/** How one wait ended. */
export type HoldResult = "retry" | "expired" | "full" | "aborted";

/** The gateway's held requests: a bounded count, each for a bounded time. */
export class HoldQueue {
  /** The longest a request is held, in ms. */
  readonly holdMs: number;
  readonly #maxHeld: number;
  readonly #retryMs: number;
  readonly #now: () => number;
  #held = 0;

  readonly #onHeld: (count: number) => void;

  /** Creates an empty queue; `onHeld` hears the count of held requests as it changes. */
  constructor(settings: HoldSettings = {}, onHeld: (count: number) => void = () => {}) {
    this.#onHeld = onHeld;
    this.holdMs = settings.holdMs ?? 30_000;
    this.#maxHeld = settings.maxHeld ?? 1_024;
    this.#retryMs = settings.retryMs ?? 250;
    this.#now = settings.now ?? (() => performance.now());
  }

  /** Requests waiting now. */
  get held(): number {
    return this.#held;
  }

  /** The deadline of a hold starting now. */
  deadline(): number {
    return this.#now() + this.holdMs;
  }

  /**
   * Waits until a down proxy answers again, `retryMs` pass, or `deadline`
   * comes, whichever is first: "retry" then. "expired" when the deadline has
   * passed, "full" when `maxHeld` requests wait already, "aborted" when the
   * client went away.
   */
  async wait(deadline: number, health: ProxyHealth, signal?: AbortSignal): Promise<HoldResult> {
    if (signal?.aborted) return "aborted";
    const left = deadline - this.#now();
    if (left <= 0) return "expired";
    if (this.#held >= this.#maxHeld) return "full";
    this.#onHeld(++this.#held);
    try {
      await health.changed(Math.min(left, this.#retryMs), signal);
    } finally {
      this.#onHeld(--this.#held);
    }
    return signal?.aborted ? "aborted" : "retry";
  }
}
