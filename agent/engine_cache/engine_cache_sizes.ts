/**
 * The sizes of engine cache directories, walked only when a sweep needs
 * them (agent/engine_cache/engine_cache_keeper.ts) and remembered: a
 * directory no engine uses does not change until a start uses it again,
 * which rewrites its record's last use. So a sweep under pressure that the
 * caches cannot relieve walks each directory once, not at every start.
 * Each walk is bounded (tree_bytes.ts, {@link WALK_MS}); a sweep stops
 * sizing after {@link SIZING_MS} and the next one goes on from what is
 * remembered. Only whole sizes are remembered: a walk cut short is walked
 * again by the next sweep.
 *
 * @module
 */
import type { Clock } from "../../time/clock.ts";
import type { EngineCacheEntry, SizedEntry } from "./engine_cache_plan.ts";
import { type TreeBytes, treeBytes } from "./tree_bytes.ts";

/** Longest walk of one directory; what lies beyond is not counted. */
export const WALK_MS = 10_000;
/** Longest a sweep spends walking directories to find enough to free. */
export const SIZING_MS = 60_000;

/** Bytes under `dir`, counted until the clock passes `stopAtMs` or `signal` is aborted. */
export type DirBytes = (dir: string, stopAtMs: number, signal?: AbortSignal) => Promise<TreeBytes>;

/** Remembered sizes of one root's directories. */
export class EngineCacheSizes {
  readonly #clock: Clock;
  readonly #bytes: DirBytes;
  readonly #signal: AbortSignal | undefined;
  readonly #known = new Map<string, { lastUsedMs: number; size: TreeBytes }>();

  /**
   * Sizes walked with `bytes` (default: tree_bytes.ts), timed on `clock`;
   * once `signal` is aborted (the keeper closed), a walk stops between two
   * entries and no further one begins.
   */
  constructor(clock: Clock, bytes?: DirBytes, signal?: AbortSignal) {
    this.#clock = clock;
    this.#signal = signal;
    this.#bytes = bytes ??
      ((dir, stopAtMs, signal) => treeBytes(dir, { now: () => clock.now(), stopAtMs }, signal));
  }

  /**
   * `e` with its bytes: remembered while its last use is the same, else
   * walked. A walk cut short is not remembered: the next sweep walks the
   * directory again, since the biggest trees are the ones cut short and
   * remembering their lower bound would keep them looking small.
   */
  async size(e: EngineCacheEntry): Promise<SizedEntry> {
    const known = this.#known.get(e.dir);
    if (known !== undefined && known.lastUsedMs === e.lastUsedMs) return { ...e, ...known.size };
    const size = await this.#bytes(e.dir, this.#clock.now() + WALK_MS, this.#signal);
    if (size.complete) this.#known.set(e.dir, { lastUsedMs: e.lastUsedMs, size });
    else this.#known.delete(e.dir);
    return { ...e, ...size };
  }

  /**
   * `ordered` sized in order until their bytes reach `enough`, all of them
   * are sized, {@link SIZING_MS} has passed or the signal is aborted.
   */
  async prefix(ordered: readonly EngineCacheEntry[], enough: number): Promise<SizedEntry[]> {
    const stopAt = this.#clock.now() + SIZING_MS;
    const out: SizedEntry[] = [];
    let sum = 0;
    for (const e of ordered) {
      if (sum >= enough || this.#clock.now() > stopAt || this.#signal?.aborted) break;
      const s = await this.size(e);
      out.push(s);
      sum += s.bytes;
    }
    return out;
  }

  /** Forgets every directory but `present` (evicted or removed by hand). */
  keepOnly(present: ReadonlySet<string>): void {
    for (const dir of this.#known.keys()) if (!present.has(dir)) this.#known.delete(dir);
  }
}
