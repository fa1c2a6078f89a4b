/**
 * The agent's engine compile and JIT cache directories
 * (`<state>/engine_cache/<engine>/<key>`, engines/compile_cache.ts), kept
 * from growing forever (issue #25 item 7): each engine start records its
 * directory's last use, and a sweep evicts what engine_cache_plan.ts says
 * (a key whose model revision left the model cache; under disk pressure
 * they can relieve, keys of engines no longer installed, then least
 * recently used), never a directory a shard uses or is about to use.
 * Sweeps run one at a time, queued and never awaited by an engine start or
 * a heartbeat: after every engine start, after every model eviction and
 * once at agent start (agent/agent_supervisor.ts). Each eviction is a log
 * line and an event; what a sweep evicts rides the next heartbeat. A sweep
 * walks only the directories it may evict (engine_cache_sizes.ts).
 *
 * @module
 */
import type { DesiredShard } from "../../protocol/agent_protocol.ts";
import type { DesiredLaunch } from "../../engines/types.ts";
import { compileCacheDir, compileCacheKeyInput } from "../../engines/compile_cache.ts";
import type { Clock } from "../../time/clock.ts";
import type { Logger } from "../../log/log.ts";
import { errorMessage } from "../../text/error_message.ts";
import { type CacheFs, denoCacheFs, type DiskUsage } from "../model_cache/cache_fs.ts";
import { formatBytes } from "../../text/bytes.ts";
import type { Watermarks } from "../model_cache/eviction_plan.ts";
import {
  atLowWatermark,
  type EngineCacheEntry,
  type EngineCacheEviction,
  planPressure,
  pressureNeed,
  pressureOrder,
  revisionEvictions,
} from "./engine_cache_plan.ts";
import { formatRecord, parseRecord, RECORD_FILE } from "./engine_cache_record.ts";
import { type DirBytes, EngineCacheSizes } from "./engine_cache_sizes.ts";
import type { TreeBytes } from "./tree_bytes.ts";

/**
 * How long a stopping agent waits for a sweep under way: its steps are file
 * system calls that take milliseconds on a healthy disk.
 */
export const CLOSE_WAIT_MS = 5_000;

/**
 * How long a start waits for a sweep removing its own directory, the same
 * bound as a stop's: past it the start goes on in a fresh directory.
 */
export const REMOVAL_WAIT_MS = CLOSE_WAIT_MS;

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
  /** True when the directory's walk was cut short: at least `bytes` were freed. */
  atLeast: boolean;
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
  bytes?: DirBytes;
  /** How long a start waits for the removal of its directory (default {@link REMOVAL_WAIT_MS}). */
  removalWaitMs?: number;
}

/** Keeps one host's engine cache directories. */
export class EngineCacheKeeper {
  readonly #o: EngineCacheKeeperOptions;
  readonly #fs: CacheFs;
  readonly #sizes: EngineCacheSizes;
  /**
   * Directories being handed to a start right now, with how many starts:
   * a sweep leaves them. Counted, since two replicas of one deployment on
   * this host share a key and the first to finish must not unguard the other.
   */
  readonly #starting = new Map<string, number>();
  /** Directories a sweep is removing now: a start of one waits for that, then makes it anew. */
  readonly #removing = new Map<string, Promise<void>>();
  #chain: Promise<unknown> = Promise.resolve();
  /** A sweep asked for and not begun yet: later asks join it. */
  #queued: Promise<EngineCacheEviction[]> | null = null;
  /** Aborted by {@link close}: a sweep stops at its next step, a walk between two entries. */
  readonly #stop = new AbortController();
  /** The last pressure the caches could not relieve, said once until it changes. */
  #said: string | null = null;
  /** Fresh directories made so far: part of their names. */
  #fresh = 0;

  /** A keeper over `options.root`; nothing runs until {@link use} or {@link sweep}. */
  constructor(options: EngineCacheKeeperOptions) {
    this.#o = options;
    this.#fs = options.fs ?? denoCacheFs;
    this.#sizes = new EngineCacheSizes(options.clock, options.bytes, this.#stop.signal);
  }

  get #closed(): boolean {
    return this.#stop.signal.aborted;
  }

  /**
   * The directory for a start of `engine` with `launch`: made 0700 (an
   * error here fails the start, as before) and its last use recorded; a
   * sweep is queued, not awaited. A failed record or sweep is logged, never
   * fatal. While a sweep removes that directory the start waits for it, at
   * most {@link REMOVAL_WAIT_MS}; then it goes on in a fresh directory
   * beside it (`<key>.fresh-…`, recorded with the same key: guarded while
   * the shard runs, evicted as any other after), and says so.
   */
  async use(engine: string, launch: DesiredLaunch): Promise<string> {
    const key = compileCacheKeyInput(engine, launch);
    let dir = compileCacheDir(this.#o.root, key);
    // Before any await: a sweep checks these right before it removes a directory.
    this.#guard(dir, 1);
    const warn = (what: string, e: unknown) =>
      this.#o.log.warn(what, { dir, error: errorMessage(e) });
    const guarded = [dir];
    try {
      const removal = this.#removing.get(dir);
      const waitMs = this.#o.removalWaitMs ?? REMOVAL_WAIT_MS;
      if (removal !== undefined && !(await settlesWithin(removal, waitMs))) {
        const fresh = `${dir}.fresh-${this.#o.clock.now()}-${++this.#fresh}`;
        this.#o.log.warn(
          "engine cache directory still being removed; this start compiles into a fresh one",
          { dir, fresh, waited_ms: waitMs },
        );
        dir = fresh;
        this.#guard(dir, 1);
        guarded.push(dir);
      }
      await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
      const record = formatRecord({ key, last_used_ms: this.#o.clock.now() });
      await this.#fs.writeTextAtomic(`${dir}/${RECORD_FILE}`, record).catch((e) =>
        warn("cannot record the engine cache's use", e)
      );
    } finally {
      for (const d of guarded) this.#guard(d, -1);
    }
    this.sweep().catch((e) => warn("cannot sweep the engine cache", e));
    return dir;
  }

  /** One start more (or less) is being handed `dir`. */
  #guard(dir: string, delta: 1 | -1): void {
    const left = (this.#starting.get(dir) ?? 0) + delta;
    if (left === 0) this.#starting.delete(dir);
    else this.#starting.set(dir, left);
  }

  /**
   * Evicts what the plan calls for, after any sweep already running (a
   * sweep asked for while another waits joins it); answers the evictions.
   */
  sweep(): Promise<EngineCacheEviction[]> {
    if (this.#closed) return Promise.resolve([]);
    if (this.#queued !== null) return this.#queued;
    const run = this.#chain.then(() => {
      this.#queued = null;
      return this.#closed ? [] : this.#sweep();
    });
    this.#queued = run;
    this.#chain = run.catch(() => {});
    return run;
  }

  /**
   * Stops sweeping: a sweep running ends at its next step (a walk under way
   * between two entries; a removal under way is one call and ends on its
   * own). Resolves once it has, or after `waitMs`: a file system call that
   * hangs (a dead NFS mount under the state dir) must not hold the agent's
   * stop forever, so the sweep is then left running, and logged.
   */
  async close(waitMs: number = CLOSE_WAIT_MS): Promise<void> {
    this.#stop.abort();
    if (!(await settlesWithin(this.#chain, waitMs))) {
      this.#o.log.warn("engine cache sweep still running at stop; not waiting for it", {
        root: this.#o.root,
        waited_ms: waitMs,
      });
    }
  }

  /** The directories of `entries` no sweep may remove now. */
  #inUse(entries: readonly EngineCacheEntry[]): Set<string> {
    const dirs = new Set(this.#starting.keys());
    for (const s of this.#o.inUse()) {
      const key = compileCacheKeyInput(s.engine, s.launch);
      dirs.add(compileCacheDir(this.#o.root, key));
      // Keys had no commit before: an engine adopted across that upgrade still runs in that one.
      dirs.add(compileCacheDir(this.#o.root, { ...key, revision: null }));
    }
    // A fresh directory (see use) is its key's while that key's shard runs.
    for (const e of entries) {
      if (e.key !== null && dirs.has(compileCacheDir(this.#o.root, e.key))) dirs.add(e.dir);
    }
    return dirs;
  }

  async #sweep(): Promise<EngineCacheEviction[]> {
    const entries = await this.#entries();
    this.#sizes.keepOnly(new Set(entries.map((e) => e.dir)));
    if (entries.length === 0) return [];
    const done: EngineCacheEviction[] = [];
    const held = this.#o.held === undefined ? null : await this.#o.held();
    for (const ev of revisionEvictions(entries, { inUse: this.#inUse(entries), held })) {
      // Closed: not one more walk (each may take WALK_MS).
      if (this.#closed) return done;
      if (await this.#evict(ev, await this.#sizes.size(ev.entry))) done.push(ev);
    }
    const gone = new Set(done.map((ev) => ev.entry.dir));
    const rest = entries.filter((e) => !gone.has(e.dir));
    // Read after the revisions' evictions: what they freed counts.
    const usage = await this.#fs.diskUsage(this.#o.root);
    const { marks } = this.#o;
    const need = pressureNeed(usage, marks);
    if (need === null || this.#closed) {
      this.#said = null;
      return done;
    }
    const installed = this.#o.installed();
    const ordered = pressureOrder(rest, { inUse: this.#inUse(entries), installed });
    const sized = await this.#sizes.prefix(ordered, need.toLow);
    const plan = planPressure(sized, ordered.length, { usage, marks, installed });
    const sizes = new Map(sized.map((e) => [e.dir, e]));
    for (const ev of plan.evictions) {
      if (this.#closed) break;
      const size = sizes.get(ev.entry.dir) ?? { bytes: 0, complete: false };
      if (await this.#evict(ev, size)) done.push(ev);
      // A size cut short is a lower bound: the disk says whether that one freed enough.
      if (!size.complete && atLowWatermark(await this.#fs.diskUsage(this.#o.root), marks)) break;
    }
    this.#sayUnrelieved(plan, usage);
    return done;
  }

  /** Logs, once until it changes, pressure the caches cannot relieve or could not size in time. */
  #sayUnrelieved(plan: ReturnType<typeof planPressure>, usage: DiskUsage): void {
    const what = plan.elsewhere !== null ? "elsewhere" : plan.unsized ? "unsized" : null;
    if (what === this.#said) return;
    this.#said = what;
    const fields = {
      filesystem_of: this.#o.root,
      used: formatBytes(usage.totalBytes - usage.freeBytes),
      total: formatBytes(usage.totalBytes),
      high_watermark: `${this.#o.marks.highPercent}%`,
    };
    if (what === "elsewhere") {
      this.#o.log.warn(
        "disk over the high watermark, and the engine caches cannot relieve it: they are kept",
        { ...fields, engine_caches_evictable: formatBytes(plan.elsewhere!.evictableBytes) },
      );
    } else if (what === "unsized") {
      this.#o.log.warn(
        "disk over the high watermark: the engine caches could not all be sized in time; the next sweep goes on",
        fields,
      );
    }
  }

  /** Removes `ev`'s directory unless a start took it meanwhile; whether it did. */
  async #evict(ev: EngineCacheEviction, size: TreeBytes): Promise<boolean> {
    const dir = ev.entry.dir;
    // Checked and marked with no await between: a start that comes later waits for the removal.
    if (this.#closed || this.#inUse([ev.entry]).has(dir)) return false;
    const removal = this.#fs.removeTree(dir);
    this.#removing.set(dir, removal.catch(() => {}));
    try {
      await removal;
    } finally {
      this.#removing.delete(dir);
    }
    this.#report(ev, size);
    return true;
  }

  #report(ev: EngineCacheEviction, size: TreeBytes): void {
    const { entry } = ev;
    const parts = entry.dir.split("/");
    const e: EngineCacheEvicted = {
      engine: entry.key?.engine ?? parts.at(-2) ?? "",
      key: parts.at(-1) ?? "",
      model: entry.key?.model ?? null,
      revision: entry.key?.revision ?? null,
      bytes: size.bytes,
      atLeast: !size.complete,
      cause: ev.cause,
      reason: ev.reason,
    };
    const { atLeast, ...fields } = e;
    this.#o.log.info("engine cache evicted", { ...fields, ...(atLeast ? { at_least: true } : {}) });
    try {
      this.#o.onEvicted?.(e);
    } catch {
      // An observer's bug must not stop a sweep.
    }
  }

  /** Every key directory under the root, with its record and last use; nothing walked. */
  async #entries(): Promise<EngineCacheEntry[]> {
    const fs = this.#fs;
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
          lastUsedMs: record?.last_used_ms ?? (await fs.lstat(dir))?.mtimeMs ?? 0,
        });
      }
    }
    return out;
  }
}

/** Whether `p` settles within `ms` (a rejection counts); the timer is cleared either way. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => timer = setTimeout(() => r(false), ms));
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}
