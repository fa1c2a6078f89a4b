/**
 * The sizes of engine cache directories, walked only when a sweep needs
 * them (agent/engine_cache/engine_cache_keeper.ts) and remembered: a
 * directory no engine uses does not change until a start uses it again,
 * which rewrites its record's last use. So a sweep under pressure that the
 * caches cannot relieve walks each directory once, not at every start.
 * Each walk is bounded (tree_bytes.ts, {@link WALK_MS}); a sweep stops
 * sizing after {@link SIZING_MS} and the next one goes on from what is
 * remembered.
 *
 * @module
 */
import type { Clock } from "../../time/clock.ts";
import type { EngineCacheEntry, SizedEntry } from "./engine_cache_plan.ts";
import { treeBytes } from "./tree_bytes.ts";

/** Longest walk of one directory; what lies beyond is not counted. */
export const WALK_MS = 10_000;
/** Longest a sweep spends walking directories to find enough to free. */
export const SIZING_MS = 60_000;

/** Bytes under `dir`, counted until the clock passes `stopAtMs`. */
export type DirBytes = (dir: string, stopAtMs: number) => Promise<number>;

/** Remembered sizes of one root's directories. */
export class EngineCacheSizes {
  readonly #clock: Clock;
  readonly #bytes: DirBytes;
  readonly #known = new Map<string, { lastUsedMs: number; bytes: number }>();

  /** Sizes walked with `bytes` (default: tree_bytes.ts), timed on `clock`. */
  constructor(clock: Clock, bytes?: DirBytes) {
    this.#clock = clock;
    this.#bytes = bytes ??
      ((dir, stopAtMs) => treeBytes(dir, { now: () => clock.now(), stopAtMs }));
  }

  /** `e` with its bytes: remembered while its last use is the same, else walked. */
  async size(e: EngineCacheEntry): Promise<SizedEntry> {
    const known = this.#known.get(e.dir);
    if (known !== undefined && known.lastUsedMs === e.lastUsedMs) {
      return { ...e, bytes: known.bytes };
    }
    const bytes = await this.#bytes(e.dir, this.#clock.now() + WALK_MS);
    this.#known.set(e.dir, { lastUsedMs: e.lastUsedMs, bytes });
    return { ...e, bytes };
  }

  /**
   * `ordered` sized in order until their bytes reach `enough`, all of them
   * are sized, {@link SIZING_MS} has passed or `stop()` says so.
   */
  async prefix(
    ordered: readonly EngineCacheEntry[],
    enough: number,
    stop: () => boolean = () => false,
  ): Promise<SizedEntry[]> {
    const stopAt = this.#clock.now() + SIZING_MS;
    const out: SizedEntry[] = [];
    let sum = 0;
    for (const e of ordered) {
      if (sum >= enough || this.#clock.now() > stopAt || stop()) break;
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
