/**
 * How many chunks the agent fetches at once, across every download: a
 * counting semaphore, so two snapshots downloading together share the
 * agent's N connections rather than doubling them.
 *
 * @module
 */

/** At most `size` holders at a time; waiters are served in arrival order. */
export class ChunkSlots {
  #free: number;
  readonly #waiters: { grant: () => void; signal?: AbortSignal; drop: () => void }[] = [];

  /** `size` slots (at least 1). */
  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) {
      throw new RangeError(`Cannot fetch ${size} chunks at once: expected an integer ≥ 1`);
    }
    this.#free = size;
  }

  /** Resolves with a release function once a slot is free; rejects when `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        signal,
        grant: () => {
          signal?.removeEventListener("abort", waiter.drop);
          resolve(this.#releaser());
        },
        drop: () => {
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener("abort", waiter.drop, { once: true });
      this.#waiters.push(waiter);
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next) next.grant();
      else this.#free++;
    };
  }
}
