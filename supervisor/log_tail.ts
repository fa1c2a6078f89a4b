/**
 * A bounded in-memory log tail (design §9.4): the last lines of a shard's
 * output, kept within a line count and a byte budget, since engine output is
 * the only diagnosis when loading fails and a flood must not eat memory.
 *
 * @module
 */

/** Limits of a {@link LogTail}. */
export interface LogTailLimits {
  /** Most lines kept. */
  maxLines: number;
  /** Most bytes (UTF-16 code units, close enough for a budget) kept over all lines. */
  maxBytes: number;
}

/** The default: 200 lines, 64 KiB. */
export const DEFAULT_TAIL_LIMITS: LogTailLimits = { maxLines: 200, maxBytes: 64 * 1024 };

/**
 * Keeps the last lines of a stream. Text arrives in chunks that may split
 * lines; `\r` ends a line too, because tqdm progress bars (engines' loading
 * progress) redraw with carriage returns.
 */
export class LogTail {
  /**
   * This tail's identity: positions count from its first line, so a reader
   * that sees another id knows the log began again (a new agent process).
   */
  readonly id: string = crypto.randomUUID();
  readonly #limits: LogTailLimits;
  #lines: string[] = [];
  #bytes = 0;
  #partial = "";
  #dropped = 0;
  readonly #hide: (line: string) => boolean;
  #hidden = 0;

  /**
   * Creates an empty tail. Lines `hide` picks are counted, not kept
   * (supervisor/probe_lines.ts); they take no position in the log.
   */
  constructor(
    limits: LogTailLimits = DEFAULT_TAIL_LIMITS,
    hide: (line: string) => boolean = () => false,
  ) {
    if (limits.maxLines < 1 || limits.maxBytes < 1) {
      throw new RangeError("Cannot create log tail: limits must be positive");
    }
    this.#limits = limits;
    this.#hide = hide;
  }

  /** Appends a chunk; returns the complete lines it finished, for parsing. */
  push(chunk: string): string[] {
    const parts = (this.#partial + chunk).split(/\r\n|\r|\n/);
    this.#partial = parts.pop() ?? "";
    // A line that never ends must not grow without bound either.
    if (this.#partial.length > this.#limits.maxBytes) {
      parts.push(this.#partial);
      this.#partial = "";
    }
    const done = parts.filter((l) => l !== "");
    for (const line of done) {
      if (this.#hide(line)) this.#hidden++;
      else this.#add(line);
    }
    return done;
  }

  #add(raw: string): void {
    const line = raw.length > this.#limits.maxBytes
      ? `${raw.slice(0, this.#limits.maxBytes - 20)}… [${raw.length} chars]`
      : raw;
    this.#lines.push(line);
    this.#bytes += line.length;
    while (this.#lines.length > this.#limits.maxLines || this.#bytes > this.#limits.maxBytes) {
      this.#bytes -= this.#lines.shift()!.length;
      this.#dropped++;
    }
  }

  /** The kept lines, oldest first (a copy). */
  lines(): string[] {
    return [...this.#lines];
  }

  /** The last `n` kept lines. */
  last(n: number): string[] {
    return this.#lines.slice(-n);
  }

  /**
   * The last `n` kept lines and the position of the first of them: line k of
   * the log (0-based, since the tail was made) stays line k however many
   * lines are dropped later.
   */
  window(n: number): { log_id: string; first: number; lines: string[] } {
    const lines = this.#lines.slice(-n);
    return { log_id: this.id, first: this.#dropped + this.#lines.length - lines.length, lines };
  }

  /** How many lines were hidden (counted, not kept) since the tail was made. */
  get hidden(): number {
    return this.#hidden;
  }

  /** How many lines were dropped to stay within the limits. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Bytes currently kept. */
  get bytes(): number {
    return this.#bytes;
  }
}
