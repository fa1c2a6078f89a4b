/**
 * One shard's life (design §9): the thin shell around its state machine
 * (shard_machine.ts). It feeds the machine what happened, at the time the
 * supervisor's clock says, and carries out the actions it returns: spawn and
 * reap (shard_process.ts), probe (shard_probe.ts), stop the whole group
 * (engine_process.ts), follow the log (shard_log.ts).
 *
 * Driven by {@link ShardRunner.tick}, which the supervisor calls on a timer;
 * ticks never overlap, and each step of the machine is synchronous, so the
 * shard has one writer.
 *
 * @module
 */
import type { ShardLaunch, ShardSpec } from "../engines/types.ts";
import { errorMessage } from "../text/error_message.ts";
import { EngineProcess } from "./engine_process.ts";
import { adoptedKeyNote, engineKey } from "./engine_spawn.ts";
import type { PidRecord } from "./pid_file.ts";
import { compilePatterns, matchProgress } from "./progress.ts";
import { ReceiptRecorder } from "./cold_start_receipt.ts";
import {
  type ExitStatus,
  initialShard,
  type ShardAction,
  type ShardEvent,
  type ShardMachineState,
  type ShardRules,
  step,
  watched,
} from "./shard_machine.ts";
import { judgePort, runChecks } from "./shard_probe.ts";
import { shardMetrics, shardStatus } from "./shard_status.ts";
import {
  type LaunchRefused,
  runEnd,
  type ShardPaths,
  spawnRun,
  takePorts,
} from "./shard_process.ts";
import { ShardLog } from "./shard_log.ts";
import { ShardModel, withModelPath } from "./shard_model.ts";
import type {
  DesiredShard,
  ResolvedOptions,
  ShardMetrics,
  ShardReport,
  SupervisorEvent,
} from "./types.ts";

/** How long a port found held by another process stays out of the agent's range. */
const PORT_HELD_EXCLUSION_MS = 10 * 60_000;

/** Lines of log attached to a failure. */
const FAILURE_TAIL_LINES = 40;

/** Runs one shard. */
export class ShardRunner {
  /** What the shard is. */
  readonly desired: DesiredShard;
  /** Hash of its launch. */
  readonly hash: string;
  /** Its files. */
  readonly paths: ShardPaths;
  readonly #opts: ResolvedOptions;
  readonly #rules: ShardRules;
  readonly #prepare: (launch: ShardLaunch) => Promise<ShardSpec>;
  readonly #emit: (e: Omit<SupervisorEvent, "at">) => void;

  #m: ShardMachineState;
  #spec: ShardSpec | null = null;
  /** The launch with the ports allocated to this run; null until allocated. */
  #launch: ShardLaunch | null = null;
  #notice: { at: number; message: string } | null = null;
  /** The engine's API key, when its engine takes one (rank 0 only); never reported. */
  #engineKey: string | null = null;
  #patterns: RegExp[] = [];
  /** This run's cold-start receipt (supervisor/cold_start_receipt.ts). */
  readonly #receipt = new ReceiptRecorder();
  /** This run's engine process, while there is one. */
  #proc: EngineProcess | null = null;
  readonly #model: ShardModel | null; // the model's fetch; null without a model cache
  readonly #log: ShardLog;
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
    this.#model = opts.models === null
      ? null
      : new ShardModel(opts.models, desired, opts.clock, emit);
    const multiNode = desired.launch.world.nodes !== 1;
    this.#rules = { ...opts, multiNode, fetchesModel: this.#model !== null };
    this.#prepare = prepare;
    this.#emit = emit;
    this.#m = initialShard(opts.clock.now());
    this.#log = new ShardLog({
      tailLimits: opts.tailLimits,
      maxBytes: opts.logMaxBytes,
      keep: opts.logKeep,
      // Engines that take their key on the command line print it (SGLang's
      // server_args line): it never reaches the tail, events or `llmgw logs`.
      scrub: (text) => this.#scrub(text),
      onLine: (line) => {
        this.#receipt.line(line, this.#opts.clock.now());
        const progress = matchProgress(line, this.#patterns);
        if (progress !== null) void this.#feed({ type: "progress", progress });
      },
    });
  }

  /** The shard's status (a copy). */
  status(): ShardReport {
    return shardStatus(this.#m, {
      desired: this.desired,
      hash: this.hash,
      pid: this.pid,
      launch: this.#launch,
      spec: this.#spec,
      notice: this.#notice,
      crashLoopLimit: this.#opts.crashLoopLimit,
      coldStart: this.#receipt.receipt,
      download: this.#model?.report(this.#m) ?? null,
    });
  }

  /** What this runner counted, for the agent's metrics. */
  metrics(): ShardMetrics {
    return shardMetrics(this.#m, this.desired);
  }

  /** The whole in-memory tail with its position in the log and the probe lines it left out. */
  logWindow(): { log_id: string; first: number; lines: string[]; probe_lines_hidden: number } {
    return this.#log.window();
  }

  /** True once the shard has stopped for good (removed or stopped and not wanted). */
  get finished(): boolean {
    return !this.#m.wanted && this.#stopping === null && this.#proc === null;
  }

  /** The live process's pid, if any. */
  get pid(): number | null {
    return this.#proc?.pid ?? null;
  }

  /** Where the agent's proxy reaches the engine, and the key it must send; null when not serving. */
  target(): { port: number; key: string | null } | null {
    // Only a ready shard: readiness means its own process held the port at the
    // last probe. Never the key to a port nobody has checked (right after adoption).
    if (this.#launch === null || this.#proc === null || this.#m.state !== "ready") return null;
    return { port: this.#launch.port, key: this.#engineKey };
  }

  /** Starts the engine: allocates its ports, prepares the command, spawns it in a new session. */
  start(): Promise<void> {
    return this.#feed({ type: "start" });
  }

  /**
   * Takes over a process a previous agent started, after its fingerprint
   * matched (design §9.2): from here on it is probed and stopped as if this
   * supervisor had started it.
   */
  async adopt(record: PidRecord): Promise<void> {
    this.#launch = record.launch;
    this.#spec = await this.#prepare(record.launch);
    if (this.#spec.api_key !== undefined && record.launch.rank === 0) {
      this.#engineKey = engineKey(this.paths.dir, false);
    }
    this.#patterns = compilePatterns(this.#spec.probes?.loading_progress ?? []);
    this.#proc = EngineProcess.adopt(record, this.paths.pidFile);
    this.#receipt.forget();
    this.#log.followRecent(record.log_path, 64 * 1024);
    const note = adoptedKeyNote(record.cmdline, this.#engineKey, this.#spec.api_key);
    this.#say("adopted", `adopted pid ${record.pid}${note}`);
    await this.#feed({ type: "adopted", pid: record.pid, path: record.launch.model_path });
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
    this.#log.read();
    let alive = false;
    if (watched(this.#m.state)) {
      this.#proc?.refreshCmdline();
      alive = this.#proc?.alive() ?? false;
      const rotated = alive ? this.#log.rotate() : null;
      if (rotated !== null) this.#say("log_rotated", rotated);
    }
    await this.#feed({ type: "tick", alive });
  }

  /**
   * Stops the shard for good: SIGTERM to the group, the grace period, then
   * SIGKILL; returns when no process of the group is left.
   */
  stop(reason = "stopped"): Promise<void> {
    if (this.#stopping !== null) return this.#stopping;
    this.#stopping = (async () => {
      const proc = this.#proc;
      await this.#feed({ type: "stopping", reason, running: proc !== null });
      if (proc !== null) {
        await proc.kill(this.#opts.stopGraceMs);
        this.#say("stopped", reason);
      }
      await this.#feed({ type: "stopped", reason });
      this.#stopping = null;
    })();
    return this.#stopping;
  }

  /** Forgets the process without touching it: the agent is going away, the engine stays. */
  detach(): void {
    void this.#feed({ type: "detached" });
    this.#proc = null;
  }

  /**
   * One step of the machine at the clock's time, then its actions in order.
   * The step is synchronous, so a look and a stop never lose each other's
   * changes; actions that need no waiting run before this returns.
   */
  #feed(event: ShardEvent): Promise<void> {
    const { state, actions } = step(this.#m, event, this.#opts.clock.now(), this.#rules);
    this.#m = state;
    return this.#carryOut(actions);
  }

  async #carryOut(actions: ShardAction[]): Promise<void> {
    for (const a of actions) {
      switch (a.type) {
        case "state_changed":
          this.#say("state", a.message);
          break;
        case "ready_after": {
          this.#opts.onReady(this.desired.id, a.ms);
          const receipt = this.#receipt.ready(this.#opts.clock.now());
          if (receipt !== null) {
            this.#opts.onColdStart(this.desired.id, this.desired.engine, receipt);
          }
          break;
        }
        case "release":
          this.#release();
          break;
        case "launch":
          await this.#launchRun();
          break;
        case "reap":
          await this.#reap();
          break;
        case "halt":
          await this.#proc?.kill(this.#opts.stopGraceMs);
          await this.#failed({ reason: a.reason, kind: "restartable" }, this.#proc?.exit ?? null);
          break;
        case "probe":
          await this.#probe(a.mode);
          break;
        default: // the model's fetch: a try, its stop, or why the last one failed
          this.#model?.act(a, (outcome) => void this.#feed(outcome));
      }
    }
  }

  /** Takes ports, prepares the command and spawns a run; a refusal is the run's failure. */
  async #launchRun(): Promise<void> {
    const taken = await takePorts(this.desired, this.#opts);
    if ("reason" in taken) return await this.#failed(taken, null);
    this.#launch = withModelPath(taken.launch, this.#m.modelPath);
    if (taken.notice !== null) {
      this.#notice = { at: this.#opts.clock.now(), message: taken.notice };
      this.#say("port_held", taken.notice);
    }
    try {
      this.#spec = await this.#prepare(this.#launch);
    } catch (e) {
      const reason = `cannot prepare the engine's command: ${errorMessage(e)}`;
      return await this.#failed({ reason, kind: "restartable" }, null);
    }
    this.#patterns = compilePatterns(this.#spec.probes?.loading_progress ?? []);
    const run = spawnRun(this.desired, this.hash, this.paths, this.#opts, {
      launch: taken.launch,
      ports: taken.ports,
      spec: this.#spec,
    }, () => this.#log.followFromEnd(this.paths.log));
    if ("reason" in run) return await this.#failed(run, null);
    if (run.key !== null) this.#engineKey = run.key;
    this.#proc = run.proc;
    this.#receipt.spawned(this.#opts.clock.now(), this.#spec.probes?.cold_start_phases);
    this.#model?.spawned(this.#receipt);
    const pid = run.proc.pid;
    this.#say("spawned", this.#scrub(`pid ${pid}: ${run.argv.join(" ")}`));
    await this.#feed({ type: "spawned", pid });
  }

  /**
   * The run's process is gone. Workers can outlive the leader and hold GPU
   * memory (vLLM's EngineCore, SGLang's schedulers): the whole group goes
   * before anything restarts. That also reaps our child, so its exit is known.
   */
  async #reap(): Promise<void> {
    const proc = this.#proc;
    const pid = this.pid;
    await proc?.kill(0);
    this.#log.read();
    const end = runEnd(proc, pid, this.#log.last(FAILURE_TAIL_LINES));
    await this.#failed(end, end.exit);
  }

  #failed(why: LaunchRefused, exit: ExitStatus | null): Promise<void> {
    const logTail = this.#log.last(FAILURE_TAIL_LINES);
    return this.#feed({ type: "failed", reason: why.reason, kind: why.kind, exit, logTail });
  }

  async #probe(mode: "readiness" | "liveness"): Promise<void> {
    const probes = this.#spec?.probes;
    const proc = this.#proc;
    if (probes === undefined || probes === null || this.#launch === null || proc === null) return;
    const port = this.#launch.port;
    if (probes.serves_http && !(await this.#ownsPort(proc, port))) return;
    const result = await runChecks(probes, mode, {
      host: this.#opts.probeHost,
      port,
      timeoutMs: this.#opts.probeTimeoutMs,
      key: this.#engineKey,
    });
    if (result.kind === "readiness") {
      if (this.#proc !== proc || !proc.alive()) return;
      // Again after the probe: the engine may have died and its port changed hands meanwhile.
      if (probes.serves_http && !(await this.#ownsPort(proc, port))) return;
    }
    await this.#feed({ type: "probed", result });
  }

  /**
   * Whether the socket on the run's port is its own process group's
   * (shard_probe.ts). A port held by anyone else fails the run, names the
   * holder, and moves the shard to other ports; nothing listening yet is
   * "not yet"; a run that ended meanwhile is reaped.
   */
  async #ownsPort(proc: EngineProcess, port: number): Promise<boolean> {
    const verdict = await judgePort(proc, port, this.#opts.procRoot);
    // Stopped meanwhile: nothing of this run is left to judge.
    if (this.#proc !== proc) return false;
    if (verdict.kind === "ended") {
      await this.#reap();
      return false;
    }
    await this.#feed({
      type: "port_checked",
      hint: verdict.kind === "not_yet" ? verdict.hint : null,
    });
    if (verdict.kind !== "foreign") return verdict.kind === "ours";
    this.#say("port_held", `port ${port}: ${verdict.holder}`);
    // The next run takes other ports; this one stays out of the range a while.
    this.#opts.ports.exclude(port, this.#opts.clock.now() + PORT_HELD_EXCLUSION_MS);
    await proc.kill(0);
    const reason = `port ${port} is held by ${verdict.holder}, not by the engine llmgw started`;
    await this.#failed({ reason, kind: "restartable" }, null);
    return false;
  }

  /** Forgets the run's process and gives its ports back; the next start allocates anew. */
  #release(): void {
    this.#proc?.forget();
    this.#proc = null;
    this.#opts.ports.release(this.desired.id);
    this.#launch = null;
  }

  #say(kind: SupervisorEvent["kind"], message: string): void {
    this.#emit({ shard: this.desired.id, kind, message });
  }

  /** Text with the engine's key replaced by `***`. */
  #scrub(text: string): string {
    return this.#engineKey === null ? text : text.replaceAll(this.#engineKey, "***");
  }
}
