/**
 * The agent's supervisor (design §9): takes the desired list of shards and
 * reconciles, adopts the engines a previous agent left running, and reports
 * every shard's state. Processes, timers and files live here and in
 * shard_runner.ts; the engine plugins stay pure.
 *
 * @module
 */
import { compareNatural } from "../text/natural_order.ts";
import { join } from "node:path";
import { createOwnerOnlyDir, narrowToOwner } from "../http/secret_file.ts";
import type { ShardSpec } from "../engines/types.ts";
import { DEFAULT_BACKOFF } from "./backoff.ts";
import { DEFAULT_CRASH_LOOP_LIMIT } from "./crash_loop.ts";
import { DEFAULT_TAIL_LIMITS } from "./log_tail.ts";
import { checkFingerprint, desiredLaunchOf, readPidFile } from "./pid_file.ts";
import { DEFAULT_PORT_RANGE, isPortFree, PortAllocator } from "./port_allocator.ts";
import { modeWarning, PID_FILE, tidyShardDir } from "./shard_dir.ts";
import { ShardRunner } from "./shard_runner.ts";
import { systemClock } from "../time/clock.ts";
import { errorMessage } from "../text/error_message.ts";
import { createLogger, type Logger } from "../log/log.ts";
import type {
  DesiredShard,
  LaunchedShard,
  ResolvedOptions,
  ShardMetrics,
  ShardReport,
  SupervisorEvent,
  SupervisorOptions,
} from "./types.ts";

/** Prepares a shard's command with its engine plugin (the registry's driver), ports allocated. */
export type PrepareShard = (shard: LaunchedShard) => Promise<ShardSpec>;

/** Fills in defaults. */
export function resolveOptions(opts: SupervisorOptions): ResolvedOptions {
  return {
    stateDir: opts.stateDir,
    probeHost: opts.probeHost ?? "127.0.0.1",
    tickMs: opts.tickMs ?? 500,
    probeTimeoutMs: opts.probeTimeoutMs ?? 2_000,
    startTimeoutMs: opts.startTimeoutMs ?? 120_000,
    loadTimeoutMs: opts.loadTimeoutMs ?? 1_800_000,
    stopGraceMs: opts.stopGraceMs ?? 30_000,
    backoff: opts.backoff ?? DEFAULT_BACKOFF,
    tailLimits: opts.tailLimits ?? DEFAULT_TAIL_LIMITS,
    logMaxBytes: opts.logMaxBytes ?? 64 * 1024 * 1024,
    logKeep: opts.logKeep ?? 3,
    settleMs: opts.settleMs ?? 2_000,
    livenessFailures: opts.livenessFailures ?? 3,
    crashLoopLimit: opts.crashLoopLimit ?? DEFAULT_CRASH_LOOP_LIMIT,
    stableAfterMs: opts.stableAfterMs ?? 60_000,
    env: opts.env ?? {},
    ports: opts.ports ?? new PortAllocator(DEFAULT_PORT_RANGE),
    isPortFree: opts.isPortFree ?? isPortFree,
    procRoot: opts.procRoot ?? "/proc",
    onEvent: opts.onEvent ?? logEvent(createLogger("supervisor")),
    onReady: opts.onReady ?? (() => {}),
    onColdStart: opts.onColdStart ?? (() => {}),
    models: opts.models ?? null,
    clock: opts.clock ?? systemClock,
    chmod: opts.chmod ?? Deno.chmodSync,
  };
}

/**
 * Writes each event as one JSON line, its message as `msg`: a warning for a
 * path left wider than owner-only (`file_mode`), which wants the operator.
 */
export function logEvent(log: Logger): (e: SupervisorEvent) => void {
  return (e) =>
    log.log(e.kind === "file_mode" ? "warn" : "info", e.message, {
      shard: e.shard,
      kind: e.kind,
      at: e.at,
    });
}

/** A stable hash of what a shard runs: a changed launch means a new process. */
export async function shardHash(shard: DesiredShard): Promise<string> {
  const bytes = new TextEncoder().encode(JSON.stringify([shard.engine, shard.launch]));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest.slice(0, 12)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A file-system-safe directory name for a shard id. */
export function shardDirName(id: string): string {
  const safe = id.replace(/[^A-Za-z0-9._-]/g, "_");
  if (safe === id) return id;
  // Different ids may map to one safe name: keep them apart.
  let h = 0;
  for (const c of id) h = (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0;
  return `${safe}-${h.toString(16)}`;
}

/** Runs the shards of one node. */
export class Supervisor {
  readonly #opts: ResolvedOptions;
  readonly #prepare: PrepareShard;
  readonly #runners = new Map<string, ShardRunner>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #ticking: Promise<void> | null = null;
  #running = false;

  /** Creates a supervisor; call {@link start} to adopt and begin. */
  constructor(options: SupervisorOptions, prepare: PrepareShard) {
    this.#opts = resolveOptions(options);
    this.#prepare = prepare;
  }

  #emit(e: Omit<SupervisorEvent, "at">): void {
    try {
      this.#opts.onEvent({ at: this.#opts.clock.now(), ...e });
    } catch {
      // A broken listener must not break supervision.
    }
  }

  #paths(id: string) {
    const dir = join(this.#opts.stateDir, "shards", shardDirName(id));
    return { dir, pidFile: join(dir, PID_FILE), log: join(dir, "engine.log") };
  }

  /**
   * Adopts the engines a previous agent left running (design §9.2), then starts
   * the loop. A pid file whose process no longer matches its fingerprint is
   * refused with an event saying why, and removed: its pid belongs to someone
   * else now. The shards' directories are made owner-only (shard_dir.ts);
   * one that cannot be is warned about, never a reason not to start.
   *
   * @throws {Error} When the shards' directory cannot be created or read.
   */
  async start(): Promise<void> {
    const root = join(this.#opts.stateDir, "shards");
    createOwnerOnlyDir(root);
    this.#warnMode(null, modeWarning(root, narrowToOwner(root, this.#opts.chmod)));
    for (const entry of Deno.readDirSync(root)) {
      if (!entry.isDirectory) continue;
      for (const w of tidyShardDir(join(root, entry.name), this.#opts.chmod)) {
        this.#warnMode(entry.name, w);
      }
      const pidFile = join(root, entry.name, PID_FILE);
      const read = readPidFile(pidFile);
      if ("error" in read) {
        if (read.error !== "missing") this.#refuse(entry.name, `pid file ${read.error}`, pidFile);
        continue;
      }
      const record = read.record;
      const check = checkFingerprint(record);
      if (!check.ok) {
        this.#refuse(record.shard_id, check.why, pidFile);
        continue;
      }
      // The pid file carries the launch with its ports, so the plugin's
      // probes apply again, and the launch as desired, so reconcile sees the
      // same hash: an adopted shard is left alone. Its ports are this agent's again.
      const desired: DesiredShard = {
        id: record.shard_id,
        engine: record.engine,
        launch: desiredLaunchOf(record),
      };
      try {
        this.#opts.ports.reserve(record.shard_id, record.ports ?? [record.port]);
      } catch (e) {
        this.#refuse(record.shard_id, errorMessage(e), pidFile);
        continue;
      }
      const runner = new ShardRunner(
        desired,
        record.spec_hash,
        this.#paths(record.shard_id),
        this.#opts,
        (launch) => this.#prepare({ id: desired.id, engine: desired.engine, launch }),
        (e) => this.#emit(e),
      );
      await runner.adopt(record);
      this.#runners.set(record.shard_id, runner);
    }
    this.#running = true;
    this.#schedule();
  }

  #warnMode(shard: string | null, warning: string | null): void {
    if (warning !== null) this.#emit({ shard, kind: "file_mode", message: warning });
  }

  #refuse(shard: string, why: string, pidFile: string): void {
    this.#emit({ shard, kind: "adoption_refused", message: `not adopting: ${why}` });
    try {
      Deno.removeSync(pidFile);
    } catch {
      // Already gone.
    }
  }

  #schedule(): void {
    if (!this.#running) return;
    this.#timer = setTimeout(async () => {
      this.#ticking = this.tick();
      await this.#ticking;
      this.#ticking = null;
      this.#schedule();
    }, this.#opts.tickMs);
  }

  /** Looks at every shard once (the loop calls this; tests may too). */
  async tick(): Promise<void> {
    await Promise.all([...this.#runners.values()].map((r) => r.tick().catch(() => {})));
    for (const [id, r] of this.#runners) if (r.finished) this.#runners.delete(id);
  }

  /**
   * Makes the node run exactly `desired` (design §10): starts what is missing,
   * stops what is no longer wanted, replaces shards whose launch changed, and
   * leaves matching running shards alone.
   */
  async reconcile(desired: readonly DesiredShard[]): Promise<void> {
    const wanted = new Map(desired.map((d) => [d.id, d]));
    const stops: Promise<void>[] = [];
    for (const [id, runner] of this.#runners) {
      const d = wanted.get(id);
      if (d === undefined) stops.push(runner.stop("no longer desired"));
      else if (runner.hash !== await shardHash(d)) stops.push(runner.stop("launch changed"));
    }
    await Promise.all(stops);
    for (const [id, r] of this.#runners) {
      if (r.finished || r.status().state === "exited") this.#runners.delete(id);
    }
    for (const d of desired) {
      const existing = this.#runners.get(d.id);
      if (existing !== undefined) continue;
      const runner = new ShardRunner(
        d,
        await shardHash(d),
        this.#paths(d.id),
        this.#opts,
        (launch) => this.#prepare({ id: d.id, engine: d.engine, launch }),
        (e) => this.#emit(e),
      );
      this.#runners.set(d.id, runner);
      await runner.start();
    }
  }

  /** Every shard's status, by id. */
  status(): ShardReport[] {
    return [...this.#runners.values()].map((r) => r.status()).sort((a, b) =>
      compareNatural(a.id, b.id)
    );
  }

  /**
   * The desired shard of every shard not finished: what runs, is about to
   * start or is stopping now (the agent keeps their engine caches).
   */
  shards(): DesiredShard[] {
    return [...this.#runners.values()].filter((r) => !r.finished).map((r) => r.desired);
  }

  /** What the agent's metrics need of every shard beyond its status, by id. */
  metrics(): ShardMetrics[] {
    return [...this.#runners.values()].map((r) => r.metrics()).sort((a, b) =>
      compareNatural(a.id, b.id)
    );
  }

  /** Where a running shard's engine listens and the key it takes, for the agent's proxy. */
  target(id: string): { port: number; key: string | null } | null {
    return this.#runners.get(id)?.target() ?? null;
  }

  /**
   * One shard's status and in-memory log tail, with the tail's position in
   * the log and the probe lines it left out (supervisor/probe_lines.ts).
   */
  shard(id: string): {
    status: ShardReport;
    log_tail: string[];
    log_id: string;
    log_first: number;
    probe_lines_hidden: number;
  } | null {
    const r = this.#runners.get(id);
    if (r === undefined) return null;
    const w = r.logWindow();
    return {
      status: r.status(),
      log_tail: w.lines,
      log_id: w.log_id,
      log_first: w.first,
      probe_lines_hidden: w.probe_lines_hidden,
    };
  }

  /** Stops every shard and the loop. */
  async shutdown(): Promise<void> {
    await this.#halt();
    await Promise.all([...this.#runners.values()].map((r) => r.stop("supervisor shutdown")));
    this.#runners.clear();
  }

  /**
   * Stops the loop and forgets the shards without touching them: what an
   * agent that is going away (upgrade, crash) does. The next supervisor
   * adopts them.
   */
  async detach(): Promise<void> {
    await this.#halt();
    for (const r of this.#runners.values()) r.detach();
    this.#runners.clear();
  }

  async #halt(): Promise<void> {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    if (this.#ticking !== null) await this.#ticking;
  }
}
