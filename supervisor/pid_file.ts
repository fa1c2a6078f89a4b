/**
 * Pid files with a fingerprint, for orphan adoption (design §9.2): the agent
 * may restart while engines keep serving, and it must adopt its engines, but
 * pids get reused and adopting an unrelated process is worse than leaking
 * the original.
 *
 * @module
 */
import { scrubKeyArgs } from "../engines/api_key.ts";
import { reopenPorts } from "../engines/port_block.ts";
import type { DesiredLaunch, ShardLaunch } from "../engines/types.ts";
import { isRunning, readCmdline, readProcStat } from "./proc.ts";
import { errorMessage } from "../text/error_message.ts";
import { writeSecretFile } from "../http/secret_file.ts";

/** What a pid file records about one shard's process. */
export interface PidRecord {
  /** Format version. */
  version: 1;
  /** The shard. */
  shard_id: string;
  /** The engine plugin. */
  engine: string;
  /** Hash of what was launched, to tell a changed shard from the same one. */
  spec_hash: string;
  /** The process (group leader). */
  pid: number;
  /** Its process group (= pid: shards run in their own session). */
  pgid: number;
  /** Kernel start time of the process (clock ticks since boot). */
  start_time: number;
  /** Its command line as /proc shows it once the exec chain settled. */
  cmdline: string[];
  /** The HTTP port it serves on. */
  port: number;
  /** Every port the agent allocated to it (a block from its range); absent in older files. */
  ports?: number[];
  /** Where its output goes. */
  log_path: string;
  /** When it was started (ms since epoch). */
  started_at: number;
  /** What it was launched from, so a new agent can probe it with the plugin's probes. */
  launch: ShardLaunch;
  /**
   * The launch as the control plane sent it (its own ports open), so a new
   * agent adopts the shard as desired without undoing `launch`'s ports.
   * Absent in files from older agents.
   */
  desired?: DesiredLaunch;
}

/**
 * The launch an adopted shard was desired with: as recorded, or for a file
 * from an older agent its launch with the ports the agent filled in opened
 * again (engines/port_block.ts `reopenPorts`). Either way a restart takes
 * ports from the agent's range anew instead of reusing ones that may be
 * anyone's by then.
 */
export function desiredLaunchOf(record: PidRecord): DesiredLaunch {
  return record.desired ?? reopenPorts(record.launch);
}

/**
 * Writes a pid file atomically, owner-only (0600): its command line holds
 * the key of an engine that takes it as a flag.
 */
export function writePidFile(path: string, record: PidRecord): void {
  writeSecretFile(path, JSON.stringify(record, null, 2) + "\n");
}

/** Reads a pid file; null with a reason when it is missing or unreadable. */
export function readPidFile(path: string): { record: PidRecord } | { error: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(Deno.readTextFileSync(path));
  } catch (e) {
    return {
      error: e instanceof Deno.errors.NotFound ? "missing" : `unreadable: ${errorMessage(e)}`,
    };
  }
  const r = raw as Partial<PidRecord>;
  const ok = r?.version === 1 && typeof r.shard_id === "string" && Number.isInteger(r.pid) &&
    Number.isInteger(r.pgid) && Number.isInteger(r.start_time) && Array.isArray(r.cmdline) &&
    typeof r.spec_hash === "string" && typeof r.log_path === "string" && Number.isInteger(r.port) &&
    typeof r.engine === "string" && typeof r.launch === "object" && r.launch !== null &&
    (r.desired === undefined || (typeof r.desired === "object" && r.desired !== null));
  return ok ? { record: r as PidRecord } : { error: "not a pid file of this version" };
}

/**
 * Checks that the process a record names is still the one that was started:
 * same pid, same kernel start time, same command line. Returns the reason
 * when it is not.
 */
export function checkFingerprint(record: PidRecord): { ok: true } | { ok: false; why: string } {
  const stat = readProcStat(record.pid);
  if (stat === null || stat.state === "Z") {
    return { ok: false, why: `pid ${record.pid} is not running` };
  }
  if (stat.startTime !== record.start_time) {
    return {
      ok: false,
      why:
        `pid ${record.pid} now belongs to another process (started at tick ${stat.startTime}, not ${record.start_time})`,
    };
  }
  const cmdline = readCmdline(record.pid);
  if (cmdline === null || cmdline.join("\0") !== record.cmdline.join("\0")) {
    return {
      ok: false,
      why: `pid ${record.pid} runs "${
        scrubKeyArgs(cmdline ?? []).join(" ").slice(0, 120)
      }", not the recorded command`,
    };
  }
  if (stat.pgid !== record.pgid) {
    return {
      ok: false,
      why: `pid ${record.pid} is in process group ${stat.pgid}, not ${record.pgid}`,
    };
  }
  return { ok: true };
}

/** A fingerprint of a running process, or null when it is gone. */
export function fingerprint(
  pid: number,
): { start_time: number; cmdline: string[]; pgid: number } | null {
  const stat = readProcStat(pid);
  const cmdline = readCmdline(pid);
  if (stat === null || cmdline === null || !isRunning(pid)) return null;
  return { start_time: stat.startTime, cmdline, pgid: stat.pgid };
}
