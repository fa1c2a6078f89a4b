/**
 * Which agents' engine proxies are down, as this gateway saw them (design
 * §12, docs/gateway.md). An agent that crashed or is restarting leaves its
 * engines running, but its proxy, the one door to them, refuses connections
 * for a few seconds. The first refused connection marks that proxy down for
 * every endpoint behind it (one node, any number of replicas), so the next
 * requests go to other nodes at once instead of each finding out by itself.
 *
 * A mark ends on the next answer from that proxy, or lapses after
 * `reprobeMs` so that one request tries it again (the re-probe); a refusal
 * marks it anew. Requests held because every replica of their model is
 * behind a down proxy wait on {@link ProxyHealth.changed}, which a proxy
 * coming back resolves.
 *
 * @module
 */

/** How old a down mark is forgotten, in ms. */
const FORGET_MS = 60_000;

/** Settings of {@link ProxyHealth}. */
export interface ProxyHealthOptions {
  /** Clock in ms (tests inject one). Default `performance.now`. */
  now?: () => number;
  /** How long a down mark keeps requests away when another replica exists, in ms (default 1 000). */
  reprobeMs?: number;
}

/** Down marks of engine proxies, by origin (`https://addr:port`). */
export class ProxyHealth {
  readonly #down = new Map<string, number>();
  readonly #waiters = new Set<() => void>();
  readonly #now: () => number;
  readonly #reprobeMs: number;
  #prunedAt = -Infinity;

  /** Creates a table with every proxy up. */
  constructor(options: ProxyHealthOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#reprobeMs = options.reprobeMs ?? 1_000;
  }

  /** Marks `origin` down: a connection to it could not be made. */
  markDown(origin: string): void {
    this.#down.set(origin, this.#now());
  }

  /** Marks `origin` up (it answered); wakes held requests when it was down. */
  markUp(origin: string): void {
    if (!this.#down.delete(origin)) return;
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
  }

  /** Whether requests should avoid `origin` now: marked down less than `reprobeMs` ago. */
  isDown(origin: string): boolean {
    const since = this.#down.get(origin);
    return since !== undefined && this.#now() - since < this.#reprobeMs;
  }

  /**
   * Whether any proxy is marked (a lapsed mark included): the common case,
   * none, costs nothing. Marks a minute old are forgotten here: a proxy still
   * down is marked again by its next refusal, and one that left the
   * endpoints (a removed node) would otherwise keep every request filtering.
   */
  get anyDown(): boolean {
    if (this.#down.size === 0) return false;
    const now = this.#now();
    if (now - this.#prunedAt >= FORGET_MS / 60) {
      this.#prunedAt = now;
      for (const [origin, since] of this.#down) {
        if (now - since >= FORGET_MS) this.#down.delete(origin);
      }
    }
    return this.#down.size > 0;
  }

  /** Origins marked down (lapsed marks included), for tests and logs. */
  downOrigins(): string[] {
    return [...this.#down.keys()].sort();
  }

  /**
   * Resolves when a down proxy answers again, after `ms`, or when `signal`
   * aborts, whichever comes first; never rejects.
   */
  changed(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener("abort", done, { once: true });
      this.#waiters.add(done);
    });
  }
}
