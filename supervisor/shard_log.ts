/**
 * A shard's log as the supervisor sees it (design §9.4): the engine's log
 * file followed into a bounded in-memory tail, rotated by copy-and-truncate
 * when large, with secrets scrubbed before any line is kept. Each complete
 * line is handed on once, for progress parsing.
 *
 * @module
 */
import { narrowToOwner } from "../http/secret_file.ts";
import { LogFollower, rotateIfLarge } from "./log_file.ts";
import { LogTail, type LogTailLimits } from "./log_tail.ts";
import { isProbeLine } from "./probe_lines.ts";

/** How a shard's log is kept. */
export interface ShardLogOptions {
  /** The in-memory tail's limits. */
  tailLimits: LogTailLimits;
  /** Rotate the file past this size. */
  maxBytes: number;
  /** Rotated files kept. */
  keep: number;
  /** Removes secrets from text before it is kept (the engine's key). */
  scrub: (text: string) => string;
  /** Each complete line, once, after scrubbing. */
  onLine: (line: string) => void;
}

/** One shard's log: the file followed, the tail kept. */
export class ShardLog {
  readonly #o: ShardLogOptions;
  readonly #tail: LogTail;
  #follower: LogFollower | null = null;

  /** Creates the log with an empty tail, following nothing yet. */
  constructor(options: ShardLogOptions) {
    this.#o = options;
    // llmgw's own probes would crowd out what the engine says; the file keeps them.
    this.#tail = new LogTail(options.tailLimits, isProbeLine);
  }

  /** Follows `path` from byte `offset` on (a new run's file, or an adopted one's recent past). */
  follow(path: string, offset: number): void {
    this.#follower = new LogFollower(path, offset);
  }

  /** Follows `path` from its current end, creating it empty when missing (a new run). */
  followFromEnd(path: string): void {
    let size = 0;
    try {
      size = Deno.statSync(path).size;
    } catch {
      Deno.writeTextFileSync(path, "", { mode: 0o600 });
    }
    this.#ownerOnly(path);
    this.follow(path, size);
  }

  /**
   * Follows an adopted run's `path`: the tail filled with its last `bytes`
   * (the recent past a previous agent showed), then what it writes next.
   */
  followRecent(path: string, bytes: number): void {
    let size = 0;
    try {
      size = Deno.statSync(path).size;
    } catch {
      // No log: nothing to show.
    }
    this.#ownerOnly(path);
    this.follow(path, Math.max(0, size - bytes));
    this.read();
  }

  /**
   * The log and its rotated copies owner-only (0600), an older agent's too:
   * SGLang prints its key there. One that cannot be narrowed sits in the
   * shard's directory, which is owner-only or warned about (shard_dir.ts).
   */
  #ownerOnly(path: string): void {
    narrowToOwner(path);
    for (let i = 1; i <= this.#o.keep; i++) narrowToOwner(`${path}.${i}`);
  }

  /** Reads what the file gained since the last read into the tail. */
  read(): void {
    this.#push(this.#follower?.read() ?? "");
  }

  /**
   * Rotates the file when large: drains it first, then follows the truncated
   * file from its start. Returns the path when it rotated.
   */
  rotate(): string | null {
    const follower = this.#follower;
    if (follower === null) return null;
    this.read();
    const offset = follower.offset;
    if (!rotateIfLarge(follower.path, this.#o.maxBytes, this.#o.keep)) return null;
    // What was written between our read and the copy is in the copy.
    if (this.#o.keep >= 1) this.#push(new LogFollower(`${follower.path}.1`, offset).read());
    follower.restart();
    return follower.path;
  }

  /** The last `n` kept lines. */
  last(n: number): string[] {
    return this.#tail.last(n);
  }

  /**
   * The whole tail with its position in the log (LogTail.window), and how
   * many probe lines it left out (supervisor/probe_lines.ts).
   */
  window(): { log_id: string; first: number; lines: string[]; probe_lines_hidden: number } {
    return { ...this.#tail.window(Number.MAX_SAFE_INTEGER), probe_lines_hidden: this.#tail.hidden };
  }

  #push(raw: string): void {
    if (raw === "") return;
    for (const line of this.#tail.push(this.#o.scrub(raw))) this.#o.onLine(line);
  }
}
