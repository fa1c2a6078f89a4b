/**
 * The agent's engine compile and JIT cache directories
 * (`<state>/engine_cache/<engine>/<key>`, engines/compile_cache.ts), kept
 * from growing forever (issue #25 item 7): each engine start records its
 * directory's last use, and a sweep evicts what engine_cache_plan.ts says
 * (a key whose model revision left the model cache; under disk pressure,
 * keys of engines no longer installed, then least recently used), never a
 * directory a shard uses or is about to use. Sweeps run one at a time: at
 * every engine start, after every model eviction and once at agent start
 * (agent/agent_supervisor.ts). Each eviction is a log line and an event.
 *
 * @module
 */
import type { DesiredShard } from "../../protocol/agent_protocol.ts";
import type { DesiredLaunch } from "../../engines/types.ts";
import { compileCacheDir, compileCacheKeyInput } from "../../engines/compile_cache.ts";
import type { Clock } from "../../time/clock.ts";
import type { Logger } from "../../log/log.ts";
import { errorMessage } from "../../text/error_message.ts";
import { type CacheFs, denoCacheFs } from "../model_cache/cache_fs.ts";
import type { Watermarks } from "../model_cache/eviction_plan.ts";
import {
  type EngineCacheEntry,
  type EngineCacheEviction,
  type EngineCacheView,
  planEngineCacheEviction,
} from "./engine_cache_plan.ts";
import { formatRecord, parseRecord, RECORD_FILE } from "./engine_cache_record.ts";
import { treeBytes } from "./tree_bytes.ts";

/** One evicted directory, as the event and the log line carry it. */
export interface EngineCacheEvicted {
  engine: string;
  /** The directory's name (its key). */
  key: string;
  /** The key's model and commit; null when the directory had no record. */
  model: string | null;
  revision: string | null;
  /** Bytes freed. */
  bytes: number;
  cause: EngineCacheEviction["cause"];
  /** Why, in words. */
  reason: string;
}

/** What an {@link EngineCacheKeeper} works with. */
export interface EngineCacheKeeperOptions {
  /** `<state>/engine_cache`. */
  root: string;
  /** Shards this host runs, starts or stops now: their directories stay. */
  inUse: () => readonly DesiredShard<DesiredLaunch>[];
  /** Revisions (`repo@commit`) the model cache holds; absent without a model cache. */
  held?: () => Promise<ReadonlySet<string>>;
  /** Engine name → installed version; null until known. */
  installed: () => Readonly<Record<string, string>> | null;
  /** The model cache's watermarks (the defaults without one). */
  marks: Watermarks;
  /** Stamps last use. */
  clock: Clock;
  /** Where evictions and failed sweeps go. */
  log: Logger;
  /** Each eviction, besides its log line. */
  onEvicted?: (e: EngineCacheEvicted) => void;
  /** The file system (tests: one with a chosen disk usage). */
  fs?: CacheFs;
  /** Bytes under a directory (default: a bounded walk, tree_bytes.ts). */
  bytes?: (dir: string) => Promise<number>;
}

/** Keeps one host's engine cache directories. */
export class EngineCacheKeeper {
  readonly #o: EngineCacheKeeperOptions;
  readonly #fs: CacheFs;
  /** Directories being handed to a start right now. */
  readonly #starting = new Set<string>();
  #chain: Promise<unknown> = Promise.resolve();

  /** A keeper over `options.root`; nothing runs until {@link use} or {@link sweep}. */
  constructor(options: EngineCacheKeeperOptions) {
    this.#o = options;
    this.#fs = options.fs ?? denoCacheFs;
  }

  /**
   * The directory for a start of `engine` with `launch`: made 0700 (an
   * error here fails the start, as before), its last use recorded, then a
   * sweep that keeps it. A failed record or sweep is logged, never fatal.
   */
  async use(engine: string, launch: DesiredLaunch): Promise<string> {
    const key = compileCacheKeyInput(engine, launch);
    const dir = compileCacheDir(this.#o.root, key);
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    this.#starting.add(dir);
    const warn = (what: string, e: unknown) =>
      this.#o.log.warn(what, { dir, error: errorMessage(e) });
    try {
      const record = formatRecord({ key, last_used_ms: this.#o.clock.now() });
      await this.#fs.writeTextAtomic(`${dir}/${RECORD_FILE}`, record).catch((e) =>
        warn("cannot record the engine cache's use", e)
      );
      await this.sweep().catch((e) => warn("cannot sweep the engine cache", e));
    } finally {
      this.#starting.delete(dir);
    }
    return dir;
  }

  /** Evicts what the plan calls for, after any sweep already running; answers the evictions. */
  sweep(): Promise<EngineCacheEviction[]> {
    const run = this.#chain.then(() => this.#sweep());
    this.#chain = run.catch(() => {});
    return run;
  }

  #inUse(): Set<string> {
    const dirs = new Set(this.#starting);
    for (const s of this.#o.inUse()) {
      const key = compileCacheKeyInput(s.engine, s.launch);
      dirs.add(compileCacheDir(this.#o.root, key));
      // Keys had no commit before: an engine adopted across that upgrade still runs in that one.
      dirs.add(compileCacheDir(this.#o.root, { ...key, revision: null }));
    }
    return dirs;
  }

  async #sweep(): Promise<EngineCacheEviction[]> {
    const entries = await this.#entries();
    if (entries.length === 0) return [];
    const view: EngineCacheView = {
      inUse: this.#inUse(),
      held: this.#o.held === undefined ? null : await this.#o.held(),
      installed: this.#o.installed(),
      usage: await this.#fs.diskUsage(this.#o.root),
      marks: this.#o.marks,
    };
    const done: EngineCacheEviction[] = [];
    for (const ev of planEngineCacheEviction(entries, view)) {
      // Checked again: a start may have taken the directory meanwhile.
      if (this.#inUse().has(ev.entry.dir)) continue;
      await this.#fs.removeTree(ev.entry.dir);
      done.push(ev);
      this.#report(ev);
    }
    return done;
  }

  #report(ev: EngineCacheEviction): void {
    const { entry } = ev;
    const parts = entry.dir.split("/");
    const e: EngineCacheEvicted = {
      engine: entry.key?.engine ?? parts.at(-2) ?? "",
      key: parts.at(-1) ?? "",
      model: entry.key?.model ?? null,
      revision: entry.key?.revision ?? null,
      bytes: entry.bytes,
      cause: ev.cause,
      reason: ev.reason,
    };
    this.#o.log.info("engine cache evicted", { ...e });
    try {
      this.#o.onEvicted?.(e);
    } catch {
      // An observer's bug must not stop a sweep.
    }
  }

  /** Every key directory under the root, with its record, size and last use. */
  async #entries(): Promise<EngineCacheEntry[]> {
    const fs = this.#fs;
    const bytes = this.#o.bytes ?? treeBytes;
    const out: EngineCacheEntry[] = [];
    for (const engine of await fs.readDir(this.#o.root)) {
      if (!engine.isDirectory) continue;
      const engineDir = `${this.#o.root}/${engine.name}`;
      for (const k of await fs.readDir(engineDir)) {
        if (!k.isDirectory) continue;
        const dir = `${engineDir}/${k.name}`;
        const text = await fs.readText(`${dir}/${RECORD_FILE}`);
        const record = text === null ? null : parseRecord(text);
        out.push({
          dir,
          key: record?.key ?? null,
          bytes: await bytes(dir),
          lastUsedMs: record?.last_used_ms ?? (await fs.lstat(dir))?.mtimeMs ?? 0,
        });
      }
    }
    return out;
  }
}
