/**
 * One shard's life (design §9): spawn in its own session, follow its log, run
 * its plugin's probes, time out, stop the whole group, restart with backoff
 * or report failure, and adopt a process a previous agent started.
 *
 * Driven by {@link ShardRunner.tick}, which the supervisor calls on a timer;
 * ticks never overlap, so the state machine has one writer.
 *
 * @module
 */
import { withApiKey } from "../engines/api_key.ts";
import { engineBaseEnv } from "./engine_env.ts";
import { withPorts } from "../engines/launch.ts";
import type { ShardSpec } from "../engines/prepare.ts";
import type { ShardLaunch } from "../engines/types.ts";
import { argumentRefusal } from "./argument_refusal.ts";
import { afterFailure } from "./crash_loop.ts";
import { exitReason } from "./process_end.ts";
import { ShardLog } from "./shard_log.ts";
import { engineKey } from "./engine_spawn.ts";
import { EngineProcess } from "./engine_process.ts";
import type { PidRecord } from "./pid_file.ts";
import { describeHolders, portOwnership } from "./listen_owner.ts";
import { ownershipHint, takeBlock } from "./shard_ports.ts";
import { runHttpCheck } from "./probes.ts";
import { compilePatterns, type LoadingProgress, matchProgress } from "./progress.ts";
import type {
  DesiredShard,
  ResolvedOptions,
  ShardFailure,
  ShardMetrics,
  ShardState,
  ShardStatus,
  SupervisorEvent,
} from "./types.ts";

/** How long a port found held by another process stays out of the agent's range. */
const PORT_HELD_EXCLUSION_MS = 10 * 60_000;

/**
 * How long a port found held by a stranger waits for the engine's own exit
 * before blaming the holder: a socket of an engine being killed is listed a
 * moment after its process lets go of it.
 */
const EXIT_SETTLE_MS = 500;

/** Lines of log attached to a failure. */
const FAILURE_TAIL_LINES = 40;

/** Where a shard keeps its files. */
export interface ShardPaths {
  /** The shard's directory. */
  dir: string;
  /** Its pid file. */
  pidFile: string;
  /** Its log file. */
  log: string;
}

/** Runs one shard. */
export class ShardRunner {
  /** What the shard is. */
  readonly desired: DesiredShard;
  /** Hash of its launch. */
  readonly hash: string;
  /** Its files. */
  readonly paths: ShardPaths;
  readonly #opts: ResolvedOptions;
  readonly #prepare: (launch: ShardLaunch) => Promise<ShardSpec>;
  readonly #emit: (e: Omit<SupervisorEvent, "at">) => void;

  #state: ShardState = "pending";
  #since = Date.now();
  #spec: ShardSpec | null = null;
  /** The launch with the ports allocated to this run; null until allocated. */
  #launch: ShardLaunch | null = null;
  /** The ports allocated to this run (a block from the agent's range). */
  #ports: number[] = [];
  #notice: { at: number; message: string } | null = null;
  /** The engine's API key, when its engine takes one (rank 0 only); never reported. */
  #engineKey: string | null = null;
  /** Why the last ownership check did not find the shard's socket; null when it did. */
  #lastOwnership: string | null = null;
  #patterns: RegExp[] = [];
  /** This run's engine process, while there is one. */
  #proc: EngineProcess | null = null;
  readonly #log: ShardLog;
  #progress: LoadingProgress | null = null;
  #restarts = 0;
  /** Failures in a row since the shard last stayed ready (crash_loop.ts). */
  #failures = 0;
  #restartsTotal = 0;
  /** When the current run was spawned, until it is ready; null for an adopted process. */
  #spawnedAt: number | null = null;
  #lastReadyAfterMs: number | null = null;
  #nextStartAt = 0;
  #lastFailure: ShardFailure | null = null;
  #adopted = false;
  #livenessFailures = 0;
  #wanted = true;
  #stopping: Promise<void> | null = null;
  /** The look under way, if any ({@link tick}). */
  #looking: Promise<void> | null = null;

  /** Creates a runner in state `pending`; nothing runs until {@link start} or {@link adopt}. */
  constructor(
    desired: DesiredShard,
    hash: string,
    paths: ShardPaths,
    opts: ResolvedOptions,
    prepare: (launch: ShardLaunch) => Promise<ShardSpec>,
    emit: (e: Omit<SupervisorEvent, "at">) => void,
  ) {
    this.desired = desired;
    this.hash = hash;
    this.paths = paths;
    this.#opts = opts;
    this.#prepare = prepare;
    this.#emit = emit;
    this.#log = new ShardLog({
      tailLimits: opts.tailLimits,
      maxBytes: opts.logMaxBytes,
      keep: opts.logKeep,
      // Engines that take their key on the command line print it (SGLang's
      // server_args line): it never reaches the tail, events or `llmgw logs`.
      scrub: (text) => this.#scrub(text),
      onLine: (line) => this.#progressLine(line),
    });
  }

  /** The shard's status (a copy). */
  status(): ShardStatus {
    return {
      id: this.desired.id,
      engine: this.desired.engine,
      state: this.#state,
      since: this.#since,
      pid: this.pid,
      port: this.#launch?.port ?? 0,
      rendezvous_port: this.#launch !== null && this.#launch.rank === 0 &&
          this.#launch.world.nodes > 1
        ? this.#launch.world.rendezvous_port
        : null,
      notice: this.#notice === null ? null : { ...this.#notice },
      serves_http: this.#spec?.probes?.serves_http ?? false,
      progress: this.#progress === null ? null : { ...this.#progress },
      restarts: this.#restarts,
      crash_loop: this.#failures === 0
        ? null
        : { failures: this.#failures, limit: this.#opts.crashLoopLimit },
      adopted: this.#adopted,
      last_failure: this.#lastFailure === null
        ? null
        : { ...this.#lastFailure, log_tail: [...this.#lastFailure.log_tail] },
      spec_hash: this.hash,
      load_metrics: this.#spec?.metrics ?? null,
    };
  }

  /** What this runner counted, for the agent's metrics. */
  metrics(): ShardMetrics {
    return {
      id: this.desired.id,
      gpu_indices: this.desired.launch.gpus.map((g) => g.index),
      restarts_total: this.#restartsTotal,
      last_ready_after_ms: this.#lastReadyAfterMs,
    };
  }

  /** The whole in-memory tail with its position in the log and the probe lines it left out. */
  logWindow(): { log_id: string; first: number; lines: string[]; probe_lines_hidden: number } {
    return this.#log.window();
  }

  /** True once the shard has stopped for good (removed or stopped and not wanted). */
  get finished(): boolean {
    return !this.#wanted && this.#stopping === null && this.#proc === null;
  }

  /** The live process's pid, if any. */
  get pid(): number | null {
    return this.#proc?.pid ?? null;
  }

  #setState(state: ShardState, message: string): void {
    if (state === this.#state) return;
    const from = this.#state;
    this.#state = state;
    this.#since = Date.now();
    this.#emit({
      shard: this.desired.id,
      kind: "state",
      message: `${from} → ${state}: ${message}`,
    });
  }

  /**
   * Allocates the shard's ports from the agent's range, each checked free,
   * and fills them into its launch: a block of {@link PORT_BLOCK}, the HTTP
   * port first. A launch that names its port (tests) keeps it.
   */
  async #allocate(): Promise<ShardLaunch> {
    const want = this.desired.launch;
    if (want.port !== null) return withPorts(want, want.port);
    // A port another process holds is skipped, and who holds it is said.
    const block = await takeBlock(
      this.#opts.ports,
      this.desired.id,
      this.#opts.isPortFree,
      this.#opts.procRoot,
    );
    this.#ports = block.ports;
    if (block.notice !== null) {
      this.#notice = { at: Date.now(), message: block.notice };
      this.#emit({ shard: this.desired.id, kind: "port_held", message: block.notice });
    }
    return withPorts(want, block.ports[0]);
  }

  /** Starts the engine: allocates its ports, prepares the command, spawns it in a new session. */
  async start(): Promise<void> {
    this.#wanted = true;
    if (this.#launch === null) {
      try {
        this.#launch = await this.#allocate();
      } catch (e) {
        // A full range may free up; a launch without rank 0's ports cannot change.
        const reason = `cannot allocate ports: ${e instanceof Error ? e.message : e}`;
        this.#fail(reason, null, !(e instanceof RangeError), e instanceof RangeError);
        return;
      }
      this.#spec = null;
    }
    if (this.#spec === null) {
      this.#spec = await this.#prepare(this.#launch);
      this.#patterns = compilePatterns(this.#spec.probes?.loading_progress ?? []);
    }
    const spec = this.#spec;
    if (spec.command === null || spec.problems.length > 0) {
      this.#fail(`cannot start: ${spec.problems.join("; ") || "no command"}`, null, false, true);
      return;
    }
    Deno.mkdirSync(this.paths.dir, { recursive: true });
    this.#log.followFromEnd(this.paths.log);
    this.#progress = null;
    this.#livenessFailures = 0;
    let command = spec.command;
    if (spec.api_key !== undefined && this.#launch!.rank === 0) {
      // The second lock: the engine answers only callers with its key, and
      // only the agent's proxy and probes have it.
      this.#engineKey = engineKey(this.paths.dir, true);
      command = withApiKey(command, spec.api_key, this.#engineKey!);
    }
    const argv = command.argv;
    try {
      this.#proc = EngineProcess.spawn(
        argv,
        {
          ...engineBaseEnv(),
          ...this.#opts.env,
          ...command.env,
        },
        this.paths.pidFile,
        {
          shard_id: this.desired.id,
          engine: this.desired.engine,
          spec_hash: this.hash,
          port: this.#launch.port,
          ports: [...this.#ports],
          log_path: this.paths.log,
          launch: this.#launch,
        },
      );
    } catch (e) {
      this.#fail(`cannot spawn ${argv[0]}: ${e instanceof Error ? e.message : e}`, null, true);
      return;
    }
    const pid = this.#proc.pid;
    this.#emit({
      shard: this.desired.id,
      kind: "spawned",
      message: this.#scrub(`pid ${pid}: ${argv.join(" ")}`),
    });
    this.#spawnedAt = Date.now();
    this.#setState("starting", `spawned pid ${pid}`);
  }

  /**
   * Takes over a process a previous agent started, after its fingerprint
   * matched (design §9.2): from here on it is probed and stopped as if this
   * supervisor had started it.
   */
  async adopt(record: PidRecord): Promise<void> {
    this.#launch = record.launch;
    this.#ports = record.ports ?? [record.port];
    this.#spec = await this.#prepare(record.launch);
    if (this.#spec.api_key !== undefined && record.launch.rank === 0) {
      this.#engineKey = engineKey(this.paths.dir, false);
    }
    this.#patterns = compilePatterns(this.#spec.probes?.loading_progress ?? []);
    this.#adopted = true;
    this.#proc = EngineProcess.adopt(record, this.paths.pidFile);
    let size = 0;
    try {
      size = Deno.statSync(record.log_path).size;
    } catch {
      // No log: nothing to show.
    }
    // Fill the tail with the recent past, then follow.
    this.#log.follow(record.log_path, Math.max(0, size - 64 * 1024));
    this.#log.read();
    this.#emit({ shard: this.desired.id, kind: "adopted", message: `adopted pid ${record.pid}` });
    this.#spawnedAt = null;
    this.#setState("starting", `adopted pid ${record.pid}`);
  }

  /**
   * One look at the shard: log, process, timeouts, probes, backoff. A call
   * while a look is under way (the agent's first look beside the timer's)
   * waits for that one: two would act on one failure twice.
   */
  tick(): Promise<void> {
    this.#looking ??= this.#look().finally(() => this.#looking = null);
    return this.#looking;
  }

  async #look(): Promise<void> {
    const now = Date.now();
    this.#log.read();
    if (this.#state === "backoff" && now >= this.#nextStartAt && this.#wanted) {
      await this.start();
      return;
    }
    if (!["starting", "loading", "ready"].includes(this.#state)) return;
    this.#proc?.refreshCmdline();
    if (!this.#alive()) {
      await this.#exited();
      return;
    }
    const rotated = this.#log.rotate();
    if (rotated !== null) {
      this.#emit({ shard: this.desired.id, kind: "log_rotated", message: rotated });
    }
    const elapsed = now - this.#since;
    if (this.#state === "starting" && elapsed > this.#opts.startTimeoutMs) {
      return await this.#timeout(
        `showed no sign of life within ${this.#opts.startTimeoutMs} ms${this.#portHint()}`,
      );
    }
    if (this.#state === "loading" && elapsed > this.#opts.loadTimeoutMs) {
      return await this.#timeout(
        `did not become ready within ${this.#opts.loadTimeoutMs} ms of loading${this.#portHint()}`,
      );
    }
    await this.#probe(now);
  }

  /** A log line that shows loading progress moves a starting shard to loading. */
  #progressLine(line: string): void {
    const p = matchProgress(line, this.#patterns);
    if (p === null) return;
    this.#progress = p;
    if (this.#state === "starting") {
      this.#setState("loading", `log shows loading (${p.percent ?? "?"}%)`);
    }
  }

  #alive(): boolean {
    return this.#proc?.alive() ?? false;
  }

  /**
   * Whether the socket on the shard's port is its own process group's. A
   * port held by anyone else fails the run, names the holder, and moves the
   * shard to other ports; nothing listening yet is "not yet". An engine
   * that has just died can still be listed as listening with no process
   * holding it: its exit is the cause, so the exit is looked for first.
   */
  async #ownsPort(port: number): Promise<boolean> {
    const proc = this.#proc;
    if (proc === null) return false;
    let owner = portOwnership(port, proc.members(), this.#opts.procRoot);
    if (owner.kind === "foreign") {
      const ended = await proc.endsWithin(EXIT_SETTLE_MS);
      // Stopped meanwhile: nothing of this run is left to judge.
      if (this.#proc !== proc) return false;
      if (ended) {
        await this.#exited();
        return false;
      }
      // Once more, after the wait: the first look may have caught a socket being torn down.
      owner = portOwnership(port, proc.members(), this.#opts.procRoot);
    }
    this.#lastOwnership = ownershipHint(owner, port);
    if (owner.kind === "ours") return true;
    if (owner.kind !== "foreign") return false;
    const holder = describeHolders(owner.holders);
    this.#emit({ shard: this.desired.id, kind: "port_held", message: `port ${port}: ${holder}` });
    // The next run takes other ports; this one stays out of the range a while.
    this.#opts.ports.exclude(port, Date.now() + PORT_HELD_EXCLUSION_MS);
    await this.#killGroup(0);
    this.#fail(`port ${port} is held by ${holder}, not by the engine llmgw started`, null, true);
    return false;
  }

  /** Text with the engine's key replaced by `***`. */
  #scrub(text: string): string {
    return this.#engineKey === null ? text : text.replaceAll(this.#engineKey, "***");
  }

  /** Where the agent's proxy reaches the engine, and the key it must send; null when not serving. */
  target(): { port: number; key: string | null } | null {
    // Only a ready shard: readiness means its own process held the port at the
    // last probe. Never the key to a port nobody has checked (right after adoption).
    if (this.#launch === null || this.#proc === null || this.#state !== "ready") return null;
    return { port: this.#launch.port, key: this.#engineKey };
  }

  /** What the last ownership check of the port said, for a timeout's reason. */
  #portHint(): string {
    return this.#lastOwnership === null ? "" : `; ${this.#lastOwnership}`;
  }

  /** Gives the run's ports back; the next start allocates anew. */
  #releasePorts(): void {
    this.#opts.ports.release(this.desired.id);
    this.#ports = [];
    this.#launch = null;
    this.#lastOwnership = null;
  }

  async #probe(now: number): Promise<void> {
    const probes = this.#spec?.probes;
    if (probes === undefined || probes === null || this.#launch === null) return;
    const port = this.#launch.port;
    // Readiness is bound to the process llmgw started: whatever else answers
    // on the port is not this shard (design §9.3).
    if (probes.serves_http && !(await this.#ownsPort(port))) return;
    const auth = this.#engineKey === null
      ? undefined
      : { authorization: `Bearer ${this.#engineKey}` };
    const run = (checks: typeof probes.readiness) =>
      Promise.all(
        checks.map((c) =>
          runHttpCheck(this.#opts.probeHost, port, c, this.#opts.probeTimeoutMs, auth)
        ),
      );
    if (this.#state === "ready") {
      // Backoff starts over only after the shard has stayed ready a while: a
      // shard that crashes a moment after becoming ready keeps backing off.
      if (now - this.#since > this.#opts.stableAfterMs) {
        this.#restarts = 0;
        this.#failures = 0;
      }
      const live = await run(probes.liveness);
      const bad = live.find((r) => !r.ok);
      this.#livenessFailures = bad === undefined ? 0 : this.#livenessFailures + 1;
      if (bad !== undefined && this.#livenessFailures >= this.#opts.livenessFailures) {
        await this.#timeout(`liveness failed ${this.#livenessFailures} times: ${bad.detail}`);
      }
      return;
    }
    if (probes.readiness.length === 0) {
      // Other ranks serve no HTTP: readiness is rank 0's; adopted ones (never spawned) have settled.
      const settled = this.#spawnedAt === null || now - this.#since > this.#opts.settleMs ||
        this.#progress?.percent === 100;
      if (settled) this.#markReady("running; readiness is the replica leader's");
      return;
    }
    const results = await run(probes.readiness);
    if (!this.#alive()) return;
    // Again after the probe: the engine may have died and its port changed hands meanwhile.
    if (probes.serves_http && !(await this.#ownsPort(port))) return;
    if (results.every((r) => r.ok)) {
      this.#markReady(results.map((r) => r.detail).join(", "));
    } else if (this.#state === "starting" && results.some((r) => r.answered)) {
      this.#setState("loading", `port ${port} answers, not ready yet`);
    }
  }

  #markReady(message: string): void {
    if (this.#state !== "starting" && this.#state !== "loading") return;
    this.#setState("ready", message);
    if (this.#spawnedAt !== null) {
      this.#lastReadyAfterMs = this.#since - this.#spawnedAt;
      this.#spawnedAt = null;
      this.#opts.onReady(this.desired.id, this.#lastReadyAfterMs);
    }
  }

  async #exited(): Promise<void> {
    // Workers can outlive the leader and hold GPU memory (vLLM's EngineCore,
    // SGLang's schedulers): the whole group goes before anything restarts.
    // It also reaps our child, so its exit status is known after it.
    const pid = this.pid;
    await this.#killGroup(0);
    const exit = this.#proc?.exit ?? null;
    const reason = exitReason(exit, pid);
    this.#log.read();
    // An engine that refused its arguments would refuse them again.
    const code = exit !== null && exit.signal === null ? exit.code : null;
    const refused = argumentRefusal(code, this.#log.last(FAILURE_TAIL_LINES));
    if (refused !== null) {
      this.#fail(`${reason}: the engine refused its arguments: ${refused}`, exit, false, true);
      return;
    }
    this.#fail(reason, exit, true);
  }

  async #timeout(reason: string): Promise<void> {
    await this.#killGroup(this.#opts.stopGraceMs);
    this.#fail(reason, this.#proc?.exit ?? null, true);
  }

  /**
   * Records a failure and carries out what it leads to (crash_loop.ts): a
   * restart after a backoff, or `failed`, which the control plane acts on.
   * A shard that keeps failing without staying ready gives up on this node.
   */
  #fail(
    reason: string,
    exit: Deno.CommandStatus | null,
    restartable: boolean,
    permanent = false,
  ): void {
    const local = this.desired.launch.world.nodes === 1;
    // Only failures that a restart here answers count towards the crash loop.
    if (restartable && local && this.#wanted) this.#failures++;
    const decision = afterFailure({
      failures: this.#failures,
      restartable,
      permanent,
      multiNode: !local,
      wanted: this.#wanted,
    }, { limit: this.#opts.crashLoopLimit, backoff: this.#opts.backoff });
    const said = decision.action === "fail" && decision.note !== null
      ? `${decision.note}; last: ${reason}`
      : reason;
    this.#lastFailure = {
      at: Date.now(),
      reason: said,
      exit_code: exit?.signal === null ? exit.code : null,
      signal: exit?.signal ?? null,
      log_tail: this.#log.last(FAILURE_TAIL_LINES),
      permanent: decision.action === "fail" && decision.permanent,
    };
    this.#forgetProcess();
    // The next run allocates afresh: a port the engine held may be anyone's now.
    this.#releasePorts();
    if (decision.action === "restart") {
      this.#restarts++;
      this.#restartsTotal++;
      this.#nextStartAt = Date.now() + decision.delayMs;
      const loop = decision.crashLoop
        ? `crash loop (${this.#failures} of ${this.#opts.crashLoopLimit} failures in a row); `
        : "";
      this.#setState(
        "backoff",
        `${reason}; ${loop}restart ${this.#restarts} in ${decision.delayMs} ms`,
      );
    } else {
      this.#setState("failed", decision.next === null ? said : `${said}; ${decision.next}`);
    }
  }

  #forgetProcess(): void {
    this.#proc?.forget();
    this.#proc = null;
  }

  /**
   * Stops the shard for good: SIGTERM to the group, the grace period, then
   * SIGKILL; returns when no process of the group is left.
   */
  stop(reason = "stopped"): Promise<void> {
    this.#wanted = false;
    if (this.#stopping !== null) return this.#stopping;
    this.#stopping = (async () => {
      if (this.#proc !== null) {
        this.#setState("stopping", reason);
        await this.#killGroup(this.#opts.stopGraceMs);
        this.#forgetProcess();
        this.#emit({ shard: this.desired.id, kind: "stopped", message: reason });
      }
      this.#releasePorts();
      this.#setState("exited", reason);
      this.#stopping = null;
    })();
    return this.#stopping;
  }

  /** Stops this run's process group whole (EngineProcess.kill). */
  async #killGroup(graceMs: number): Promise<void> {
    await this.#proc?.kill(graceMs);
  }

  /** Forgets the process without touching it: the agent is going away, the engine stays. */
  detach(): void {
    this.#wanted = false;
    this.#proc = null;
  }
}
