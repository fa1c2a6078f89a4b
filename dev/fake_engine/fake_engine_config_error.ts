/**
 * The fake engine's configuration refusals (dev/fake_engine/fake_engine.ts):
 * what the real engine refuses after parsing its arguments, as an uncaught
 * Python exception.
 *
 * @module
 */

/**
 * Rejects a configuration the real engine would reject after parsing (exit
 * 1, not 2): an uncaught Python exception, printed as its traceback's last
 * line, `TYPE: MESSAGE`.
 */
export class ConfigError extends Error {
  /** The Python exception's class name. */
  readonly type: string;
  /** Lines the engine logs before the traceback. */
  readonly before: readonly string[];
  /** `message` names the setting and the value refused. */
  constructor(message: string, type = "ValueError", before: readonly string[] = []) {
    super(message);
    this.name = "ConfigError";
    this.type = type;
    this.before = before;
  }

  /** What Python writes to stderr (the frames left out: readers match the last line). */
  render(): string {
    return [...this.before, "Traceback (most recent call last):", `${this.type}: ${this.message}`]
      .join("\n") + "\n";
  }
}
