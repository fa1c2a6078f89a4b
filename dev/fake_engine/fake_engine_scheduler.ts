/**
 * The fake engine's request accounting (dev/fake_engine/fake_engine.ts): requests
 * beyond the slots wait in a queue, and the counters behind `/metrics`.
 *
 * @module
 */

import { EngineLoad, type PrefixCacheSettings } from "./fake_prefix_cache.ts";

/** In-flight requests and counters, behind /metrics; who runs and who waits is {@link EngineLoad}'s. */
export class Scheduler {
  /** Completions finished. */
  completed = 0;
  /** Prompt tokens of the finished completions. */
  prompt_tokens = 0;
  /** Tokens generated. */
  generation_tokens = 0;
  /** Who runs and who waits. */
  readonly load: EngineLoad;
  #wake = new Map<number, () => void>();
  /**
   * `max`: requests that may run at once; `pool`: the prefix cache's KV pool,
   * which running requests' blocks must fit; null without one.
   */
  constructor(readonly max: number, pool: PrefixCacheSettings | null) {
    this.load = new EngineLoad(max, pool);
  }

  /** Requests running. */
  get running(): number {
    return this.load.running;
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.load.waiting;
  }

  /** Waits for a slot for a request holding `tokens` (counted as waiting meanwhile); returns its ticket. */
  async acquire(tokens: number): Promise<number> {
    const ticket = this.load.arrive(tokens);
    if (!this.load.isRunning(ticket)) {
      await new Promise<void>((resolve) => this.#wake.set(ticket, resolve));
    }
    return ticket;
  }

  /** Ends a request, handing its slot to the waiters that now fit. */
  release(ticket: number): void {
    for (const next of this.load.finish(ticket)) {
      this.#wake.get(next)!();
      this.#wake.delete(next);
    }
  }
}
