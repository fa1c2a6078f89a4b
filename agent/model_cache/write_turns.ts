/**
 * One write at a time per file. The model cache writes a blob's chunks in
 * parallel, each through its own handle at its own offset; on Linux every
 * write to a file takes the inode's lock, and writers waiting for it spin
 * on the CPU while the holder copies. With pieces of 1 MiB, 8 parallel
 * writers of one part file spent 3.5 to 4.8 s of system CPU per GiB
 * against 0.5 to 1.6 s taking turns (docs/benchmarks.md "Peer route CPU
 * per GiB"): a write copies into the page cache at GB/s, so turns cost
 * the download nothing.
 *
 * @module
 */

/** Runs work in turns per key: never two at once for one key, in call order. */
export class WriteTurns {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `work` once every earlier work for `key` settled; its result. */
  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(key) ?? Promise.resolve();
    const turn = before.then(work);
    const tail = turn.then(() => {}, () => {});
    this.#tails.set(key, tail);
    // The last turn of a key removes it, so the map holds only files being written.
    tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return turn;
  }

  /** Keys with work queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
