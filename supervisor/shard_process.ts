/**
 * A run's process effects (design §9.1): taking its ports, preparing its
 * command, spawning it in its own session with its key, and reading why it
 * ended. The process group itself is engine_process.ts; what these lead to
 * is the state machine's (shard_machine.ts).
 *
 * @module
 */
import { EngineApiKeyError, withApiKey } from "../engines/api_key.ts";
import { writeSecretFile } from "../http/secret_file.ts";
import { errorMessage } from "../text/error_message.ts";
import { withPorts } from "../engines/port_block.ts";
import type { ShardSpec } from "../engines/types.ts";
import type { ShardLaunch } from "../engines/types.ts";
import { argumentRefusal } from "./argument_refusal.ts";
import type { FailureKind } from "./crash_loop.ts";
import { engineEnv } from "./engine_env.ts";
import { EngineProcess } from "./engine_process.ts";
import { engineKey, engineKeyPath } from "./engine_spawn.ts";
import { exitReason } from "./process_end.ts";
import { prepareShardDir } from "./shard_dir.ts";
import type { ExitStatus } from "./shard_machine.ts";
import { takeBlock } from "./shard_ports.ts";
import type { DesiredShard, ResolvedOptions } from "./types.ts";

/** Where a shard keeps its files. */
export interface ShardPaths {
  /** The shard's directory. */
  dir: string;
  /** Its pid file. */
  pidFile: string;
  /** Its log file. */
  log: string;
}

/** A run that could not be started, and whether trying again could help. */
export interface LaunchRefused {
  /** In words. */
  reason: string;
  /** `permanent` when the launch itself is refused. */
  kind: FailureKind;
}

/** The shard's ports for one run, and a notice naming a holder a port was skipped for. */
export interface RunPorts {
  /** The launch with its ports filled in. */
  launch: ShardLaunch;
  /** The ports taken from the agent's range (empty when the launch named its own port). */
  ports: number[];
  /** "port P is held by …; using ports from Q", or null. */
  notice: string | null;
}

/**
 * Takes the shard's ports from the agent's range, each checked free: a block
 * of PORT_BLOCK, the HTTP port first. A launch that names its port (tests)
 * keeps it. A port another process holds is skipped, and who holds it said.
 */
export async function takePorts(
  desired: DesiredShard,
  opts: ResolvedOptions,
): Promise<RunPorts | LaunchRefused> {
  const want = desired.launch;
  if (want.port !== null) return { launch: withPorts(want, want.port), ports: [], notice: null };
  try {
    const block = await takeBlock(opts.ports, desired.id, opts.isPortFree, opts.procRoot);
    return { launch: withPorts(want, block.ports[0]), ports: block.ports, notice: block.notice };
  } catch (e) {
    // A full range may free up; a launch without rank 0's ports cannot change.
    return {
      reason: `cannot allocate ports: ${errorMessage(e)}`,
      kind: e instanceof RangeError ? "permanent" : "restartable",
    };
  }
}

/** A spawned run. */
export interface SpawnedRun {
  /** Its process group. */
  proc: EngineProcess;
  /** The engine's API key (rank 0 of an engine that takes one); never reported. */
  key: string | null;
  /** Its command line, for the operator (the key still in it: scrub before showing). */
  argv: string[];
}

/**
 * Spawns the run `spec` describes, in a session of its own, writing its pid
 * file. An engine that takes an API key gets the shard's (rank 0 only); an
 * engine that reads it from a file gets that file written first.
 * `follow` runs once the shard's directory exists, just before the spawn, so
 * the runner follows the log from before the engine's first line.
 */
export function spawnRun(
  desired: DesiredShard,
  hash: string,
  paths: ShardPaths,
  opts: ResolvedOptions,
  run: { launch: ShardLaunch; ports: number[]; spec: ShardSpec },
  follow: () => void,
): SpawnedRun | LaunchRefused {
  const { launch, spec } = run;
  if (spec.command === null || spec.problems.length > 0) {
    return {
      reason: `cannot start: ${spec.problems.join("; ") || "no command"}`,
      kind: "permanent",
    };
  }
  let command = spec.command;
  let key: string | null = null;
  let modeWarning: string | null;
  try {
    modeWarning = prepareShardDir(paths.dir, opts.chmod);
  } catch (e) {
    return {
      reason: `cannot create the shard's directory: ${errorMessage(e)}`,
      kind: "restartable",
    };
  }
  // Said, and the start goes on: its key and pid files are 0600 by themselves.
  if (modeWarning !== null) tell(opts, desired.id, modeWarning);
  follow();
  if (spec.api_key !== undefined && launch.rank === 0) {
    // The second lock: the engine answers only callers with its key, and
    // only the agent's proxy and probes have it.
    try {
      key = engineKey(paths.dir, true)!;
      const keyed = withApiKey(command, spec.api_key, key, paths.dir);
      command = keyed.command;
      // Written anew each start (0600, a fresh inode renamed over the
      // path): never through whatever the path holds now.
      if (keyed.file !== null) writeSecretFile(keyed.file.path, keyed.file.text);
    } catch (e) {
      // Either names the path or the rule, never the key. A key the rule
      // refuses would be refused again; a file that cannot be written may be
      // written on a later try.
      return e instanceof EngineApiKeyError
        ? {
          reason: `${errorMessage(e)} (the key stored in ${
            engineKeyPath(paths.dir)
          }: remove it and the shard's next start makes a new one)`,
          kind: "permanent",
        }
        : { reason: `cannot prepare the engine key: ${errorMessage(e)}`, kind: "restartable" };
    }
  }
  const argv = command.argv;
  try {
    const proc = EngineProcess.spawn(
      argv,
      engineEnv(Deno.env.toObject(), opts.env, command.env),
      paths.pidFile,
      {
        shard_id: desired.id,
        engine: desired.engine,
        spec_hash: hash,
        port: launch.port,
        ports: [...run.ports],
        log_path: paths.log,
        launch,
        desired: desired.launch,
      },
      opts.clock.now(),
    );
    return { proc, key, argv: [...argv] };
  } catch (e) {
    return {
      reason: `cannot spawn ${argv[0]}: ${errorMessage(e)}`,
      kind: "restartable",
    };
  }
}

/** A file-mode warning as the supervisor's event; a broken listener must not break the start. */
function tell(opts: ResolvedOptions, shard: string, message: string): void {
  try {
    opts.onEvent({ at: opts.clock.now(), shard, kind: "file_mode", message });
  } catch {
    // Supervision goes on.
  }
}

/** Why a run whose process is gone ended. */
export interface RunEnd {
  /** In words. */
  reason: string;
  /** `permanent` when the engine refused its arguments: it would refuse them again. */
  kind: FailureKind;
  /** Its exit status, when this agent was its parent. */
  exit: ExitStatus | null;
}

/**
 * Why the run ended, from its exit status and its last log lines. Call it
 * after the group is killed: that reaps the child, so its status is known.
 */
export function runEnd(proc: EngineProcess | null, pid: number | null, tail: string[]): RunEnd {
  const status = proc?.exit ?? null;
  const exit = status === null ? null : { code: status.code, signal: status.signal };
  const reason = exitReason(status, pid);
  const code = exit !== null && exit.signal === null ? exit.code : null;
  const refused = argumentRefusal(code, tail);
  if (refused !== null) {
    return {
      reason: `${reason}: the engine refused its arguments: ${refused}`,
      kind: "permanent",
      exit,
    };
  }
  return { reason, kind: "restartable", exit };
}
