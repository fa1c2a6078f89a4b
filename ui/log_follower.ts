/**
 * Follows shards' logs for the replica page's SSE stream (docs/ui.md): one
 * poller per (replica, rank), however many pages watch it, asking the
 * agent through the control plane's {@link AgentLogs} at most every
 * {@link POLL_MS} while anyone watches, and numbering new lines with
 * log_resume.ts so a reconnecting page resumes by `Last-Event-ID`.
 *
 * @module
 */
import type { ShardLogs } from "../control/agent_logs.ts";
import { errorMessage } from "../control/errors.ts";
import { probeLinesNote } from "../supervisor/probe_lines.ts";
import { advance, emptyWindow, type LogLine, type LogWindow } from "./log_resume.ts";

/** How often a watched shard's agent is asked. */
export const POLL_MS = 500;

/** Lines asked for each time: the local API's largest answer is far larger; tails are 200 by default. */
export const POLL_LINES = 1_000;

/** Lines kept per shard for resuming readers. */
export const KEEP_LINES = 2_000;

/** Shards followed at once; the one unwatched longest is dropped first. */
export const MAX_FOLLOWED = 64;

/** What a watcher is told. */
export type LogNews =
  | { kind: "lines"; lines: LogLine[]; gap: boolean }
  | { kind: "status"; message: string };

/** Reads a shard's last lines: `cp.agentLogs.shard`. */
export type ShardReader = (
  replica: string,
  rank: number,
  lines: number,
) => Promise<ShardLogs>;

/** One followed shard. */
class Followed {
  window: LogWindow;
  readonly watchers = new Set<(n: LogNews) => void>();
  lastWatched = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #stopped = false;
  #status: string | null = null;

  constructor(
    readonly replica: string,
    readonly rank: number,
    readonly read: ShardReader,
    now: number,
  ) {
    this.window = emptyWindow(crypto.randomUUID().slice(0, 8));
    this.lastWatched = now;
  }

  /** Polls now and then every POLL_MS while watched; one request at a time. */
  run(): void {
    if (this.#timer !== null || this.#stopped) return;
    const tick = async () => {
      await this.poll();
      this.#timer = this.watchers.size > 0 && !this.#stopped ? setTimeout(tick, POLL_MS) : null;
    };
    this.#timer = setTimeout(tick, 0);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  async poll(): Promise<void> {
    let logs: ShardLogs;
    try {
      logs = await this.read(this.replica, this.rank, POLL_LINES);
    } catch (e) {
      this.#tell({ kind: "status", message: errorMessage(e) });
      return;
    }
    const position = logs.log_id === null || logs.first === null
      ? null
      : { log_id: logs.log_id, first: logs.first };
    const step = advance(this.window, logs.shard_id, logs.lines, KEEP_LINES, position);
    this.window = step.window;
    const note = probeLinesNote(logs.probe_lines_hidden);
    const status = `shard ${logs.shard_id} on ${logs.node}: ${logs.state}` +
      (note === "" ? "" : ` (${note})`);
    if (status !== this.#status) {
      this.#tell({ kind: "status", message: status });
    }
    if (step.added.length > 0) {
      this.#tell({ kind: "lines", lines: step.added, gap: step.gap });
    }
  }

  #tell(news: LogNews): void {
    if (news.kind === "status") this.#status = news.message;
    for (const w of this.watchers) w(news);
  }

  get status(): string | null {
    return this.#status;
  }
}

/** A watch on a shard's log. */
export interface LogWatch {
  /** The window now, for resuming. */
  window(): LogWindow;
  /** The last status line, or null before the first answer. */
  status(): string | null;
  /** Waits until the first poll has answered (lines or an error). */
  ready: Promise<void>;
  /** Stops watching. */
  close(): void;
}

/** Every followed shard of one control plane. */
export class LogFollowers {
  readonly #read: ShardReader;
  readonly #now: () => number;
  readonly #followed = new Map<string, Followed>();

  /** Creates the followers over a reader of shards' logs. */
  constructor(read: ShardReader, now: () => number = Date.now) {
    this.#read = read;
    this.#now = now;
  }

  /** Watches the log of the shard of `rank` of `replica`; news goes to `onNews`. */
  watch(replica: string, rank: number, onNews: (n: LogNews) => void): LogWatch {
    const key = `${replica}\u0000${rank}`;
    let f = this.#followed.get(key);
    if (f === undefined) {
      f = new Followed(replica, rank, this.#read, this.#now());
      this.#followed.set(key, f);
      this.#evict();
    }
    const followed = f;
    let first!: () => void;
    const ready = new Promise<void>((r) => first = r);
    const watcher = (n: LogNews) => {
      first();
      onNews(n);
    };
    // Already followed and answered: the window is current.
    if (followed.status !== null) first();
    followed.watchers.add(watcher);
    followed.lastWatched = this.#now();
    followed.run();
    return {
      window: () => followed.window,
      status: () => followed.status,
      ready,
      close: () => {
        followed.watchers.delete(watcher);
        followed.lastWatched = this.#now();
        first();
      },
    };
  }

  /** How many shards are followed (watched or kept for resuming). */
  get size(): number {
    return this.#followed.size;
  }

  /** Stops every poller. */
  close(): void {
    for (const f of this.#followed.values()) f.stop();
    this.#followed.clear();
  }

  #evict(): void {
    while (this.#followed.size > MAX_FOLLOWED) {
      const idle = [...this.#followed].filter(([, f]) => f.watchers.size === 0)
        .sort((a, b) => a[1].lastWatched - b[1].lastWatched)[0];
      if (idle === undefined) return;
      idle[1].stop();
      this.#followed.delete(idle[0]);
    }
  }
}
